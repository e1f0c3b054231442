import * as net from 'net';
import { InvalidArgumentError } from '../errors';
import { dataPortRange, listenInRange } from './listen';

/** Two consecutive ports free right now. */
async function twoFreePorts(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const s = net.createServer();
    const p = await listenInRange(s, '127.0.0.1', null);
    await new Promise((r) => s.close(r));
    const probe = net.createServer();
    const ok = await new Promise<boolean>((r) => {
      probe.once('error', () => r(false));
      probe.listen(p + 1, '127.0.0.1', () => r(true));
    });
    await new Promise((r) => probe.close(() => r(undefined)));
    if (ok && p < 65535) return p;
  }
  throw new Error('no two consecutive free ports');
}

describe('data plane port range', () => {
  const servers: net.Server[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => (s.listening ? s.close(r) : r(undefined)))));
  });

  it('parses CMESH_DATA_PORTS and names a bad value', () => {
    expect(dataPortRange(undefined)).toBeNull();
    expect(dataPortRange('0')).toBeNull();
    expect(dataPortRange('0-0')).toBeNull();
    expect(dataPortRange('29500-29599')).toEqual([29500, 29599]);
    expect(dataPortRange('29500')).toEqual([29500, 29500]);
    for (const bad of ['x', '10-5', '0-3', '1-70000', '5-']) expect(() => dataPortRange(bad)).toThrow(InvalidArgumentError);
    expect(() => dataPortRange('10-5')).toThrow(/CMESH_DATA_PORTS must be "lo-hi" or "port" within 1..65535, got "10-5"/);
  });

  it('takes the first free port of the range, skipping busy ones, and says when none is free', async () => {
    const p = await twoFreePorts();
    const busy = net.createServer();
    servers.push(busy);
    expect(await listenInRange(busy, '127.0.0.1', [p, p])).toBe(p);
    const next = net.createServer();
    servers.push(next);
    expect(await listenInRange(next, '127.0.0.1', [p, p + 1])).toBe(p + 1);
    const none = net.createServer();
    servers.push(none);
    await expect(listenInRange(none, '127.0.0.1', [p, p + 1])).rejects.toThrow(`data plane: no free port on 127.0.0.1 in CMESH_DATA_PORTS ${p}-${p + 1}`);
  });
});
