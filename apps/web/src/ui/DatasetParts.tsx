/**
 * A packed dataset on a page: what it is (name, shards, manifest), and on the volunteer page the
 * shard this volunteer draws from and its shard cache ("Shard cache: 0.13 of 0.25 MiB").
 */

import { DEFAULT_BUDGET_SHARDS } from '@shoal/data';
import { useState } from 'react';
import { useStore } from 'zustand';
import { formatBytes } from '../charts/format.ts';
import type { DatasetInfo, VolunteerShards } from '../runtime/messages.ts';
import { corpusName } from '../session/room-check.ts';
import { store } from '../store.ts';

/** MiB with two decimals under 10 MiB, one above: the cache line's unit. */
export function formatMib(bytes: number): string {
  const mib = bytes / 2 ** 20;
  return mib.toFixed(mib < 10 ? 2 : 1);
}

/** The first characters of a manifest hash, as the CLI prints it. */
export const manifestPrefix = (hash: string) => hash.slice(0, 12);

/** "Dataset: fineweb-sample (600 kB, 9 training + 1 validation shards, manifest 3f2a…, from /datasets/…)". */
export function PackedDatasetLine({ dataset, own }: { dataset: DatasetInfo; own: boolean }) {
  const packed = dataset.packed;
  if (!packed) return null;
  return (
    <p className="dataset-line" data-testid="dataset">
      <span className="muted">Dataset:</span> <strong>{corpusName(dataset.name)}</strong> ({formatBytes(dataset.bytes)},{' '}
      {packed.trainShards} training + {packed.validationShards} validation shards, manifest{' '}
      <code className="mono" title={packed.manifest}>
        {manifestPrefix(packed.manifest)}
      </code>
      ; {own ? 'this browser fetches its own training shards' : 'each volunteer fetches its own training shards'} from{' '}
      <code className="mono">{packed.url}</code>)
    </p>
  );
}

/** The volunteer's shard and cache: one line, from its stats. */
export function ShardLine({ shards }: { shards: VolunteerShards | null }) {
  if (!shards) return null;
  const { current } = shards;
  return (
    <p className="dataset-line" data-testid="shard-line">
      {current ? (
        <>
          Drawing from shard <strong data-testid="shard-current">{current.shard}</strong> (data epoch {current.epoch}
          {current.from > 0 ? `, from batch ${current.from}` : ''})
        </>
      ) : (
        <span className="muted">No shard yet: waiting for the room’s roster to deal this volunteer its shards</span>
      )}
      {' · '}
      <span data-testid="shard-cache">
        Shard cache: {formatMib(shards.heldBytes)} of {formatMib(shards.budgetBytes)} MiB
      </span>
      {' · '}
      <span className="muted">
        {shards.fetched} shards fetched, {shards.refused} refused
        {shards.cacheHits > 0 ? `, ${shards.cacheHits} from the cache` : ''}
      </span>
    </p>
  );
}

/** The text of a shard budget field: blank is the default (null), else a positive number of MiB. */
export function parseShardBudget(text: string): { mib: number | null; error?: string } {
  const trimmed = text.trim();
  if (trimmed === '') return { mib: null };
  const mib = Number(trimmed);
  if (!(mib > 0) || !Number.isFinite(mib)) return { mib: null, error: 'a positive number of MiB, or blank' };
  return { mib };
}

/**
 * Before Join: how much of a packed dataset this browser keeps at once (a dataset room only; a
 * text room ignores it). A budget below the dataset's largest shard is refused once the room's
 * dataset is known, with the size it needs.
 */
export function ShardBudgetField() {
  const budget = useStore(store, (state) => state.settings.shardBudgetMib);
  const [text, setText] = useState(budget === null ? '' : String(budget));
  const { error } = parseShardBudget(text);
  return (
    <div className="field" data-testid="shard-budget">
      <label htmlFor="shard-budget">Shard cache for a packed dataset, MiB (optional)</label>
      <input
        id="shard-budget"
        type="text"
        inputMode="decimal"
        autoComplete="off"
        placeholder={`${DEFAULT_BUDGET_SHARDS} × its largest shard`}
        value={text}
        aria-invalid={error !== undefined}
        aria-describedby="shard-budget-help"
        onChange={(e) => {
          setText(e.target.value);
          const parsed = parseShardBudget(e.target.value);
          if (parsed.error === undefined) store.getState().setSettings({ shardBudgetMib: parsed.mib });
        }}
      />
      <small id="shard-budget-help" className={error ? 'field-error' : 'muted'}>
        {error ??
          `In a room that trains on a packed dataset, the shards this browser keeps at once (in its cache storage); blank: ${DEFAULT_BUDGET_SHARDS} × the dataset’s largest shard.`}
      </small>
    </div>
  );
}
