// A process the fuzz tests aim at, so that a crash shows as its exit: `store` serves a TcpStore;
// `mesh` is rank 0 of world 2 over and over (a new Mesh per round, its peer the test), receiving
// P2P group 7 tag 7 messages of 16 bytes and echoing each back on tag 8; `rank` is a rank of a
// world of 1 that answers flight-recorder requests on NATS (CMESH_TRACE_NATS_URL and
// CMESH_TRACE_SUBJECT in its environment) after one allReduce. It prints one JSON line per event
// on stdout.
import { Mesh } from '../../src/transport/mesh';
import { FrameKind, NO_SIGNATURE } from '../../src/transport/frame';
import { FrameMismatch } from '../../src/transport/peer-connection';
import { PrefixStore, TcpStore, startTcpStoreServer } from '../../src/store';

const say = (o: object) => process.stdout.write(`${JSON.stringify(o)}\n`);

async function serveStore() {
  const server = await startTcpStoreServer({ port: 0 });
  say({ event: 'listening', port: server.port });
}

async function serveMesh(storePort: number) {
  const store = await TcpStore.create({ port: storePort, timeoutMs: 60_000 });
  say({ event: 'started' });
  for (let round = 0; ; round++) {
    const mesh = await Mesh.create({ rank: 0, size: 2, store: new PrefixStore(`round${round}`, store), timeoutMs: 60_000, transport: 'tcp' });
    say({ event: 'ready', round });
    let echoed = 0;
    for (;;) {
      const buf = new Uint8Array(16);
      try {
        await mesh.recv(1, FrameKind.P2P, 7, 7, NO_SIGNATURE, buf).done;
      } catch (e) {
        // a message of another length on the echo's key: refused, and the next one is awaited
        if (e instanceof FrameMismatch) continue;
        say({ event: 'peer-gone', round, echoed, error: `${(e as Error).name}: ${(e as Error).message}` });
        break;
      }
      echoed++;
      await mesh.send(1, FrameKind.P2P, 7, 8, NO_SIGNATURE, buf).catch(() => {});
    }
    await mesh.close();
  }
}

async function serveRank(storePort: number) {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the whole library in this mode only (a CommonJS file's lazy load under node16 resolution)
  const dist = require('../../src') as typeof import('../../src');
  await dist.initProcessGroup({ initMethod: `tcp://127.0.0.1:${storePort}`, rank: 0, worldSize: 1, timeout: 30_000 });
  const t = new Float32Array([1, 2]);
  await dist.allReduce(t);
  say({ event: 'started' });
  // stays up until the test stops it
  setInterval(() => {}, 60_000);
}

const [mode, arg] = process.argv.slice(2);
(mode === 'store' ? serveStore() : mode === 'rank' ? serveRank(Number(arg)) : serveMesh(Number(arg))).catch((e: Error) => {
  say({ event: 'failed', error: e.stack ?? e.message });
  process.exit(1);
});
