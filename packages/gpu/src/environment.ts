/**
 * A choice read from an environment variable in Node (SHOAL_ATTENTION, SHOAL_MATMUL,
 * SHOAL_PRECISION); in a browser, where there is no process, always unset.
 */
export function choiceFromEnvironment<T extends string>(name: string, choices: readonly T[]): T | undefined {
  const value = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];
  if (value === undefined || value === '') return undefined;
  if ((choices as readonly string[]).includes(value)) return value as T;
  const listed = choices.length > 1 ? `${choices.slice(0, -1).join(', ')} or ${choices.at(-1)}` : choices.join('');
  throw new RangeError(`${name}=${value}: use ${listed}`);
}
