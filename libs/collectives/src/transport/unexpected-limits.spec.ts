// The data plane's bound on messages a peer sends before they are asked for: read from the
// environment, and enforced on a real 3-rank mesh (TCP): a rank that floods another has its
// connection failed with PeerFailureError naming it, while the third rank's messages still arrive.
import { InvalidArgumentError, PeerFailureError } from '../errors';
import { TcpStore } from '../store/tcp-store';
import { FrameKind, NO_SIGNATURE } from './frame';
import { Mesh } from './mesh';
import { DEFAULT_UNEXPECTED_LIMITS, unexpectedLimits } from './unexpected-limits';

describe('unexpected-message limits', () => {
  it('come from CMESH_MAX_UNEXPECTED_FRAMES / _BYTES (K, M, G suffixes), else the defaults; bad values are refused', () => {
    expect(unexpectedLimits({})).toEqual(DEFAULT_UNEXPECTED_LIMITS);
    expect(unexpectedLimits({ CMESH_MAX_UNEXPECTED_FRAMES: '100', CMESH_MAX_UNEXPECTED_BYTES: '64M' })).toEqual({ frames: 100, bytes: 64 * 2 ** 20 });
    expect(() => unexpectedLimits({ CMESH_MAX_UNEXPECTED_BYTES: '0' })).toThrow(InvalidArgumentError);
    expect(() => unexpectedLimits({ CMESH_MAX_UNEXPECTED_FRAMES: 'lots' })).toThrow(
      'CMESH_MAX_UNEXPECTED_FRAMES must be a positive number (suffix K, M or G allowed), got "lots"',
    );
  });

  it('a peer that floods a rank is cut off, named; the other peers are still served', async () => {
    const size = 3;
    const master = await TcpStore.create({ host: '127.0.0.1', port: 0, isMaster: true, timeoutMs: 10_000 });
    const stores = [master, ...(await Promise.all([1, 2].map(() => TcpStore.create({ host: '127.0.0.1', port: master.port, timeoutMs: 10_000 }))))];
    const meshes = await Promise.all(
      stores.map((store, rank) =>
        Mesh.create({
          rank,
          size,
          store,
          timeoutMs: 10_000,
          masterAddr: '127.0.0.1',
          transport: 'tcp',
          unexpected: rank === 0 ? { frames: 16, bytes: 1 << 20 } : undefined,
        }),
      ),
    );
    try {
      const [victim, honest, flooder] = meshes;
      const fromFlooder = victim.recv(2, FrameKind.P2P, 0, 1000, NO_SIGNATURE, new Uint8Array(4));
      // 40 messages rank 0 never asked for: past its 16
      const sends = Array.from({ length: 40 }, (_, tag) => flooder.send(0, FrameKind.P2P, 0, tag, NO_SIGNATURE, new Uint8Array(8)).catch(() => undefined));
      const err = await fromFlooder.done.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(PeerFailureError);
      expect((err as PeerFailureError).context.peers).toEqual([2]);
      expect((err as Error).message).toBe(
        'rank 2 broke the data-plane protocol (sent more than 16 messages nobody had asked for yet (CMESH_MAX_UNEXPECTED_FRAMES)); its connection was closed',
      );
      await Promise.all(sends);
      // rank 1 is not affected: its message arrives whole, before or after its receive is posted
      const data = Uint8Array.from({ length: 100_000 }, (_, i) => i % 251);
      await honest.send(0, FrameKind.P2P, 0, 7, NO_SIGNATURE, data);
      const into = new Uint8Array(data.length);
      expect(await victim.recv(1, FrameKind.P2P, 0, 7, NO_SIGNATURE, into).done).toBe(1);
      expect(Buffer.from(into).equals(Buffer.from(data))).toBe(true);
    } finally {
      await Promise.all(meshes.map((m) => m.close()));
      for (const s of [...stores].reverse()) await s.close();
    }
  }, 30_000);
});
