/** Bad input from the user: the CLI prints its message as one line and exits 1, no stack trace. */
export class UsageError extends Error {
  override name = 'UsageError';
}
