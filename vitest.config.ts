import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/**/*.test.ts', 'apps/**/*.test.ts', 'scripts/**/*.test.ts', 'bench/**/*.test.ts'],
    // Dawn is a native addon: one process per test file keeps devices apart.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
