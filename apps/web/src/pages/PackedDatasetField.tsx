/**
 * The host form's "Packed dataset (URL)": an http(s) URL or a /datasets/NAME/ path of this server,
 * with the datasets this server serves (GET /datasets/, `shoal server --datasets`) to pick from.
 * A server that serves none answers 404: then only the URL field shows. Whether the URL holds a
 * dataset is checked when the room is created (its manifest is read then).
 */
import { useEffect, useState } from 'react';
import { formatBytes } from '../charts/format.ts';
import { listServedDatasets, type ServedDataset } from '../runtime/packed-dataset.ts';

export function PackedDatasetField({
  url,
  error,
  onChange,
}: {
  url: string;
  /** The URL's problem, or the last attempt to open it (404, not a manifest, CORS). */
  error: string | undefined;
  onChange(url: string): void;
}) {
  const [served, setServed] = useState<ServedDataset[]>([]);
  useEffect(() => {
    let live = true;
    void listServedDatasets(location.origin).then((list) => live && setServed(list));
    return () => {
      live = false;
    };
  }, []);
  return (
    <div className="field" data-testid="packed-dataset">
      {served.length > 0 && (
        <ul className="served-datasets" data-testid="served-datasets" aria-label="Datasets this server serves">
          {served.map((dataset) => (
            <li key={dataset.url}>
              <label className="inline">
                <input
                  type="radio"
                  name="served-dataset"
                  value={dataset.url}
                  checked={url === dataset.url}
                  onChange={() => onChange(dataset.url)}
                />
                <strong>{dataset.name}</strong>{' '}
                <span className="muted small">
                  ({formatBytes(dataset.bytes)}, {dataset.shards} shards, manifest{' '}
                  <code className="mono">{dataset.manifest.slice(0, 12)}</code>)
                </span>
              </label>
            </li>
          ))}
        </ul>
      )}
      <label htmlFor="dataset-url">Dataset URL</label>
      <input
        id="dataset-url"
        type="url"
        autoComplete="off"
        placeholder="https://…/my-dataset/ or /datasets/NAME/"
        value={url}
        aria-invalid={url !== '' && error !== undefined}
        aria-describedby="dataset-url-help"
        onChange={(e) => onChange(e.target.value)}
      />
      <small id="dataset-url-help" className={url !== '' && error ? 'field-error' : 'muted'}>
        {url !== '' && error
          ? error
          : 'The folder of a packed dataset (manifest.json and its shards), on this server or any host that allows other sites to read it (CORS).'}
      </small>
    </div>
  );
}
