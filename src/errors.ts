// Usage errors of the `qrl-sim` command: the one exception type that maps to exit code 2.
// Not for internal bugs, which propagate and exit 1 with their stack.

/** A bad invocation or bad input: the CLI prints `qrl-sim: <message>` on one line and exits 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
