/**
 * `npm run test:unit`: the whole Vitest suite, once. A file whose test process died in native code
 * (see crashes.ts) is run once more, alone, and named in the log; the run passes only if that
 * second run passes. Arguments are Vitest's file filters, as with `vitest run`.
 */
import { relative } from 'node:path';
import type { Reporter, SerializedError } from 'vitest/node';
import { startVitest } from 'vitest/node';
import { crashVerdict, type RunOutcome } from './crashes.ts';

function errorText(error: SerializedError): string {
  const parts: string[] = [];
  for (let e: SerializedError | undefined = error; e; e = e.cause as SerializedError | undefined) {
    parts.push(String(e.message ?? e));
  }
  return parts.join(' ← ');
}

async function runVitest(filters: string[]): Promise<RunOutcome> {
  let outcome: RunOutcome = { reason: 'none', files: [], errors: [] };
  const collector: Reporter = {
    onTestRunEnd(modules, errors, reason) {
      outcome = {
        reason,
        files: modules.map((module) => {
          const states = [...module.children.allTests()].map((test) => test.result().state);
          const moduleFailed = module.state() === 'failed' && !states.includes('failed') ? 1 : 0;
          return {
            file: relative(process.cwd(), module.moduleId),
            failed: states.filter((s) => s === 'failed').length + moduleFailed,
            unfinished: states.filter((s) => s === 'pending').length,
          };
        }),
        errors: errors.map(errorText),
      };
    },
  };
  const vitest = await startVitest('test', filters, { watch: false, reporters: ['default', collector] });
  await vitest.close();
  return outcome;
}

const first = await runVitest(process.argv.slice(2));
const verdict = crashVerdict(first);
process.exitCode = 1;
if (verdict.kind === 'passed') {
  process.exitCode = 0;
} else if (verdict.kind === 'failed') {
  console.error(`\nunit tests failed: ${verdict.why}`);
} else {
  console.error(`\n⚠ a test process died in native code running ${verdict.files.join(', ')}: running it once more\n`);
  const again = crashVerdict(await runVitest(verdict.files));
  if (again.kind === 'passed') {
    console.error(`⚠ passed on the second run: ${verdict.files.join(', ')} (its first test process crashed)`);
    process.exitCode = 0;
  } else {
    console.error(
      `unit tests failed on the second run of ${verdict.files.join(', ')}: ${again.kind === 'failed' ? again.why : 'it crashed again'}`,
    );
  }
}
