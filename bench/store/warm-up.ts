// The client calls of a rank's rendezvous (set, get, add, wait) run a few thousand times against a
// store server, so that V8 has compiled the code of both ends before it is measured.
import { TcpStore } from '@cmesh/collectives';

/** 8 clients, 300 rounds of set + get of a neighbour's key + add barrier + wait; leaves no key behind. */
export async function exercise(port: number, host = '127.0.0.1'): Promise<void> {
  const clients = await Promise.all(Array.from({ length: 8 }, () => TcpStore.create({ host, port, timeoutMs: 30_000 })));
  for (let round = 0; round < 300; round++) {
    await Promise.all(
      clients.map(async (c, i) => {
        const got = c.get(`w/${round}/${(i + 1) % clients.length}`);
        await c.set(`w/${round}/${i}`, String(i));
        await got;
        if ((await c.add(`w/${round}`, 1)) === clients.length) await c.set(`w/${round}/done`, '1');
        await c.wait([`w/${round}/done`]);
      }),
    );
    // the store holds none of it afterwards
    await Promise.all([...clients.map((c, i) => c.deleteKey(`w/${round}/${i}`)), clients[0].deleteKey(`w/${round}`), clients[0].deleteKey(`w/${round}/done`)]);
  }
  await Promise.all(clients.map((c) => c.close()));
}
