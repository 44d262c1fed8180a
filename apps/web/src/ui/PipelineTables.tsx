/**
 * A pipeline-parallel room's groups and stages, on the dashboard (and the watch page, once the
 * published view carries them): the run's pipeline settings, then a grid of replica groups (rows)
 * by stages (columns), each cell the volunteer holding that stage and its status, or an empty
 * slot waiting for a volunteer. Everything shown comes from the room view's `pipeline` section.
 * On the volunteer page: which group and stage this volunteer holds, and who holds the others.
 */

import type { RoomViewPipeline } from '@shoal/protocol';
import type { RoomViewPeerRow } from '@shoal/room';
import { memo } from 'react';
import type { VolunteerPipeline } from '../runtime/messages.ts';
import { StatTiles } from './parts.tsx';
import { blocksLabel, pipelineSettings, stageDetail, stagesLabel, stageWaiting } from './pipeline-text.ts';

export const PipelineGroups = memo(function PipelineGroups({
  pipeline,
  peers,
}: {
  pipeline: RoomViewPipeline;
  peers: RoomViewPeerRow[];
}) {
  const statusOf = new Map(peers.map((peer) => [peer.peer, peer.status]));
  return (
    <>
      <div data-testid="pipeline-settings">
        <StatTiles stats={pipelineSettings(pipeline).map(([label, value, hint]) => ({ label, value, hint }))} />
      </div>
      {pipeline.groups.length === 0 ? (
        <p className="muted">No groups yet: each volunteer who joins takes the first empty stage of a group.</p>
      ) : (
        <div className="table-scroll">
          <table className="grid pipeline-groups" data-testid="pipeline-groups">
            <caption>
              Each row is a replica group, each column a stage; a group trains once every stage is held.
            </caption>
            <thead>
              <tr>
                <th scope="col">Group</th>
                {pipeline.split.map((stage) => (
                  <th scope="col" key={stage.stage}>
                    Stage {stage.stage}
                    <div className="muted small stage-detail">{stageDetail(stage)}</div>
                  </th>
                ))}
                <th scope="col">State</th>
              </tr>
            </thead>
            <tbody>
              {pipeline.groups.map((group) => (
                <tr key={group.id} data-testid="group-row">
                  <th scope="row" className="mono" title={`version ${group.version}`}>
                    g{group.id}
                  </th>
                  {group.members.map((peer, stage) =>
                    peer ? (
                      // biome-ignore lint/suspicious/noArrayIndexKey: a stage's column is its index
                      <td key={stage} data-testid="group-slot">
                        <span className="mono" title={peer}>
                          {peer.slice(0, 8)}
                        </span>{' '}
                        <span className={`status ${statusOf.get(peer) ?? ''}`}>{statusOf.get(peer) ?? '—'}</span>
                      </td>
                    ) : (
                      // biome-ignore lint/suspicious/noArrayIndexKey: a stage's column is its index
                      <td key={stage} data-testid="group-slot">
                        <span className="slot-empty">waiting for a volunteer</span>
                      </td>
                    ),
                  )}
                  <td>
                    {group.complete ? (
                      <span className="status training">trains</span>
                    ) : (
                      <span className="status waiting">waiting for {stagesLabel(group.waitingFor)}</span>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {pipeline.unplaced.length > 0 && (
        <p className="muted small" data-testid="pipeline-unplaced">
          In no group (no stage fits their memory): {pipeline.unplaced.map((peer) => peer.slice(0, 8)).join(', ')}
        </p>
      )}
    </>
  );
});

/** This volunteer's place in a pipeline room: its group and stage, and who holds the others. */
export function VolunteerStage({ pipeline }: { pipeline: VolunteerPipeline }) {
  const { place, group, stages } = pipeline;
  const waiting = stageWaiting(pipeline);
  return (
    <section className="card" data-testid="volunteer-stage" aria-labelledby="stage-heading">
      <h2 id="stage-heading">Your stage</h2>
      <p data-testid="volunteer-place">
        {place ? (
          <>
            Group <strong>g{place.group}</strong>, stage <strong>{place.stage}</strong> of {stages} (
            {blocksLabel(place.firstBlock, place.endBlock)} of the model): you pass activations on to the next stage and
            gradients back to the previous one.
          </>
        ) : (
          'Not in a group yet: the host places each volunteer in the first empty stage of a group.'
        )}
      </p>
      {place && group && (
        <ul className="plain small" aria-label={`group g${place.group}'s stages`}>
          {group.members.map((peer, stage) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: a stage is its index
            <li key={stage}>
              Stage {stage}:{' '}
              {stage === place.stage ? (
                <strong>you</strong>
              ) : peer ? (
                <span className="mono" title={peer}>
                  {peer.slice(0, 8)}
                </span>
              ) : (
                <span className="slot-empty">waiting for a volunteer</span>
              )}
            </li>
          ))}
        </ul>
      )}
      {waiting && (
        <p role="status" data-testid="stage-waiting">
          {waiting}
        </p>
      )}
    </section>
  );
}
