/**
 * The rooms this browser hosted, above the room form: each one's status, creation time and
 * checkpoint, with Resume (or, a room whose schedule ended, train on in a new room) and Forget.
 */
import { useEffect, useState } from 'react';
import { forgetRoom, listRooms, type RoomLinkRecord } from '../runtime/checkpoint-store.ts';
import type { CheckpointInfo } from '../runtime/messages.ts';
import { statusLabel } from '../session/room-link.ts';
import { fmt } from '../ui/parts.tsx';
import { endedBySchedule } from './train-on.ts';

/**
 * The rooms this browser hosted: one row each, its status, when it was created, Resume (a room its
 * schedule ended: train on in a new room, or open it) and Forget.
 */
export function HostedRooms({ onProblem }: { onProblem: (problem: string) => void }) {
  const [rooms, setRooms] = useState<{ link: RoomLinkRecord; info: CheckpointInfo | null }[]>([]);
  useEffect(() => {
    listRooms().then(setRooms, () => setRooms([]));
  }, []);
  const forget = async (roomId: string) => {
    if (!confirm(`Forget room ${roomId}? Its checkpoint, text and host key are deleted from this browser.`)) return;
    try {
      await forgetRoom(roomId);
      setRooms((all) => all.filter(({ link }) => link.roomId !== roomId));
    } catch (error) {
      onProblem(`Could not forget ${roomId}: ${(error as Error).message}`);
    }
  };
  if (rooms.length === 0) return null;
  return (
    <section className="card" aria-labelledby="hosted-rooms-title">
      <h2 id="hosted-rooms-title">Rooms hosted from this browser</h2>
      <div className="table-scroll">
        <table className="grid hosted-rooms" data-testid="hosted-rooms">
          <thead>
            <tr>
              <th scope="col">Room</th>
              <th scope="col">Status</th>
              <th scope="col">Created</th>
              <th scope="col">Checkpoint</th>
              <th scope="col">
                <span className="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {rooms.map(({ link, info }) => (
              <tr key={link.roomId}>
                <th scope="row" className="mono">
                  {link.roomId}
                </th>
                <td>
                  <span className={`status ${link.status}`}>
                    {endedBySchedule(link, info) ? 'schedule done' : statusLabel[link.status]}
                  </span>
                </td>
                <td>{new Date(link.createdAt).toLocaleString()}</td>
                <td>
                  {info
                    ? `step ${fmt.count(info.step)}, saved ${new Date(info.savedAt).toLocaleString()}`
                    : 'none yet: it is written after the first round'}
                </td>
                <td className="row-actions">
                  {info && endedBySchedule(link, info) ? (
                    <>
                      <a
                        href={`/host?trainOn=${encodeURIComponent(link.roomId)}`}
                        aria-label={`Train on from room ${link.roomId}’s checkpoint in a new room`}
                      >
                        Train on from this checkpoint in a new room
                      </a>{' '}
                      <a href={`/host/${encodeURIComponent(link.roomId)}`} aria-label={`Open room ${link.roomId}`}>
                        Open
                      </a>
                    </>
                  ) : (
                    info && (
                      <a href={`/host/${encodeURIComponent(link.roomId)}`} aria-label={`Resume room ${link.roomId}`}>
                        Resume
                      </a>
                    )
                  )}{' '}
                  <button
                    type="button"
                    className="link small"
                    aria-label={`Forget room ${link.roomId}`}
                    title="delete this room's checkpoint and link from this browser"
                    onClick={() => void forget(link.roomId)}
                  >
                    Forget
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}
