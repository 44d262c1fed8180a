/**
 * Which test files to run again after a test process died in native code. A Vitest fork that
 * crashes (a segfault inside a native addon: @roamhq/wrtc tearing down a peer connection, seen
 * about once in 50 runs of a WebRTC file) leaves one "Worker exited unexpectedly" error and
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
  files: FileOutcome[];
  /** Messages of the run's unhandled errors, each with its causes' messages appended. */
  errors: string[];
}

export type CrashVerdict = { kind: 'passed' } | { kind: 'rerun'; files: string[] } | { kind: 'failed'; why: string };

const CRASH = /Worker exited unexpectedly/;

export function crashVerdict(run: RunOutcome): CrashVerdict {
  const failedFiles = run.files.filter((f) => f.failed > 0);
  const crashes = run.errors.filter((e) => CRASH.test(e));
  const unfinished = run.files.filter((f) => f.unfinished > 0).map((f) => f.file);
  if (failedFiles.length > 0) return { kind: 'failed', why: `${failedFiles.length} file(s) with failed tests` };
  if (crashes.length < run.errors.length) {
    return { kind: 'failed', why: `${run.errors.length - crashes.length} error(s) besides test processes that died` };
  }
  if (crashes.length === 0) {
    return unfinished.length === 0
      ? { kind: 'passed' }
      : { kind: 'failed', why: `unfinished tests in ${unfinished.join(', ')} with no crash to explain them` };
  }
  if (unfinished.length === 0 || unfinished.length > crashes.length) {
    return {
      kind: 'failed',
      why: `${crashes.length} test process(es) died, leaving ${unfinished.length} file(s) unfinished: cannot say which to run again`,
    };
  }
  return { kind: 'rerun', files: unfinished };
}
