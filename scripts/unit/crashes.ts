/**
 * Which test files to run again after a test process died in native code. A Vitest fork that
 * crashes (silently, most likely inside @roamhq/wrtc: seen once in about 80 runs of a file that
 * puts a room on real WebRTC in one process) leaves one "Worker exited unexpectedly" error and
 * the tests it was running unfinished. Such a file gets one more run, named in the log. Anything
 * else (a failed test, any other error, a crash whose file cannot be named) stays a failure.
 */

/** One test file of a finished run, as the collector saw it. */
export interface FileOutcome {
  file: string;
  /** Tests that ran to a verdict and failed. */
  failed: number;
  /** Tests that never reached a verdict (their process died under them). */
  unfinished: number;
}

export interface RunOutcome {
  /** Vitest's own verdict on the run; 'none' when it never reached the end of one. */
  reason: 'passed' | 'failed' | 'interrupted' | 'none';
  files: FileOutcome[];
  /** Messages of the run's unhandled errors, each with its causes' messages appended. */
  errors: string[];
}

export type CrashVerdict = { kind: 'passed' } | { kind: 'rerun'; files: string[] } | { kind: 'failed'; why: string };

const CRASH = /Worker exited unexpectedly/;

export function crashVerdict(run: RunOutcome): CrashVerdict {
  if (run.reason === 'none' || run.reason === 'interrupted') {
    return { kind: 'failed', why: `the run ${run.reason === 'none' ? 'never reached its end' : 'was interrupted'}` };
  }
  if (run.files.length === 0) return { kind: 'failed', why: 'no test file ran' };
  const failedFiles = run.files.filter((f) => f.failed > 0);
  const crashes = run.errors.filter((e) => CRASH.test(e));
  const unfinished = run.files.filter((f) => f.unfinished > 0).map((f) => f.file);
  if (failedFiles.length > 0) return { kind: 'failed', why: `${failedFiles.length} file(s) with failed tests` };
  if (crashes.length < run.errors.length) {
    return { kind: 'failed', why: `${run.errors.length - crashes.length} error(s) besides test processes that died` };
  }
  if (crashes.length === 0 && unfinished.length === 0) {
    // Vitest's reason does not count unhandled errors; here there are none, so it has the last word
    return run.reason === 'passed' ? { kind: 'passed' } : { kind: 'failed', why: 'Vitest failed the run' };
  }
  if (crashes.length === 0 || unfinished.length === 0 || unfinished.length > crashes.length) {
    return {
      kind: 'failed',
      why: `${crashes.length} test process(es) died, leaving ${unfinished.length} file(s) unfinished: cannot say which to run again`,
    };
  }
  return { kind: 'rerun', files: unfinished };
}
