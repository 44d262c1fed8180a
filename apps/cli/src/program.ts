/**
 * The `shoal` command: each subcommand's options and action, added in the order `shoal --help`
 * lists them; the parsers and shared options they use are in program-options.ts.
 */
import { DEFAULT_DATASET_VALIDATION_FRACTION, DEFAULT_SHARD_BYTES } from '@shoal/data';
import { HOST_GRACE_MS } from '@shoal/mesh';
import { HOST_DEFAULTS } from '@shoal/room/host-defaults';
import { ROOM_MODEL_DEFAULTS } from '@shoal/room/room-model-defaults';
import { parseRunOption } from '@shoal/room/run-options';
import { DEFAULT_STAGE_LINK, METHODS } from '@shoal/sim/methods';
import { DEFAULT_PIPELINE_DEPTH } from '@shoal/swarm/step-pipeline';
import { Command, InvalidArgumentError, Option } from 'commander';
import { cacheMibOption, defaultShardCacheDir, evalBytesOption } from './datasets.ts';
import { doctorCommand } from './doctor.ts';
import { gradsCommand } from './grads.ts';
import { hostCommand } from './host.ts';
import { planCommand } from './plan.ts';
import {
  defaultThreads,
  guarded,
  MIB,
  parseBackend,
  parseByteSize,
  parseNumber,
  parsePort,
  parsePositive,
  parsePositiveInt,
  parseShardMib,
  threadsOption,
} from './program-options.ts';
import { runOption, withRunOptions } from './run-options.ts';
import { serverCommand } from './server.ts';
import { simulateCommand } from './simulate.ts';
import { trainCommand } from './train.ts';
import { workerCommand } from './worker.ts';

const HOST = HOST_DEFAULTS.cli;

/** The `shoal` command and its subcommands, unparsed (main.ts parses process.argv). */
export function createProgram(): Command {
  const threads = defaultThreads();
  const program = new Command('shoal')
    .description("Train a GPT-style language model on volunteers' GPUs, in their browsers.")
    .showHelpAfterError('(--help lists the options)');
  addDoctorCommand(program);
  addGradsCommand(program);
  addTrainCommand(program, threads);
  addSimulateCommand(program);
  addPlanCommand(program);
  addAttacksCommand(program);
  addHostCommand(program);
  addWorkerCommand(program, threads);
  addExportCommand(program);
  addDataPackCommand(program);
  addServerCommand(program);
  return program;
}

/** `shoal doctor`: checks this machine. */
function addDoctorCommand(program: Command): void {
  program
    .command('doctor')
    .description('check this machine: WebGPU adapter, a WGSL self-test, WebRTC in Node, Chromium')
    .option('--json', 'print one JSON object')
    .option('--adapter <which>', 'auto | system | lavapipe | swiftshader (default: SHOAL_ADAPTER or auto)')
    .action(async (options) => {
      process.exitCode = await doctorCommand(options);
    });
}

/** `shoal grads`: the gradient of every checkpoint tensor. */
function addGradsCommand(program: Command): void {
  program
    .command('grads')
    .description(
      'write the gradient of the mean loss for every checkpoint tensor (to check the engine against another framework)',
    )
    .requiredOption('--checkpoint <file>', 'weights, safetensors (nanoGPT names)')
    .requiredOption('--tokens <file>', 'B rows of S+1 little-endian int32 tokens')
    .requiredOption('--batch <B>', 'rows in the tokens file', parsePositiveInt)
    .requiredOption('--seq <S>', 'sequence length (inputs per row)', parsePositiveInt)
    .requiredOption('--out <file>', 'gradients, safetensors, same names and shapes')
    .option('--backend <backend>', 'webgpu | cpu', parseBackend, 'webgpu')
    .option('--json', 'print one JSON line')
    .action(guarded(gradsCommand));
}

