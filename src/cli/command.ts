// The shape every `qrl-sim` subcommand has, and the helpers they share for output.
// Not the dispatcher (see main.ts) and not any command's logic.

/** Where a command writes; injected so tests can capture output without spawning a process. */
export interface CliIo {
  /** Standard output (one call per line or block). */
  out(text: string): void;
  /** Standard error. */
  err(text: string): void;
  /** Reads all of standard input (used by `--input -`). */
  readStdin(): Promise<string>;
  /** True when output goes to a terminal (progress bars); plain lines otherwise. */
  readonly interactive?: boolean;
  /**
   * Replaces the live status line on standard error (an empty text clears it). Present only when
   * standard error is a terminal; without it progress is printed as plain lines through `err`.
   */
  readonly status?: (text: string) => void;
}

/** A subcommand of `qrl-sim`. */
export interface Command {
  /** One-line summary shown by `qrl-sim --help`. */
  readonly summary: string;
  /** Full `--help` text. */
  readonly help: string;
  /** Runs the command; resolves to the exit code. Throws {@link UsageError} for bad input. */
  run(args: string[], io: CliIo): Promise<number>;
}
