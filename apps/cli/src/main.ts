import { Command, InvalidArgumentError } from 'commander';
import { doctorCommand } from './doctor.ts';
import { serverCommand } from './server.ts';

export function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new InvalidArgumentError('expected a port, 0–65535');
  return port;
}

const program = new Command('shoal')
  .description("Train a GPT-style language model on volunteers' GPUs, in their browsers.")
  .showHelpAfterError();

program
  .command('doctor')
  .description('check this machine: WebGPU adapter, a WGSL self-test, WebRTC in Node, Chromium')
  .option('--json', 'print one JSON object')
  .option('--adapter <which>', 'auto | system | lavapipe | swiftshader (default: SHOAL_ADAPTER or auto)')
  .action(async (options) => {
    process.exitCode = await doctorCommand(options);
  });

program
  .command('server')
  .description('serve the web app on http://localhost:8080 (PORT overrides)')
  .option('--port <port>', 'port to listen on', parsePort)
  .option('--host <host>', 'address to bind', '0.0.0.0')
  .action(async (options) => {
    await serverCommand(options);
  });

await program.parseAsync(process.argv);
