// The library changes its process only when asked: initProcessGroup binds no core and starts no
// metrics exporter on its own (CMESH_BIND and CMESH_METRICS_PORT are the launcher's settings), but
// does what its caller or `cmesh run` (CMESH_RUN_BIND_CPU, CMESH_RUN_METRICS_PORT) asks. The debug
// switch (CMESH_DEBUG=INFO, NODE_DEBUG=cmesh) logs rendezvous, connections and algorithm choices.
import { readFileSync } from 'fs';
import * as net from 'net';
import { cpusAllowed } from '../src/transport/core-binding';
import { freePort } from '@cmesh/testing';
import { runRanks } from './support/ranks';

const ALLOWED_TEXT = /^Cpus_allowed_list:\s*(.*)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1].trim();
const ALLOWED = cpusAllowed(readFileSync('/proc/self/status', 'utf8'));
const canBind = process.platform === 'linux' && ALLOWED.length >= 2;
const local = (r: number) => ({ LOCAL_RANK: String(r), LOCAL_WORLD_SIZE: '2' });

/** Two consecutive free ports (rank r probes base + r). */
async function twoPorts(): Promise<number> {
  for (let i = 0; i < 20; i++) {
    const p = await freePort();
    const ok = await new Promise<boolean>((r) => {
      const s = net.createServer();
      s.once('error', () => r(false));
      s.listen(p + 1, '127.0.0.1', () => s.close(() => r(true)));
    });
    if (ok) return p;
  }
  throw new Error('no two consecutive free ports');
}