/** `shoal train`: trains a model on this machine. */
function addTrainCommand(program: Command, threads: { n: number; description: string }): void {
  program
    .command('train')
    .description('train a model on this machine: progress bar, periodic validation, checkpoints')
    .addOption(runOption('preset'))
    .option('--steps <n>', 'optimizer steps to run (with --resume: steps to add)', parsePositiveInt, 400)
    .option('--stop-after <n>', 'stop after n steps, keeping the schedule of --steps', parsePositiveInt)
    .addOption(runOption('batch', 'sequences per step'))
    .option('--seq <T>', 'tokens per sequence (default: the preset block size)', parsePositiveInt)
    .addOption(runOption('lr', 'peak learning rate (warmup, then cosine decay to lr/10)'))
    .addOption(runOption('seed'))
    .option('--backend <backend>', 'webgpu | cpu', parseBackend, 'webgpu')
    .addOption(runOption('precision'))
    .addOption(threadsOption(threads))
    .option('--data <file>', 'UTF-8 text to train on (default: Moby Dick); the last 10% is validation')
    .addOption(
      new Option(
        '--dataset <dir|url>',
        "a packed dataset's folder or http(s) URL (`shoal data pack`): train on its training shards, validate on its validation shards",
      ).conflicts('data'),
    )
    .addOption(cacheMibOption())
    .option(
      '--cache-dir <dir>',
      '--dataset: keep fetched shards here (default: none for a folder; $XDG_CACHE_HOME/shoal/shards or ~/.cache/shoal/shards for a URL)',
    )
    .addOption(evalBytesOption())
    .option('--resume <checkpoint>', 'continue from NAME.safetensors and NAME.state.safetensors')
    .option('--checkpoint-dir <dir>', 'where checkpoints go', 'checkpoints')
    .option(
      '--checkpoint-every <n>',
      'also checkpoint every n steps (0: only at the end)',
      (v) => Number.parseInt(v, 10),
      0,
    )
    .option('--eval-every <n>', 'validation loss every n steps', (v) => Number.parseInt(v, 10), 50)
    .option('--eval-batches <n>', 'validation batches per evaluation', parsePositiveInt, 32)
    .option(
      '--json',
      'print a final JSON line {valLoss, trainLoss, valBitsPerByte, trainBitsPerByte, steps, tokens, seconds, …}',
    )
    // Both --data and --dataset: a usage error, exit 2 (commander's own exit is 1 for every error).
    .exitOverride((error) => {
      if (error.code === 'commander.conflictingOption') process.exit(2);
    })
    .action(guarded(trainCommand));
}

/** `shoal simulate`: M workers and a host in one process over a simulated network. */
function addSimulateCommand(program: Command): void {
  withRunOptions(
    program
      .command('simulate')
      .description(
        'M workers and a host in one process on the real engine, over a simulated network: dp vs DiLoCo vs Streaming DiLoCo vs DiLoCoX',
      )
      .option('--workers <M>', 'simulated workers', parsePositiveInt, ROOM_MODEL_DEFAULTS.workers),
    'simulate',
  )
    .option('--tokens <n>', 'training tokens per method, all workers together', parsePositiveInt, 1_000_000)
    .option('--methods <list>', `comma-separated: ${METHODS.join(', ')}`, 'dp,diloco,streaming,streaming-fp4')
    .option('--backend <backend>', 'cpu | webgpu', parseBackend, 'cpu')
    .option('--csv <dir>', 'write each method’s loss curve to DIR/<method>.csv')
    .option(
      '--gpu-tflops <n>',
      'modelled GPU speed for the compute time per inner step',
      parseNumber,
      ROOM_MODEL_DEFAULTS.gpuTflops,
    )
    .option('--step-ms <ms>', 'compute time per inner step (overrides --gpu-tflops)', parseNumber)
    .option('--link-mbps <n>', 'each peer’s up and down link, Mbit/s', parseNumber, ROOM_MODEL_DEFAULTS.linkMbps)
    .option('--latency-ms <ms>', 'one-way latency between peers', parseNumber, ROOM_MODEL_DEFAULTS.latencyMs)
    .option(
      '--max-memory <bytes>',
      "each volunteer's memory (e.g. 512MB, 1.5GiB): without --pipeline-stages, the fewest stages per replica that fit; with it, refuse stages that do not",
      parseByteSize,
    )
    .option(
      '--stage-link-mbps <n>',
      "the link between a pipeline replica's stage volunteers, Mbit/s each way (activations, their gradients, the tied wte gradient)",
      parseNumber,
      DEFAULT_STAGE_LINK.stageLinkMbps,
    )
    .option('--stage-latency-ms <ms>', 'one-way latency of that link', parseNumber, DEFAULT_STAGE_LINK.stageLatencyMs)
    .option('--dry-run', 'model time and bytes without training (no evaluation)')
    .option('--json', 'end with one JSON line {"methods": [...]} (and "pipeline" with S > 1 or --max-memory)')
    .action(
      guarded((options, command: Command) =>
        simulateCommand({ ...options, pipelineStagesSet: command.getOptionValueSource('pipelineStages') === 'cli' }),
      ),
    );
}

