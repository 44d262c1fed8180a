/**
 * Creating the room from the room form: the packed dataset opened (a failure is said beside its
 * URL), the room's config made, the host session started; whether that is under way, and the
 * problem that stopped it.
 */
import type { RunOptions } from '@shoal/room/run-options';
import { useState } from 'react';
import { openRoomDataset } from '../runtime/packed-dataset.ts';
import { type RoomDataset, roomConfigOf } from '../session/host-config.ts';
import { createRoom, type HostSession } from '../session/host-session.ts';
import type { StartingCheckpoint } from './CheckpointField.tsx';
import type { DatasetChoice } from './DatasetChoice.tsx';

export function useCreateRoom(
  values: RunOptions,
  checkpoint: StartingCheckpoint | null,
  dataset: DatasetChoice,
  onCreated: (session: HostSession) => void,
) {
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<string | null>(null);
  const create = async () => {
    setProblem(null);
    setBusy(true);
    try {
      const upload = dataset.kind === 'upload' && dataset.text ? dataset.text : undefined;
      let packed: RoomDataset | undefined;
      if (dataset.kind === 'packed') {
        try {
          packed = await openRoomDataset(dataset.url, location.origin);
        } catch (error) {
          // said beside the URL, which the person changes next
          dataset.setProblem((error as Error).message);
          setBusy(false);
          return;
        }
      }
      const config = roomConfigOf(values, checkpoint?.model, upload, packed);
      // copies: the worker takes the buffers, the form keeps its own
      const corpus = upload ? { name: config.data.corpus, bytes: upload.bytes.slice() } : null;
      onCreated(await createRoom(config, checkpoint ? checkpoint.params.slice() : null, corpus));
    } catch (error) {
      setProblem((error as Error).message);
      setBusy(false);
    }
  };
  return { busy, problem, setProblem, create };
}
