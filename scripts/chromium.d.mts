export * from '../apps/cli/src/chromium.mjs';
