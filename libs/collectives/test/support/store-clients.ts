// COUNT TcpStore clients in one process, driven by store-scale.test.ts one line at a time on stdin
// (answers are JSON lines on stdout):
//   connect   open the clients at once (and one more, `extra`, for the test's own requests)
//   barrier   every client add("barrier", 1); the one that reads TOTAL sets barrier/done; all wait on it
//   park      every client waits on "release", then check(["release"]) on the same connection: its
//             answer comes after the server has read (and parked) the wait
//   adds M    `extra` sends M add("ctr", 1) at once
//   snapshot  bytes each client has written and read so far; when every wait on "release" has
//             been answered, `released` is reported with the same figures
// Usage: store-clients.ts HOST PORT COUNT TOTAL
import * as net from 'net';
import * as readline from 'readline';
import { TcpStore } from '../../src/store';

const [host, portArg, countArg, totalArg] = process.argv.slice(2);
const port = Number(portArg);
const count = Number(countArg);
const total = Number(totalArg);
const say = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
// the byte counters of a client's one connection, to see exactly what went over it
const socketOf = (s: TcpStore) => (s as unknown as { socket: net.Socket }).socket;
const bytes = (stores: TcpStore[]) => stores.map((s) => [socketOf(s).bytesWritten, socketOf(s).bytesRead]);

async function main() {
  let stores: TcpStore[] = [];
  let extra: TcpStore | undefined;
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    const [cmd, n] = line.trim().split(' ');
    if (cmd === 'connect') {
      stores = await Promise.all(Array.from({ length: count }, () => TcpStore.create({ host, port, timeoutMs: 60_000 })));
      extra = await TcpStore.create({ host, port, timeoutMs: 60_000 });
      say({ phase: 'connect', connected: stores.length });
    } else if (cmd === 'barrier') {
      const adds = await Promise.all(
        stores.map(async (s) => {
          const v = await s.add('barrier', 1);
          if (v === total) await s.set('barrier/done', '1');
          await s.wait(['barrier/done']);
          return v;
        }),
      );
      say({ phase: 'barrier', adds });
    } else if (cmd === 'park') {
      const waits = stores.map((s) => s.wait(['release']));
      const checks = await Promise.all(stores.map((s) => s.check(['release'])));
      say({ phase: 'park', checks });
      void Promise.allSettled(waits).then((r) => {
        // a second answer to a wait would arrive within moments of the first
        setTimeout(() => say({ phase: 'released', released: r.filter((x) => x.status === 'fulfilled').length, bytes: bytes(stores) }), 300);
      });
    } else if (cmd === 'adds') {
      const values = await Promise.all(Array.from({ length: Number(n) }, () => extra!.add('ctr', 1)));
      say({ phase: 'adds', max: Math.max(...values) });
    } else if (cmd === 'snapshot') {
      say({ phase: 'snapshot', bytes: bytes(stores) });
    }
  }
  await Promise.all([...stores, extra].map(async (s) => s?.close()));
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
