/**
 * /host?trainOn=ROOM: a new room that trains on from the last checkpoint of a room whose schedule
 * ended (this browser hosted it): what the checkpoint holds, the new schedule's length and what it
 * does to the learning rate, and Create. The finished room stays in the list as it was.
 */
import { useEffect, useState } from 'react';
import { loadRoomFiles } from '../runtime/checkpoint-store.ts';
import type { CheckpointInfo } from '../runtime/messages.ts';
import { type HostSession, trainOnRoom } from '../session/host-session.ts';
import { fmt } from '../ui/parts.tsx';
import { parseScheduleSteps, proposedScheduleSteps, trainOnText } from './train-on.ts';

export function TrainOn({ fromId, onCreated }: { fromId: string; onCreated: (session: HostSession) => void }) {
  const [info, setInfo] = useState<CheckpointInfo | null | 'none'>(null);
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<string | null>(null);
  useEffect(() => {
    loadRoomFiles(fromId).then(
      (files) => {
        setInfo(files?.info ?? 'none');
        if (files?.info) setText(String(proposedScheduleSteps(files.info)));
      },
      () => setInfo('none'),
    );
  }, [fromId]);
  if (info === null) return <p className="muted">Reading room {fromId}’s checkpoint…</p>;
  if (info === 'none') {
    return (
      <div className="card bad" role="alert">
        This browser holds no checkpoint of room {fromId}: it cannot train on from it. <a href="/host">Host a room</a>
      </div>
    );
  }
  const parsed = parseScheduleSteps(text, info);
  const create = async () => {
    if ('error' in parsed) return;
    setBusy(true);
    setProblem(null);
    try {
      onCreated(await trainOnRoom(fromId, parsed.steps));
    } catch (error) {
      setProblem((error as Error).message);
      setBusy(false);
    }
  };
  return (
    <>
      <h1>Train on from room {fromId}</h1>
      <form
        className="card"
        data-testid="train-on"
        noValidate
        onSubmit={(event) => {
          event.preventDefault();
          if (!busy) void create();
        }}
      >
        <p>
          A new room, with its own join and watch links, starts from room <span className="mono">{fromId}</span>’s last
          checkpoint: step {fmt.count(info.step)}, {fmt.tokens(info.tokens)}, saved{' '}
          {new Date(info.savedAt).toLocaleString()}. The model, the text and every other setting stay as they were.
        </p>
        <div className="field">
          <label htmlFor="train-on-steps">Schedule steps</label>
          <input
            id="train-on-steps"
            name="scheduleSteps"
            inputMode="numeric"
            value={text}
            aria-invalid={'error' in parsed}
            aria-describedby="train-on-help"
            onChange={(e) => setText(e.target.value)}
          />
          <small id="train-on-help" className={'error' in parsed ? 'field-error' : 'muted'}>
            {'error' in parsed ? parsed.error : trainOnText(info, parsed.steps)}
          </small>
        </div>
        <div className="actions">
          <button type="submit" className="primary" disabled={busy || 'error' in parsed}>
            {busy ? 'Creating…' : 'Create the room'}
          </button>
          <a href="/host">Cancel</a>
          {problem && (
            <span className="field-error" role="alert">
              {problem}
            </span>
          )}
        </div>
      </form>
    </>
  );
}
