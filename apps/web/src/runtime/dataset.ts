/**
 * The room's text in the room worker: Moby Dick from the server's static file, or a text the
 * host uploaded, which the host serves over the mesh (@shoal/swarm corpus-share.ts). Either way
 * it is checked against the run config's fingerprint before a batch is drawn from it.
 */
import { type Corpus, fetchCorpus, MOBY_DICK_FINGERPRINT } from '@shoal/data';
import type { RunConfig } from '@shoal/protocol';
import type { DatasetInfo } from './messages.ts';

/** The corpus name of the default text. */
export const MOBY_DICK = 'moby-dick';

/** Throws unless `corpus` is the text the run config names (when it names a fingerprint). */
export function checkCorpus(corpus: Corpus, config: RunConfig): Corpus {
  const expected = config.data.fingerprint ?? (config.data.corpus === MOBY_DICK ? MOBY_DICK_FINGERPRINT : undefined);
  if (expected !== undefined && corpus.fingerprint !== expected) {
    throw new Error(
      `the room trains on ${config.data.corpus} (fingerprint ${expected}), but the text loaded here is ${corpus.fingerprint}`,
    );
  }
  return corpus;
}

/** Moby Dick from `url` (the server's static file), checked. */
export async function fetchMobyDick(url: string, config: RunConfig): Promise<Corpus> {
  return checkCorpus(await fetchCorpus(url, { name: MOBY_DICK, seqLen: config.train.seqLen }), config);
}

export function datasetOf(corpus: Corpus, source: DatasetInfo['source']): DatasetInfo {
  const bytes = corpus.bytes.length;
  return { name: corpus.name, bytes, fingerprint: corpus.fingerprint, source, received: bytes };
}