/** `shoal plan`: a room's run options from the scaling laws and the wall-clock model. */
function addPlanCommand(program: Command): void {
  program
    .command('plan')
    .description(
      "recommend a room's run options from the scaling laws and the wall-clock model: inner and outer lr, batch, H, P, τ, codec",
    )
    .addOption(
      new Option('--preset <name>', 'model size: nano | tiny | small | base')
        .argParser((raw: string) => {
          const { value, error } = parseRunOption('preset', raw);
          if (error !== undefined) throw new InvalidArgumentError(error);
          return value;
        })
        .conflicts('params'),
    )
    .option('--params <N>', 'the model as a parameter count (e.g. 35e6) instead of a preset', (value: string) => {
      const n = parseNumber(value);
      if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a whole number of parameters ≥ 1');
      return n;
    })
    .option('--workers <M>', 'expected volunteers', parsePositiveInt, ROOM_MODEL_DEFAULTS.workers)
    .option(
      '--tokens <D>',
      'token budget, all volunteers together (default: 20 per parameter, Chinchilla)',
      parsePositive,
    )
    .addOption(
      // no commander default, which would reach the planner beside --tokens-per-second: the planner applies it
      new Option(
        '--gpu-tflops <n>',
        `each volunteer's GPU, TFLOP/s (default: ${ROOM_MODEL_DEFAULTS.gpuTflops}, as shoal simulate)`,
      ).argParser(parsePositive),
    )
    .addOption(
      new Option('--tokens-per-second <n>', "each volunteer's measured training throughput, tokens/s")
        .argParser(parsePositive)
        .conflicts('gpuTflops'),
    )
    .option(
      '--link-mbps <n>',
      "each volunteer's uplink (and downlink), Mbit/s",
      parsePositive,
      ROOM_MODEL_DEFAULTS.linkMbps,
    )
    .option('--latency-ms <ms>', 'one-way latency between volunteers', parseNumber, ROOM_MODEL_DEFAULTS.latencyMs)
    .option('--seq <T>', "tokens per sequence (default: the preset's block size; 2048 with --params)", parsePositiveInt)
    .addOption(new Option('--json', 'print one JSON line, ending with the recommended options').conflicts('asFlags'))
    .option('--as-flags', 'print only the flags, for shoal host $(shoal plan … --as-flags) and shoal simulate')
    .action(guarded(planCommand));
}

/** `shoal attacks`: hostile volunteers against a room. */
function addAttacksCommand(program: Command): void {
  program
    .command('attacks')
    .description(
      'hostile volunteers against the in-memory room on the real engine (each attack beside a clean run), then against a real server on loopback and its rooms directory: stopped and detected or not',
    )
    .option('--workers <M>', 'workers in the room', parsePositiveInt, 5)
    .option('--hostile <n>', 'how many of them are hostile', parsePositiveInt, 1)
    .addOption(runOption('preset'))
    .option(
      '--tokens <n>',
      'training tokens per run, all workers together (about 11 rounds per fragment on nano)',
      parsePositiveInt,
      140_000,
    )
    .addOption(runOption('seed'))
    .option('--only <list>', 'comma-separated attack names (default: all)')
    .option('--json', 'end with one JSON line {"attacks": [...]}')
    .action(guarded(async (options) => (await import('./attacks.ts')).attacksCommand(options)));
}

/** `shoal host`: a room's host, headless. */
function addHostCommand(program: Command): void {
  withRunOptions(
    program
      .command('host')
      .description('create a room on a Shoal server and run its host (coordinator + θ_global replica) headless')
      .requiredOption('--server <url>', 'the Shoal server, http(s)://host:port'),
    'host',
  )
    .option(
      '--data <file>',
      'UTF-8 text to train on (default: Moby Dick); workers without it receive it from the host over the mesh',
    )
    .addOption(
      new Option(
        '--dataset <dir|url>',
        "a packed dataset (`shoal data pack`): its URL, or its folder (found on the room's server when `shoal server --datasets` serves it, else served by this host over the mesh); volunteers fetch only their training shards",
      ).conflicts('data'),
    )
    .addOption(evalBytesOption())
    .option(
      '--checkpoint-dir <dir>',
      'write θ_global and the run state to DIR/shoal-room{,.state}.safetensors at every commit and on exit (0600; the room credentials in DIR/room-credentials.json)',
    )
    .option(
      '--resume <checkpoint>',
      "continue a room's run from a checkpoint directory (or its shoal-room.safetensors); takes the room back if the server still has it",
    )
    .option('--eval-every-ms <ms>', 'validation loss of θ_global every ms', parsePositiveInt, HOST.evalEveryMs)
    .option('--eval-batches <n>', 'validation batches per evaluation', parsePositiveInt, HOST.evalBatches)
    .option('--metrics-every-ms <ms>', 'a metrics line every ms', parsePositiveInt, HOST.metricsEveryMs)
    .option(
      '--publish-every-ms <ms>',
      "sample the room view and publish it to the watch link's viewers every ms",
      parsePositiveInt,
      HOST.publishEveryMs,
    )
    .option(
      '--deadline-ms <ms>',
      'shard owners give up after ms; the coordinator on a round after twice that',
      parsePositiveInt,
      HOST.deadlineMs,
    )
    .option('--json', 'one JSON line per event on stdout')
    .action(guarded(hostCommand));
}

