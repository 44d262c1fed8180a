/**
 * @shoal/room/services: the host and the volunteer as `shoal host`/`shoal worker` and the web
 * app's room worker all run them, with storage, timers and engines passed in.
 */
export * from './host-service.ts';
export * from './volunteer-service.ts';
