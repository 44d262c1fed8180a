import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  DATASETS_PATH,
  DEFAULT_SIGNALING_LIMITS,
  type IceServer,
  listDatasets,
  resolveIceServers,
  resolveRoomsDir,
  type SignalingLimits,
  startServer,
} from '@shoal/server';
import { UsageError } from './usage.ts';

export interface ServerCliOptions {
  port?: number;
  host: string;
  /** `name=value` pairs, one per --limit. */
  limit?: string[];
  /** A JSON array of RTCIceServer (overrides SHOAL_ICE_SERVERS). */
  iceServers?: string;
  /** Where rooms are kept across restarts (overrides SHOAL_ROOMS_DIR). */
  roomsDir?: string;
  /** False (`--no-persist`): rooms in memory only. */
  persist?: boolean;
  /** A folder of packed datasets (`shoal data pack`) to serve at /datasets/. */
  datasets?: string;
}

/** `["maxPeersPerRoom=8", …]` → limits; an unknown name or a bad value is a one-line error. */
export function parseLimits(pairs: string[] = []): Partial<SignalingLimits> {
  const names = Object.keys(DEFAULT_SIGNALING_LIMITS) as (keyof SignalingLimits)[];
  const limits: Partial<SignalingLimits> = {};
  for (const pair of pairs) {
    const [name, raw, ...rest] = pair.split('=');
    if (!names.includes(name as keyof SignalingLimits) || raw === undefined || rest.length > 0) {
      throw new UsageError(`--limit ${pair}: expected NAME=VALUE with NAME one of ${names.join(', ')}`);
    }
    const value = Number(raw);
    if (!Number.isFinite(value) || value <= 0)
      throw new UsageError(`--limit ${pair}: the value must be a positive number`);
    limits[name as keyof SignalingLimits] = value;
  }
  return limits;
}

export async function serverCommand(options: ServerCliOptions): Promise<void> {
  const port = options.port ?? (process.env.PORT ? Number(process.env.PORT) : 8080);
  const limits = parseLimits(options.limit);
  let iceServers: IceServer[] | undefined;
  try {
    iceServers = options.iceServers === undefined ? undefined : resolveIceServers(undefined, options.iceServers);
  } catch (error) {
    throw new UsageError(`--ice-servers: ${(error as Error).message.replace(/^SHOAL_ICE_SERVERS /, '')}`);
  }
  const roomsDir = resolveRoomsDir(options);
  const datasetsDir = options.datasets === undefined ? undefined : resolve(options.datasets);
  if (datasetsDir !== undefined && !statSync(datasetsDir, { throwIfNoEntry: false })?.isDirectory()) {
    throw new UsageError(
      `--datasets ${options.datasets}: no such folder (pack one with: shoal data pack INPUT --out DIR)`,
    );
  }
  // JSON lines on stdout, also when a test (under Vitest) runs this command as a process
  const logger = (line: string) => process.stdout.write(`${line}\n`);
  const server = await startServer({
    port,
    host: options.host,
    limits,
    iceServers,
    roomsDir,
    datasetsDir,
    logger,
  }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'EADDRINUSE') {
      console.error(
        `shoal server: port ${port} is already in use. Stop the other server, or pick another port: PORT=8081 npm start`,
      );
    } else {
      console.error(`shoal server: ${error.message}`);
    }
    process.exit(1);
  });
  const { restoredRooms } = server.signalingStats();
  console.log(
    server.roomsDir
      ? `Rooms are kept in ${server.roomsDir} (${restoredRooms} taken back); --no-persist keeps them in memory only.`
      : 'Rooms are kept in memory only: a restart forgets them.',
  );
  if (datasetsDir !== undefined) {
    const datasets = listDatasets(datasetsDir);
    console.log(
      `Serving ${datasets.length} dataset${datasets.length === 1 ? '' : 's'} from ${datasetsDir} at ${server.url}${DATASETS_PATH}` +
        datasets
          .map(
            (dataset) =>
              `\n  ${server.url}${dataset.url}  (${dataset.shards} shards, ${(dataset.bytes / 2 ** 20).toFixed(1)} MiB)`,
          )
          .join(''),
    );
  }
  console.log(`Shoal is running. Open ${server.url} in a browser with WebGPU.`);
  const stop = () => {
    server.close().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
