import { describe, expect, it } from 'vitest';
import { crashVerdict, type FileOutcome } from './crashes.ts';

const ok = (file: string): FileOutcome => ({ file, failed: 0, unfinished: 0 });
const crash = '[vitest-pool]: Worker forks emitted error. ← Worker exited unexpectedly';

describe('crashVerdict', () => {
  it('passes a clean run and reruns the one file a crashed process left unfinished', () => {
    expect(crashVerdict({ files: [ok('a'), ok('b')], errors: [] })).toEqual({ kind: 'passed' });
    const files = [ok('a'), { file: 'b', failed: 0, unfinished: 1 }];
    expect(crashVerdict({ files, errors: [crash] })).toEqual({ kind: 'rerun', files: ['b'] });
  });

  it('fails on a failed test, another error, or a crash it cannot pin on a file', () => {
    const crashed = { file: 'b', failed: 0, unfinished: 1 };
    expect(crashVerdict({ files: [{ file: 'a', failed: 1, unfinished: 0 }, crashed], errors: [crash] }).kind).toBe(
      'failed',
    );
    expect(crashVerdict({ files: [crashed], errors: [crash, 'Unhandled Rejection: boom'] }).kind).toBe('failed');
    expect(crashVerdict({ files: [ok('a')], errors: [crash] }).kind).toBe('failed'); // died after its tests
    const two = [crashed, { file: 'c', failed: 0, unfinished: 2 }];
    expect(crashVerdict({ files: two, errors: [crash] }).kind).toBe('failed');
    expect(crashVerdict({ files: [crashed], errors: [] }).kind).toBe('failed');
  });
});
