/**
 * The simulator's `RoundMemo` (round-memo.ts says what is shared and why it is safe): one per
 * simulated room, handed to its host and workers beside the vector interner, and the room's
 * seeded init, made once.
 *
 * Lifetimes. Results are kept per fragment for its newest round only: a call for a newer round
 * lets the older round's go, and one for an older round (a replica that lags) computes without
 * keeping. Bytes a result was computed from are kept by reference, to compare the next caller's
 * with: nothing writes to a message's bytes once sent (the simulated network hands the same bytes
 * to every recipient on that contract). Object ids come from a counter and are kept weakly: an id
 * is never reused, so a key naming a dead object can never match again.
 */
import { buildLayout, type GptConfig, initParameters } from '@shoal/model';
import type { RoundMemo, RoundScope } from '@shoal/swarm';
import { sameBytes } from './same-bytes.ts';

/** Results kept under one key in a round (different bytes: a peer that sends each replica its own). */
const PER_KEY = 4;

interface Entry {
  bytes: readonly Uint8Array[];
  value: unknown;
}

const sameInputs = (a: readonly Uint8Array[], b: readonly Uint8Array[]) =>
  a.length === b.length && a.every((bytes, i) => sameBytes(bytes, b[i] as Uint8Array));

export class SharedRounds implements RoundMemo {
  private readonly ids = new WeakMap<object, number>();
  private nextId = 1;
  private readonly rounds = new Map<number, { round: number; entries: Map<string, Entry[]> }>();
  private init: { key: string; params: Float32Array } | null = null;
  /** Results found computed already (work not repeated). */
  hits = 0;
  /** Results computed here. */
  misses = 0;
  /** Per kind of work (a key's first word: decoded, step, aggregate…), results found and computed. */
  readonly tally = new Map<string, { hits: number; misses: number }>();

  /**
   * The seeded init of a model (initParameters), made once for the host and every worker of the
   * room instead of once each: it is only read (gathered into fragments, copied by engines).
   */
  seededInit(model: GptConfig, seed: number): Float32Array {
    const key = JSON.stringify([model, seed]);
    if (this.init?.key !== key) this.init = { key, params: initParameters(buildLayout(model), seed) };
    return this.init.params;
  }

  id(object: object): number {
    let id = this.ids.get(object);
    if (id === undefined) {
      id = this.nextId++;
      this.ids.set(object, id);
    }
    return id;
  }

  recall<T>(scope: RoundScope, key: string, bytes: readonly Uint8Array[], compute: () => T): T {
    return this.find(scope, key, bytes, false, compute);
  }

  handOff<T>(scope: RoundScope, key: string, bytes: readonly Uint8Array[], compute: () => T): T {
    return this.find(scope, key, bytes, true, compute);
  }

  private find<T>(scope: RoundScope, key: string, bytes: readonly Uint8Array[], take: boolean, compute: () => T): T {
    const entries = this.entriesOf(scope);
    const list = entries?.get(key) ?? [];
    const index = list.findIndex((entry) => sameInputs(entry.bytes, bytes));
    const kind = key.split(' ', 1)[0] as string;
    const tally = this.tally.get(kind) ?? { hits: 0, misses: 0 };
    this.tally.set(kind, tally);
    if (index >= 0) {
      this.hits++;
      tally.hits++;
      const { value } = list[index] as Entry;
      if (take) list.splice(index, 1);
      return value as T;
    }
    const value = compute();
    this.misses++;
    tally.misses++;
    if (entries) {
      list.push({ bytes, value });
      if (list.length > PER_KEY) list.shift();
      entries.set(key, list);
    }
    return value;
  }

  /** The results kept for this round of its fragment (a newer round starts afresh); null for an older round. */
  private entriesOf({ fragment, round }: RoundScope): Map<string, Entry[]> | null {
    const kept = this.rounds.get(fragment);
    if (kept && kept.round > round) return null;
    if (kept?.round === round) return kept.entries;
    const entries = new Map<string, Entry[]>();
    this.rounds.set(fragment, { round, entries });
    return entries;
  }
}