describe('no hidden side effects', () => {
  it('CMESH_BIND=core and CMESH_METRICS_PORT alone: affinity unchanged, no exporter, no debug output', async () => {
    const base = await twoPorts();
    // what bound and exported before: two busy-polling ranks sharing the node
    const env = (r: number) => ({ ...local(r), CMESH_BIND: 'core', CMESH_SPIN_US: '200', CMESH_METRICS_PORT: String(base) });
    const res = await runRanks('side-effects', 2, { args: { probePort: base }, env, timeoutMs: 60000 });
    for (const r of res) {
      expect([r.rank, r.code, r.stderr]).toEqual([r.rank, 0, '']);
      expect(r.result).toEqual({ before: ALLOWED_TEXT, main: ALLOWED_TEXT, others: expect.any(Array), serving: false });
      for (const o of r.result.others) expect(o).toBe(ALLOWED_TEXT);
    }
  }, 90000);

  (canBind ? it : it.skip)(
    "initProcessGroup({ bindToCore: true }) binds the main thread to LOCAL_RANK's core, the helpers keep theirs",
    async () => {
      const res = await runRanks('side-effects', 2, { args: { bindToCore: true }, env: local, timeoutMs: 60000 });
      for (const r of res) {
        expect([r.rank, r.code]).toEqual([r.rank, 0]);
        expect(r.result.before).toBe(ALLOWED_TEXT);
        expect(r.result.main).toBe(String(ALLOWED[r.rank]));
        expect(r.result.others.length).toBeGreaterThan(0);
        for (const o of r.result.others) expect(o).toBe(ALLOWED_TEXT);
      }
    },
    90000,
  );

  (canBind ? it : it.skip)(
    'does what `cmesh run` asks: CMESH_RUN_BIND_CPU and CMESH_RUN_METRICS_PORT',
    async () => {
      const base = await twoPorts();
      const cpu = (r: number) => ALLOWED[(r + 1) % 2]; // not LOCAL_RANK's: the launcher's choice is taken as it is
      const env = (r: number) => ({ ...local(r), CMESH_RUN_BIND_CPU: String(cpu(r)), CMESH_RUN_METRICS_PORT: String(base + r) });
      const res = await runRanks('side-effects', 2, { args: { probePort: base }, env, timeoutMs: 60000 });
      for (const r of res) {
        expect([r.rank, r.code, r.stderr]).toEqual([r.rank, 0, '']);
        expect(r.result).toMatchObject({ before: ALLOWED_TEXT, main: String(cpu(r.rank)), serving: true });
      }
      // bindToCore: false overrides the launcher
      const off = await runRanks('side-effects', 2, { args: { bindToCore: false }, env, timeoutMs: 60000 });
      for (const r of off) expect([r.code, r.result.main]).toEqual([0, ALLOWED_TEXT]);
    },
    90000,
  );

  it('CMESH_DEBUG=INFO logs rendezvous steps, connections made, the binding and algorithm choices, one line each with the rank', async () => {
    const res = await runRanks('side-effects', 2, { args: { bindToCore: canBind }, env: (r) => ({ ...local(r), CMESH_DEBUG: 'INFO' }), timeoutMs: 60000 });
    for (const r of res) expect(r.code).toBe(0);
    const [r0, r1] = res.map((r) => r.stderr.split('\n').filter(Boolean));
    for (const [rank, lines] of [
      [0, r0],
      [1, r1],
    ] as const) {
      for (const l of lines) expect(l).toMatch(new RegExp(`^\\[cmesh rank ${rank}\\] [a-z]+: `));
      const expected = [
        expect.stringMatching(new RegExp(`rendezvous: init method env://: rank ${rank} of world 2$`)),
        expect.stringMatching(/rendezvous: store connected \(TcpStore\)$/),
        // bound after the data plane decided to busy-poll from the cores it saw
        expect.stringMatching(canBind ? /mesh: data plane listening on 127\.0\.0\.1:\d+, world 2, busy-poll 200 us$/ : /mesh: data plane listening on/),
        expect.stringMatching(rank === 0 ? /mesh: connection from rank 1 accepted$/ : /mesh: connected to rank 0 at 127\.0\.0\.1:\d+$/),
        expect.stringMatching(/mesh: connected to all 1 peers$/),
        // by default, ranks of one host move their messages through shared memory
        expect.stringMatching(new RegExp(`shm: shared memory with ranks \\[${1 - rank}\\]: \\d+ B rings, segment \\d+ B$`)),
        expect.stringMatching(new RegExp(`init: process group ready: rank ${rank} of 2, backend tcp$`)),
        expect.stringMatching(/algorithm: allReduce of 4 B at world 2: [a-z-]+ \(cost model, shm\)$/),
      ];
      if (canBind) expected.push(expect.stringMatching(new RegExp(`binding: main thread bound to cpu ${ALLOWED[rank]}$`)));
      expect(lines).toEqual(expect.arrayContaining(expected));
      // the algorithm is chosen once per (collective, size, world): not logged for every call
      expect(lines.filter((l) => l.includes('algorithm:'))).toHaveLength(1);
    }
  }, 90000);

  it('CMESH_DEBUG=INFO logs a lost connection', async () => {
    const res = await runRanks('side-effects', 2, { args: { dieRank: 1 }, env: (r) => ({ ...local(r), CMESH_DEBUG: 'INFO' }), timeoutMs: 60000 });
    expect(res[0].result).toEqual({ failed: 'PeerFailureError' });
    expect(res[0].stderr).toMatch(/^\[cmesh rank 0\] mesh: connection to rank 1 lost$/m);
  }, 90000);

  it('NODE_DEBUG=cmesh logs the same lines through util.debuglog', async () => {
    const res = await runRanks('side-effects', 2, { args: null, env: (r) => ({ ...local(r), NODE_DEBUG: 'cmesh' }), timeoutMs: 60000 });
    for (const r of res) {
      expect(r.code).toBe(0);
      expect(r.stderr).toMatch(new RegExp(`^CMESH \\d+: \\[cmesh rank ${r.rank}\\] rendezvous: init method env://: rank ${r.rank} of world 2$`, 'm'));
      expect(r.stderr).toMatch(/^CMESH \d+: \[cmesh rank \d\] algorithm: allReduce of 4 B at world 2: /m);
    }
  }, 90000);
});
