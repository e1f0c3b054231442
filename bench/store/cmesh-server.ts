// cmesh's TcpStore server in a process of its own, for bench/store/store-scale.ts: prints
// {"port": N} once it listens and serves until stdin closes; a line "gc" on stdin collects garbage
// (run with --expose-gc) and answers {"gc": true}, so RSS readings count live memory. With --warm,
// its code is warmed first by the clients' calls of warm-up.ts from this process (leaving no key).
import * as readline from 'readline';
import { startTcpStoreServer } from '@cmesh/collectives';
import { exercise } from './warm-up';

async function main() {
  const server = await startTcpStoreServer({ host: '127.0.0.1', port: 0 });
  if (process.argv.includes('--warm')) await exercise(server.port);
  process.stdout.write(`${JSON.stringify({ port: server.port })}\n`);
  const lines = readline.createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    if (line.trim() !== 'gc') return;
    (globalThis as { gc?: () => void }).gc?.();
    process.stdout.write(`${JSON.stringify({ gc: true })}\n`);
  });
  lines.on('close', () => {
    void server.close().then(() => process.exit(0));
  });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
