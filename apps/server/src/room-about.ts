/**
 * What a room trains, in the words a join page shows before a person consents: the model preset
 * (when the run's model has a preset's shape), its parameter count and the text's name, read off
 * the host's published run config.
 */
import { buildLayout, PRESETS } from '@shoal/model';
import type { RunConfig } from '@shoal/protocol';
import type { RoomAbout } from '@shoal/signaling';

export function roomAbout(config: RunConfig): RoomAbout {
  const { model } = config;
  const preset = Object.entries(PRESETS).find(([, shape]) =>
    (Object.keys(shape) as (keyof typeof shape)[]).every((key) => shape[key] === model[key]),
  );
  return {
    preset: preset ? preset[0] : null,
    // buildLayout lists the tensors and sums their sizes: no parameter is allocated
    params: buildLayout(model).size,
    corpus: config.data.corpus,
  };
}