/** `shoal worker`: a headless volunteer. */
function addWorkerCommand(program: Command, threads: { n: number; description: string }): void {
  program
    .command('worker')
    .description('join a room as a headless volunteer and train until SIGINT/SIGTERM')
    .requiredOption('--server <url>', 'the Shoal server, http(s)://host:port')
    .requiredOption('--room <id>', 'room id (from the join link)')
    .requiredOption('--token <token>', 'join token (from the join link)')
    .option('--backend <backend>', 'webgpu | cpu', parseBackend, 'webgpu')
    .addOption(threadsOption(threads))
    .option(
      '--max-memory <bytes>',
      'the most memory to lend (512MB, 1.5GiB): a pipeline room places this worker only in a stage that fits',
      parseByteSize,
    )
    .option('--data <file>', "the room's corpus, when it is not Moby Dick")
    .addOption(cacheMibOption())
    .option(
      '--cache-dir <dir>',
      `a dataset room: keep fetched shards here ('none': in memory only)`,
      defaultShardCacheDir(),
    )
    .option(
      '--host-grace <seconds>',
      'leave once the host has been gone this long (its link down and the server not seeing it)',
      parsePositiveInt,
      HOST_GRACE_MS / 1000,
    )
    .option(
      '--pipeline-depth <n>',
      'steps the GPU keeps queued while round work runs (--backend webgpu; 1: wait for each step)',
      parsePositiveInt,
      DEFAULT_PIPELINE_DEPTH,
    )
    .option('--json', 'one JSON line per event on stdout')
    .action(guarded(workerCommand));
}

/** `shoal export`: a checkpoint as ONNX. */
function addExportCommand(program: Command): void {
  program
    .command('export')
    .description('write a checkpoint as ONNX: input_ids int64 [batch, seq] → logits float32 [batch, seq, vocab]')
    .requiredOption('--checkpoint <file>', 'weights, NAME.safetensors')
    .requiredOption('--out <file>', 'the .onnx file to write')
    .option('--opset <n>', 'ONNX opset: 17 (GELU from primitives) or 20 (the Gelu op)', parsePositiveInt, 17)
    .option('--json', 'print one JSON line {out, bytes, opset, config}')
    .action(guarded(async (options) => (await import('./export.ts')).exportCommand(options)));
}

/** `shoal data pack`: text packed into checked shards. */
function addDataPackCommand(program: Command): void {
  program
    .command('data')
    .description('datasets for rooms: text packed into checked shards')
    .command('pack')
    .description('pack text files, folders and JSON Lines into shards and a manifest.json')
    .argument('<inputs...>', 'text files, folders (recursed) and .jsonl files')
    .requiredOption('--out <dir>', 'the dataset folder to write')
    .option('--shard-mib <n>', 'largest shard, MiB', parseShardMib, DEFAULT_SHARD_BYTES / MIB)
    .option(
      '--validation <f>',
      'fraction of pieces held out for validation, 0–0.5',
      parseNumber,
      DEFAULT_DATASET_VALIDATION_FRACTION,
    )
    .option('--text-field <name>', "a JSON Lines record's text field", 'text')
    .option('--name <name>', "the dataset's name (default: the first input's name)")
    .option('--licence <text>', 'the licence the manifest records', 'unknown')
    .option('--skip-bad-lines', 'skip and count JSON Lines that are not JSON or lack the text field')
    .option('--overwrite', 'replace a dataset already in --out')
    .option('--json', 'end with one JSON line {"shards", "bytes", "validationShards", "manifest", "hash", …}')
    .action(
      guarded(async (inputs: string[], options) => (await import('./data-pack.ts')).dataPackCommand(inputs, options)),
    );
}

/** `shoal server`: the web app and the signaling server. */
function addServerCommand(program: Command): void {
  program
    .command('server')
    .description('serve the web app on http://localhost:8080 (PORT overrides)')
    .option('--port <port>', 'port to listen on', parsePort)
    .option('--host <host>', 'address to bind', '0.0.0.0')
    .option(
      '--limit <name=value>',
      'a signaling limit, repeatable: maxFrameBytes, messagesPerSecond, maxPeersPerRoom, maxRooms, idleTimeoutMs, emptyRoomGraceMs, … (docs/cli.md)',
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option(
      '--ice-servers <json>',
      'STUN/TURN servers handed to clients, a JSON array of RTCIceServer (default: SHOAL_ICE_SERVERS)',
    )
    .option(
      '--rooms-dir <dir>',
      'keep rooms here, so a restarted server takes them back (default: SHOAL_ROOMS_DIR, else $XDG_STATE_HOME/shoal/rooms or ~/.local/state/shoal/rooms)',
    )
    .option('--no-persist', 'keep rooms in memory only: a restart forgets them')
    .option(
      '--datasets <dir>',
      'serve the packed datasets in DIR (`shoal data pack --out DIR/NAME`) at /datasets/NAME/, with range requests and CORS',
    )
    .action(guarded(serverCommand));
}
