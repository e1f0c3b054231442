// COUNT cmesh TcpStore clients in one process, for bench/store/store-scale.ts:
//   cmesh-clients.ts HOST PORT FIRST COUNT TOTAL [--setter] [--cold]
// Same line protocol as torch_store.py: the driver writes a phase name, this process answers with
// one JSON line when all its clients have finished it (first start and last end, wall-clock ms).
// Unless --cold, the client code is warmed up first against a private server of this process: a
// real rank runs its few requests in its own process, while here one process runs those of
// thousands, and V8 would still be compiling the client's code during the first of them.
import * as readline from 'readline';
import { startTcpStoreServer, TcpStore } from '@cmesh/collectives';
import { exercise } from './warm-up';

const [host, portArg, firstArg, countArg, totalArg] = process.argv.slice(2);
const port = Number(portArg);
const first = Number(firstArg);
const count = Number(countArg);
const total = Number(totalArg);
const TIMEOUT_MS = 300_000;

const nowMs = () => performance.timeOrigin + performance.now();
const say = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);

interface Span {
  first: number;
  last: number;
  results: number[];
  errors: string[];
}

/** Runs step(i) for every client at once; reports the span and what failed. */
async function phase(name: string, step: (i: number, span: Span) => Promise<number | void>): Promise<void> {
  const span: Span = { first: Infinity, last: 0, results: [], errors: [] };
  await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const s = nowMs();
      span.first = Math.min(span.first, s);
      try {
        const r = await step(i, span);
        if (typeof r === 'number') span.results.push(r);
      } catch (e) {
        span.errors.push((e as Error).message);
      }
      span.last = Math.max(span.last, nowMs());
    }),
  );
  say({ phase: name, first: span.first, last: span.last, results: span.results, errors: span.errors.slice(0, 5), failed: span.errors.length });
}

/** Runs the client's calls a few thousand times against a throwaway server in this process. */
async function warmUp(): Promise<void> {
  const server = await startTcpStoreServer({ host: '127.0.0.1', port: 0 });
  await exercise(server.port);
  await server.close();
}

async function main() {
  if (!process.argv.includes('--cold')) await warmUp();
  const stores: TcpStore[] = new Array(count);
  const setter = process.argv.includes('--setter') ? await TcpStore.create({ host, port, timeoutMs: TIMEOUT_MS }) : undefined;
  say({ ready: true });
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    const cmd = line.trim();
    if (cmd === 'connect') {
      void phase('connect', async (i) => {
        stores[i] = await TcpStore.create({ host, port, timeoutMs: TIMEOUT_MS });
      });
    } else if (cmd === 'set') {
      // every client publishes its key and reads its neighbour's, as ranks exchange addresses
      void phase('set', async (i, span) => {
        const rank = first + i;
        await stores[i].set(`rank/${rank}`, String(rank));
        const got = (await stores[i].get(`rank/${(rank + 1) % total}`)).toString();
        if (got !== String((rank + 1) % total)) span.errors.push(`rank ${rank} read ${got}`);
      });
    } else if (cmd === 'barrier') {
      void phase('barrier', async (i) => {
        const v = await stores[i].add('barrier', 1);
        if (v === total) await stores[i].set('barrier/done', '1');
        await stores[i].wait(['barrier/done']);
        return v;
      });
    } else if (cmd === 'wait') {
      const issued = nowMs();
      const released = phase('wait', (i) => stores[i].wait(['release']));
      say({ phase: 'wait-issued', first: issued, last: nowMs(), results: [], errors: [], failed: 0 });
      void released;
    } else if (cmd === 'release' && setter) {
      const at = nowMs();
      await setter.set('release', '1');
      say({ phase: 'release', at });
    } else if (cmd === 'close') {
      break;
    }
  }
  await Promise.all(stores.map((s) => s?.close()));
  await setter?.close();
  say({ phase: 'closed' });
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
