// How fast bytes cross one nats-server between two connections of this process, in messages of
// the server's max_payload less 1 KiB (as the collectives service sends a member's data), for
// nats-server's default max_payload (1 MiB) and a larger one: whether raising it in the mesh's
// nats config would speed up the service's NATS path. Starts its own nats-servers.
//
//   node -r @swc-node/register bench/nats-payload.ts [--payloads 1M,8M] [--sizes 1M,8M,64M] [--reps 3]
// (nats-server advises max_payload of at most 8 MiB; 64 MiB messages stalled here.)
import { startNatsServer } from '@cmesh/testing';
import { connect } from '@nats-io/transport-node';
import { headers, NatsConnection } from '@nats-io/nats-core';
import { parseSize } from '@cmesh/cli/commands';

const HEADER_ROOM = 1024;

/** Median ms from the first publish until the subscriber has every byte. */
async function deliver(a: NatsConnection, b: NatsConnection, bytes: number, reps: number): Promise<number> {
  const step = a.info!.max_payload - HEADER_ROOM;
  const data = new Uint8Array(bytes);
  const times: number[] = [];
  for (let rep = 0; rep < reps; rep++) {
    let got = 0;
    const done = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${bytes} bytes in messages of ${step}: ${got} arrived in 60 s`)), 60_000);
      const sub = b.subscribe('payload.test', {
        callback: (_err, m) => {
          got += m.data.byteLength;
          if (got >= bytes) {
            clearTimeout(timer);
            sub.unsubscribe();
            resolve();
          }
        },
      });
    });
    await b.flush();
    const t0 = performance.now();
    for (let off = 0; off < bytes; off += step) {
      const h = headers();
      h.set('Cmesh-Offset', String(off));
      a.publish('payload.test', data.subarray(off, Math.min(off + step, bytes)), { headers: h });
    }
    await done;
    times.push(performance.now() - t0);
  }
  return times.sort((x, y) => x - y)[times.length >> 1];
}

async function main(): Promise<void> {
  const arg = (name: string) => {
    const i = process.argv.indexOf(name);
    return i >= 0 ? process.argv[i + 1] : undefined;
  };
  const payloads = (arg('--payloads') ?? '1M,8M').split(',').map(parseSize);
  const sizes = (arg('--sizes') ?? '1M,8M,64M').split(',').map(parseSize);
  const reps = Number(arg('--reps') ?? 3);
  const rows = ['| max_payload | message size | bytes | ms (median) | MB/s |', '|---|---|---|---|---|'];
  for (const max of payloads) {
    const srv = await startNatsServer({ config: `max_payload: ${max}\n` });
    const a = await connect({ servers: srv.url });
    const b = await connect({ servers: srv.url });
    try {
      for (const bytes of sizes) {
        const ms = await deliver(a, b, bytes, reps);
        rows.push(`| ${max} | ${max - HEADER_ROOM} | ${bytes} | ${ms.toFixed(1)} | ${(bytes / ms / 1e3).toFixed(0)} |`);
        console.error(rows[rows.length - 1]);
      }
    } finally {
      await a.close();
      await b.close();
      await srv.stop();
    }
  }
  console.log(rows.join('\n'));
}

main().catch((err) => {
  console.error(`nats-payload: ${(err as Error).stack ?? err}`);
  process.exit(1);
});
