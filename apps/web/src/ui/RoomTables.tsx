/**
 * The room's tables, shared by the dashboard and the watch page: the peers (volunteers), with
 * each one's stage in a pipeline room, and the fragment-sync timeline (each round's open →
 * reduce → gather → committed/aborted).
 */
import type { RoomViewRound } from '@shoal/protocol';
import type { RoomViewPeerRow } from '@shoal/room';
import { memo } from 'react';
import { fmt } from './parts.tsx';
import { placeLabel } from './pipeline-text.ts';

export const PeersTable = memo(function PeersTable({
  peers,
  pipeline = false,
  onKick,
}: {
  peers: RoomViewPeerRow[];
  /** A pipeline room: a Stage column (group, stage, blocks). */
  pipeline?: boolean;
  onKick?: (peer: string) => void;
}) {
  const volunteers = peers.filter((peer) => peer.role === 'worker');
  if (volunteers.length === 0) {
    return <p className="muted">No volunteers yet. Share the join link: each one who opens it lends a GPU.</p>;
  }
  return (
    <div className="table-scroll">
      <table className="grid" data-testid="peers-table">
        <thead>
          <tr>
            <th>Volunteer</th>
            {pipeline && <th>Stage</th>}
            <th>Adapter</th>
            <th>Status</th>
            <th className="num">Speed</th>
            <th className="num">Steps</th>
            <th className="num" title="training loss in bits per byte (nats in each cell’s tooltip)">
              Loss, bits/byte
            </th>
            <th className="num">Rounds</th>
            <th className="num" title="its tokens ÷ the room’s, since it joined">
              Share
            </th>
            <th>Rejected</th>
            <th className="num">Sent</th>
            <th>Last seen</th>
            {onKick && <th aria-label="actions" />}
          </tr>
        </thead>
        <tbody>
          {volunteers.map((peer) => {
            const rejected = Object.entries(peer.rejected);
            return (
              <tr key={peer.peer} data-testid="peer-row">
                <td className="mono" title={peer.peer}>
                  {peer.peer.slice(0, 8)}
                </td>
                {pipeline && (
                  <td className="mono" data-testid="peer-stage">
                    {peer.pipeline ? placeLabel(peer.pipeline) : <span className="muted">not placed</span>}
                  </td>
                )}
                <td title={peer.adapter}>
                  <span className="badge">{peer.backend}</span> {peer.adapter}
                </td>
                <td>
                  <span className={`status ${peer.status}`}>{peer.status}</span>
                  {peer.reason && <div className="muted small">{peer.reason}</div>}
                </td>
                <td className="num">{fmt.rate(peer.tokensPerSecond)}</td>
                <td className="num">{fmt.count(peer.innerStep)}</td>
                <td className="num" title={fmt.loss(peer.loss)}>
                  {fmt.lossBits(peer.loss)}
                </td>
                <td className="num">{fmt.count(peer.roundsContributed)}</td>
                <td className="num">{fmt.percent(peer.share)}</td>
                <td>
                  {rejected.length === 0
                    ? '—'
                    : rejected.map(([reason, count]) => (
                        <span key={reason} className="badge bad">
                          {count}× {reason}
                        </span>
                      ))}
                </td>
                <td className="num">{fmt.bytes(peer.bytesSent)}</td>
                <td>{fmt.ago(peer.lastSeenMs)}</td>
                {onKick && (
                  <td>
                    <button type="button" className="ghost small" onClick={() => onKick(peer.peer)}>
                      Kick
                    </button>
                  </td>
                )}
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
});

const seconds = (ms: number | null, from: number) => (ms === null ? '—' : `+${((ms - from) / 1000).toFixed(1)} s`);

export const RoundsTimeline = memo(function RoundsTimeline({ rounds }: { rounds: RoomViewRound[] }) {
  if (rounds.length === 0) return <p className="muted">No rounds yet: the first opens after H inner steps.</p>;
  const recent = [...rounds].reverse().slice(0, 12);
  // bars on a shared scale: the slowest recent round spans the full width
  const longest = Math.max(
    1,
    ...recent.map((r) => (r.endedAt ?? r.gatheredAt ?? r.reducedAt ?? r.openedAt) - r.openedAt),
  );
  return (
    <div className="table-scroll">
      <table className="grid timeline" data-testid="rounds-timeline">
        <thead>
          <tr>
            <th>Fragment · round</th>
            <th className="num">Participants</th>
            <th>open → reduce → gather → end</th>
            <th>Outcome</th>
          </tr>
        </thead>
        <tbody>
          {recent.map((round) => {
            const end = round.endedAt ?? round.gatheredAt ?? round.reducedAt ?? round.openedAt;
            const part = (at: number | null) => (at === null ? 0 : ((at - round.openedAt) / longest) * 100);
            return (
              <tr key={`${round.fragment}-${round.round}`}>
                <td className="mono">
                  p{round.fragment} · r{round.round}
                </td>
                <td className="num">{round.participants}</td>
                <td>
                  <div
                    className="phase-bar"
                    title={`reduced ${seconds(round.reducedAt, round.openedAt)}, gathered ${seconds(round.gatheredAt, round.openedAt)}, ended ${seconds(round.endedAt, round.openedAt)}`}
                  >
                    <span className="phase reduce" style={{ width: `${part(round.reducedAt)}%` }} />
                    <span
                      className="phase gather"
                      style={{ width: `${Math.max(0, part(round.gatheredAt) - part(round.reducedAt))}%` }}
                    />
                    <span
                      className="phase commit"
                      style={{
                        width: `${Math.max(0, part(end) - Math.max(part(round.gatheredAt), part(round.reducedAt)))}%`,
                      }}
                    />
                  </div>
                  <span className="muted small">{seconds(end, round.openedAt)}</span>
                </td>
                <td>
                  <span className={`status ${round.outcome}`}>{round.outcome}</span>{' '}
                  <span className="muted small mono">{round.detail}</span>
                  {round.waitingFor && round.waitingFor.length > 0 && (
                    <span className="small" data-testid="round-waiting">
                      {' '}
                      waiting for <span className="mono">{round.waitingFor.join(', ')}</span>
                    </span>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
});
