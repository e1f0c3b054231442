// The process-level half of the inbound policy: message handlers are guarded (see Inbound), so an
// error that still escapes to the event loop is a bug. The process says so in one line, naming
// itself, and exits non-zero; its supervisor (`cmesh up`, compose's restart policy, Kubernetes)
// restarts that process alone.
export function exitOnFatal(name: string): void {
  for (const event of ['uncaughtException', 'unhandledRejection'] as const) {
    process.on(event, (e: unknown) => {
      process.stderr.write(`${name}: fatal ${event}, exiting with code 1: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exit(1);
    });
  }
}
