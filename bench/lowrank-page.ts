/**
 * The Chromium side of `npm run bench:lowrank`: bench/lowrank-core.ts bundled for a page
 * (bench/lowrank-browser.ts builds it and opens it), driven by Playwright through
 * `window.lowrankBench`. Each call is one synchronous measurement on the page's main thread.
 */
import { cpuStepMs, measureLowRank, profileLowRank } from './lowrank-core.ts';

const lowrankBench = { measureLowRank, profileLowRank, cpuStepMs };
export type LowRankBench = typeof lowrankBench;

(globalThis as unknown as { lowrankBench: LowRankBench }).lowrankBench = lowrankBench;
