import { startServer } from '@shoal/server';

export async function serverCommand(options: { port?: number; host: string }): Promise<void> {
  const port = options.port ?? (process.env.PORT ? Number(process.env.PORT) : 8080);
  const server = await startServer({ port, host: options.host }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'EADDRINUSE') {
      console.error(
        `shoal server: port ${port} is already in use. Stop the other server, or pick another port: PORT=8081 npm start`,
      );
    } else {
      console.error(`shoal server: ${error.message}`);
    }
    process.exit(1);
  });
  console.log(`Shoal is running. Open ${server.url} in a browser with WebGPU.`);
  const stop = () => {
    server.close().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
