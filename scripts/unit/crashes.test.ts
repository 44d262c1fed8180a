import { describe, expect, it } from 'vitest';
import { crashVerdict, type FileOutcome } from './crashes.ts';

const ok = (file: string): FileOutcome => ({ file, failed: 0, unfinished: 0 });
const crash = '[vitest-pool]: Worker forks emitted error. ← Worker exited unexpectedly';

describe('crashVerdict', () => {
  it('passes a clean run and reruns the one file a crashed process left unfinished', () => {
    expect(crashVerdict({ reason: 'passed', files: [ok('a'), ok('b')], errors: [] })).toEqual({ kind: 'passed' });
    const files = [ok('a'), { file: 'b', failed: 0, unfinished: 1 }];
    expect(crashVerdict({ reason: 'failed', files, errors: [crash] })).toEqual({ kind: 'rerun', files: ['b'] });
  });

  it('fails on a failed test, another error, or a crash it cannot pin on a file', () => {
    const failed = (files: FileOutcome[], errors: string[]) => crashVerdict({ reason: 'failed', files, errors }).kind;
    const crashed = { file: 'b', failed: 0, unfinished: 1 };
    expect(failed([{ file: 'a', failed: 1, unfinished: 0 }, crashed], [crash])).toBe('failed');
    expect(failed([crashed], [crash, 'Unhandled Rejection: boom'])).toBe('failed');
    expect(failed([ok('a')], [crash])).toBe('failed'); // died after its tests
    expect(failed([crashed, { file: 'c', failed: 0, unfinished: 2 }], [crash])).toBe('failed');
    expect(failed([crashed], [])).toBe('failed');
    expect(failed([ok('a')], [])).toBe('failed'); // Vitest said failed: never overruled to a pass
  });

  it('fails on an unhandled error even when Vitest calls the run passed (its reason ignores them)', () => {
    expect(crashVerdict({ reason: 'passed', files: [ok('a')], errors: ['Unhandled Rejection: boom'] }).kind).toBe(
      'failed',
    );
    const crashed = { file: 'b', failed: 0, unfinished: 1 };
    expect(crashVerdict({ reason: 'passed', files: [crashed], errors: [crash] }).kind).toBe('rerun');
  });

  it('fails a run that never reached its end, was interrupted or ran no file', () => {
    expect(crashVerdict({ reason: 'failed', files: [], errors: [] }).kind).toBe('failed');
    expect(crashVerdict({ reason: 'none', files: [], errors: [] }).kind).toBe('failed');
    expect(crashVerdict({ reason: 'interrupted', files: [ok('a')], errors: [] }).kind).toBe('failed');
  });
});
