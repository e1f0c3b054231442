// Runs an example's async main like a Python script: an uncaught error prints its stack and
// exits with status 1, so `cmesh run` reports the failed rank.
export function runMain(main: () => Promise<void>): void {
  main().catch((err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(1);
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
