// Forging another tenant's service group, against a mesh with authentication on: a victim group of
// two members (one on the local path, one over NATS, both logged in as the client user) runs
// allReduces and allGathers of up to 2 MiB while an attacker logged in as the client user and one
// logged in as an agent outside the group (agent-2) send, on the group's subjects: chunks ahead of
// the victims' ops with other data, forged results (one with bytes 2^40), forged agent heartbeats
// naming the attacker's Unix socket and saying ready, ends, non-JSON and oversized headers, and a
// replay of every message the victims' group sends. Every op finishes with every element right;
// the forgeries are dropped and counted by the members, the agents' workers and the coordinator;
// nobody connects to the attacker's socket; the coordinator keeps the group placed until the
// members leave. The public placement carries no store prefix and no secret in the clear.
import { mkdtempSync, rmSync } from 'fs';
import { Server, createServer, connect as netConnect } from 'net';
import fc from 'fast-check';
import { tmpdir } from 'os';
import { join } from 'path';
import { headers, Msg, NatsConnection } from '@nats-io/nats-core';
import { MeshConnection, ServiceGroup, connectMesh } from '@cmesh/client';
import { SERVICE_GROUP_HEADERS, SERVICE_GROUP_MAC_HEADER, ServiceGroupDetail, ServiceGroupPlaced, clusterNames } from '@cmesh/protocol';
import { fuzzPlan, invalidJsonPayload, rejectedMessages, runFuzz, until } from '@cmesh/testing';
import { Mesh, startMesh, CLIENT_USER } from '@cmesh/testing/mesh';
import { statePassword, TestLogins } from './support/logins';

const n = clusterNames();
const enc = new TextEncoder();
const GROUP = 'victim';
const hex64 = fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 64, maxLength: 64 });

describe('service groups cannot be forged by another tenant', () => {
  let mesh: Mesh;
  let stateDir: string;
  const meshes: MeshConnection[] = [];
  let evil: Server;
  const evilPath = join(tmpdir(), `cmesh-sec-evil-${process.pid}.sock`);
  let evilConnections = 0;

  const password = statePassword(() => stateDir);
  const logins = new TestLogins(() => mesh.natsUrl, password);
  const login = async (user: string) => (await logins.login(user)).nc;

  beforeAll(async () => {
    stateDir = mkdtempSync(join(tmpdir(), 'cmesh-sec-svc-'));
    mesh = await startMesh({
      agents: 3,
      port: 0,
      auth: { stateDir },
      write: (l) => process.env.SVC_DEBUG && process.stdout.write(l + '\n'),
      readyTimeoutMs: 90_000,
    });
    evil = createServer((s) => {
      evilConnections++;
      s.destroy();
    });
    await new Promise<void>((r) => evil.listen(evilPath, r));
  }, 120_000);

  afterAll(async () => {
    for (const m of meshes) await m.close().catch(() => undefined);
    await logins.closeAll();
    evil?.close();
    await mesh?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it("the victims' ops all finish with every element right while two attackers forge everything", async () => {
    const attackers = [await login(CLIENT_USER), await login('agent-2')];
    const [client] = attackers;
    // the placement as every client sees it
    const placements: ServiceGroupPlaced[] = [];
    const placedSub = client.subscribe(n.serviceGroups.placed(GROUP), {
      callback: (_, m) => {
        placements.push(JSON.parse(Buffer.from(m.data).toString()) as ServiceGroupPlaced);
      },
    });
    // everything the group sends, replayed by the attacker as it was (headers and all)
    const seen: Msg[] = [];
    const replaySub = client.subscribe(n.serviceGroups.groupWildcard, {
      callback: (_, m) => {
        if (m.subject.includes(`.${GROUP}_`) && seen.length < 20_000) seen.push(m);
      },
    });

    let groupId = '';
    let flooding = true;
    const forge = (nc: NatsConnection, i: number) => {
      if (!groupId) return;
      const g = (s: string) => `${n.serviceGroups.groupWildcard.slice(0, -1)}${groupId}.${s}`;
      const junkMac = () => {
        const h = headers();
        h.set(SERVICE_GROUP_MAC_HEADER, 'ab'.repeat(32));
        return h;
      };
      for (const rank of [0, 1]) {
        // chunks ahead of ops 1..40 with other data, with and without a made-up MAC
        for (let seq = 1; seq <= 40; seq += 7) {
          const h = junkMac();
          h.set(SERVICE_GROUP_HEADERS.seq, String(seq));
          h.set(SERVICE_GROUP_HEADERS.offset, '0');
          nc.publish(g(`op.${rank}`), new Uint8Array(4096).fill(0x7f), { headers: h });
          const plain = headers();
          plain.set(SERVICE_GROUP_HEADERS.seq, String(seq));
          plain.set(SERVICE_GROUP_HEADERS.offset, '0');
          nc.publish(g(`res.${rank}`), new Uint8Array(64).fill(0x41), { headers: plain });
        }
        // forged results: wrong data, a failure, and an allocation of 2^40 bytes
        nc.publish(g(`res.${rank}`), enc.encode(JSON.stringify({ seq: 1 + (i % 40), ok: true, bytes: 8 })));
        nc.publish(g(`res.${rank}`), enc.encode(JSON.stringify({ seq: 1 + (i % 40), ok: false, error: { name: 'PeerFailureError', message: 'forged' } })));
        nc.publish(g(`res.${rank}`), enc.encode(JSON.stringify({ seq: 1 + (i % 40), ok: true, bytes: 2 ** 40 })), { headers: junkMac() });
        // the agents' heartbeat, ready, naming the attacker's socket
        nc.publish(g('hb'), enc.encode(JSON.stringify({ rank, role: 'agent', ready: true, socket: evilPath, n: 1e9 })));
        // an op of 2^40 bytes, non-JSON op headers, garbage chunk headers
        nc.publish(g(`op.${rank}`), enc.encode(JSON.stringify({ seq: 1, op: 'allReduce', dtype: 'float32', count: 2 ** 38, timeoutMs: 1000, bytes: 2 ** 40 })));
        nc.publish(g(`op.${rank}`), enc.encode('{"seq": 3, not json'));
        const bad = headers();
        bad.set(SERVICE_GROUP_HEADERS.seq, 'NaN');
        bad.set(SERVICE_GROUP_HEADERS.offset, '-1');
        bad.set(SERVICE_GROUP_MAC_HEADER, 'x');
        nc.publish(g(`op.${rank}`), new Uint8Array([0xff, 0xfe, 0x00]), { headers: bad });
      }
      // ends, of every kind, with and without a made-up MAC; and a status request
      nc.publish(g('end'), enc.encode(JSON.stringify({ groupId, reason: 'left', rank: 0, who: 'member "forged" (rank 0)' })));
      nc.publish(g('end'), enc.encode(JSON.stringify({ groupId, reason: 'failed', error: { name: 'DistTimeoutError', message: 'forged' } })), {
        headers: junkMac(),
      });
      nc.publish(g('end'), new Uint8Array([0, 1, 2, 3]));
      nc.publish(g('status'), enc.encode('{}'), { reply: `_INBOX.${nc === client ? CLIENT_USER : 'agent-2'}.x` });
    };
    // as soon as the placement is out: forged ready heartbeats before the agents are up, and the rest
    const flood = (async () => {
      for (let i = 0; flooding; i++) {
        if (!groupId && placements.length) groupId = placements[0].groupId;
        for (const nc of attackers) forge(nc, i);
        // the replay: what the group sent so far, again
        for (const m of seen.splice(0, 200)) client.publish(m.subject, m.data, m.headers ? { headers: m.headers } : undefined);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();

    const login0 = { user: CLIENT_USER, pass: password(CLIENT_USER) };
    const warnings: string[] = [];
    const a = await connectMesh({ servers: mesh.natsUrl, ...login0, warn: (l) => warnings.push(l) });
    const b = await connectMesh({ servers: mesh.natsUrl, ...login0, local: false, warn: (l) => warnings.push(l) });
    meshes.push(a, b);
    const [g0, g1] = await Promise.all([a.join(GROUP, { size: 2, label: 'v0', timeout: 60_000 }), b.join(GROUP, { size: 2, label: 'v1', timeout: 60_000 })]);
    const byRank = [g0, g1].sort((x, y) => x.rank - y.rank);
    // the local path is the real agent's (proved the group secret), the other member is on NATS
    expect([g0.transport, g1.transport]).toEqual(['local', 'nats']);

    let checked = 0;
    const run = async (g: ServiceGroup, i: number) => {
      const count = [2, 1000, 524_288][i % 3]; // 8 B, 4 KB, 2 MiB (several chunks over NATS)
      const t = new Float32Array(count).map((_, k) => g.rank * 1000 + i + (k % 97));
      await g.allReduce(t);
      for (let k = 0; k < count; k++) {
        const want = 1000 + 2 * (i + (k % 97));
        if (t[k] !== want) throw new Error(`rank ${g.rank} op ${i} element ${k} = ${t[k]}, want ${want}`);
      }
      const out = [new Int32Array(16), new Int32Array(16)];
      await g.allGather(
        out,
        new Int32Array(16).map((_, k) => g.rank * 100 + k + i),
      );
      out.forEach((o, r) => o.forEach((v, k) => expect(v).toBe(r * 100 + k + i)));
      checked += count + 32;
    };
    for (let i = 0; i < 20; i++) await Promise.all(byRank.map((g) => run(g, i)));

    // the coordinator kept the group placed through the forged ends, and its status request (MAC'd) is answered by both workers
    const detail = await mesh.client.get<ServiceGroupDetail>(`/service-groups/${GROUP}`);
    expect(detail.state).toBe('placed');
    expect(detail.inFlight?.missing).toEqual([]);
    flooding = false;
    await flood;
    placedSub.unsubscribe();
    replaySub.unsubscribe();

    expect(checked).toBe(2 * [...Array(20).keys()].reduce((sum, i) => sum + [2, 1000, 524_288][i % 3] + 32, 0));
    // nobody connected to the socket the forged heartbeats named
    expect(evilConnections).toBe(0);
    // the members dropped the forgeries (no MAC), and the replays were harmless duplicates
    for (const g of byRank) {
      expect(g.dropped.bad_mac).toBeGreaterThan(0);
      expect(g.dropped.handler_error).toBeUndefined();
    }
    expect((g1.dropped.duplicate ?? 0) + (g0.dropped.duplicate ?? 0)).toBeGreaterThan(0);
    // and said so, rate-limited: a few lines for thousands of drops
    expect(warnings.some((l) => /dropped a message on res \(bad_mac\)/.test(l))).toBe(true);
    expect(warnings.length).toBeLessThan(100);
    // the agents' member workers dropped them too, and counted them
    const agents = await mesh.client.get<{ agents: { name: string; httpUrl: string }[] } | { name: string; httpUrl: string }[]>('/agents');
    const list = Array.isArray(agents) ? agents : agents.agents;
    for (const name of byRank.map((g) => g.placed.members[g.rank].agentName)) {
      const url = `${list.find((x) => x.name === name)!.httpUrl}/metrics`;
      expect(await rejectedMessages(url, `${n.serviceGroups.groupWildcard.slice(0, -1)}*.op`)).toBeGreaterThan(0);
    }
    // the public placement: who is where, the secret only sealed per member, no store prefix
    expect(placements).toHaveLength(1);
    expect(Object.keys(placements[0]).sort()).toEqual(['backend', 'groupId', 'members', 'name', 'round', 'sealed', 'size']);
    expect(placements[0].sealed).toHaveLength(2);

    // a join without a key of the member's own could never be given the group's secret: refused, naming it
    const noKey = JSON.parse(
      Buffer.from(
        (await client.request(n.serviceGroups.join, enc.encode(JSON.stringify({ name: 'no-key', size: 1, member: 'x' })), { timeout: 10_000 })).data,
      ).toString(),
    ) as unknown;
    expect(noKey).toMatchObject({ ok: false, error: { code: 'BAD_REQUEST', message: expect.stringMatching(/key is required/) } });

    await Promise.all(byRank.map((g) => g.leave()));
    // the members' leave is authentic: the coordinator records the end
    await until('the group ended', 10_000, async () => (await mesh.client.get<ServiceGroupDetail>(`/service-groups/${GROUP}`)).state === 'ended');
  }, 240_000);

  // Fuzzing: every svc.* subject (the group's op, res, hb, end and status subjects, svc.join and
  // svc.leave) with malformed messages and well-formed hostile ones (extreme sizes, other groups,
  // made-up or borrowed MACs, garbage chunk headers), and the agent's local socket with frames of
  // every kind; CMESH_FUZZ_RUNS cases each (default 10000). A real op of the group completes after
  // every batch (no deaf connection), nothing crashes (the group's workers, agents and coordinator
  // all still answer), no stranger ever gets past the local socket's challenge.
  it('fuzzing svc.* and the local socket: no crash, no deaf connection, the group still computes', async () => {
    const attackers = [await login(CLIENT_USER), await login('agent-2')];
    const login0 = { user: CLIENT_USER, pass: password(CLIENT_USER) };
    const quiet = () => undefined;
    const a = await connectMesh({ servers: mesh.natsUrl, ...login0, warn: quiet });
    const b = await connectMesh({ servers: mesh.natsUrl, ...login0, local: false, warn: quiet });
    meshes.push(a, b);
    const joined = await Promise.all([a.join('fuzzed', { size: 2, timeout: 60_000 }), b.join('fuzzed', { size: 2, timeout: 60_000 })]);
    const groups = [...joined].sort((x, y) => x.rank - y.rank);
    // b's member talks over NATS: its agent's local socket has nobody on it (a's has, and refuses a
    // second hello); which rank each gets is the coordinator's choice
    const natsMember = joined[1];
    const groupId = groups[0].groupId;
    const g = (x: string) => `${n.serviceGroups.groupWildcard.slice(0, -1)}${groupId}.${x}`;
    // MACs the group really made (for other payloads: borrowed), and the socket of the NATS member's agent (nobody on it)
    const macs: string[] = [];
    let socket = '';
    // until the fuzz starts (after that, what it sends would be read too)
    const spy = attackers[0].subscribe(`${n.serviceGroups.groupWildcard.slice(0, -1)}${groupId}.>`, {
      callback: (_, m) => {
        const mac = m.headers?.get(SERVICE_GROUP_MAC_HEADER);
        if (mac && macs.length < 50) macs.push(mac);
        try {
          const hb = m.subject.endsWith('.hb') ? (JSON.parse(Buffer.from(m.data).toString()) as { role?: string; rank?: number; socket?: string }) : null;
          if (hb?.role === 'agent' && hb.rank === natsMember.rank && hb.socket) socket = hb.socket;
        } catch {
          /* not this test's to judge */
        }
      },
    });
    let ops = 0;
    const realOp = async () => {
      const i = ++ops;
      await Promise.all(
        groups.map(async (x) => {
          const t = new Float64Array(1 + (i % 300)).map((_, k) => x.rank + k + i);
          await x.allReduce(t, { timeout: 30_000 });
          t.forEach((v, k) => {
            if (v !== 1 + 2 * (k + i)) throw new Error(`op ${i}: rank ${x.rank} element ${k} = ${v}, want ${1 + 2 * (k + i)}`);
          });
        }),
      );
    };
    await realOp();
    await until('the socket and MACs seen', 10_000, async () => socket !== '' && macs.length > 5);
    spy.unsubscribe();

    // ---- svc.* subjects ----
    const seqHeader = fc.oneof(fc.constantFrom('', '0', '-1', '1', '2', 'NaN', '1e309', '9007199254740993', ' 1', '1.5'), fc.string({ maxLength: 12 }));
    const macHeader = fc.oneof(
      fc.constant(undefined),
      fc.constantFrom(...macs),
      hex64,
      fc.string({ maxLength: 80 }).filter((x) => !/[\r\n]/.test(x) && x.trim() === x),
    );
    const big = fc.constantFrom(0, 1, 2 ** 31, 2 ** 32, 2 ** 36, 2 ** 40, 2 ** 53, -1, 1.5);
    const hostile: Record<string, fc.Arbitrary<unknown>> = {
      op: fc.record({
        seq: big,
        op: fc.constantFrom('allReduce', 'allGather', 'allToAll', 'barrier', 'scatter'),
        dtype: fc.constantFrom('float32', 'int64', 'uint8'),
        count: big,
        timeoutMs: fc.constantFrom(1, 2 ** 31, 86_400_000),
        bytes: big,
        src: big,
        dst: big,
      }),
      res: fc.oneof(
        fc.record({ seq: fc.integer({ min: 1, max: 2000 }), ok: fc.constant(true), bytes: big }),
        fc.record({ seq: fc.integer({ min: 1, max: 2000 }), ok: fc.constant(false), error: fc.record({ name: fc.string(), message: fc.string() }) }),
      ),
      hb: fc.record({
        rank: fc.constantFrom(0, 1, 2, 2 ** 31),
        role: fc.constantFrom('agent', 'member', 'x'),
        ready: fc.boolean(),
        socket: fc.constantFrom('/tmp/x.sock', '', 'a'.repeat(600), socket),
        n: big,
      }),
      end: fc.record({ groupId: fc.constantFrom(groupId, 'other_1', ''), reason: fc.constantFrom('left', 'lost', 'failed', 'x'), rank: big, who: fc.string() }),
      status: fc.record({ reply: fc.string({ maxLength: 300 }) }),
    };
    const valid: Record<string, Record<string, unknown>> = {
      op: { seq: 1, op: 'allReduce', dtype: 'float32', count: 2, timeoutMs: 1000, bytes: 8 },
      res: { seq: 1, ok: true, bytes: 8 },
      hb: { rank: 0, role: 'agent', ready: true },
      end: { groupId, reason: 'left' },
      status: { reply: '_INBOX.client.x' },
      join: { name: 'fuzzed', size: 2, member: 'fz', key: Buffer.alloc(32).toString('base64') },
      leave: { name: 'fuzzed', member: 'fz' },
    };
    const subjectOf = (kind: string, rank: number) =>
      kind === 'join' ? n.serviceGroups.join : kind === 'leave' ? n.serviceGroups.leave : kind === 'op' || kind === 'res' ? g(`${kind}.${rank}`) : g(kind);
    const oneCase = fc
      .tuple(
        fc.constantFrom('op', 'res', 'hb', 'end', 'status', 'join', 'leave'),
        fc.integer({ min: 0, max: 1 }),
        fc.boolean(),
        macHeader,
        fc.option(fc.tuple(seqHeader, seqHeader)),
        fc.integer({ min: 0, max: 1 }),
      )
      .chain(([kind, rank, wellFormed, mac, chunk, who]) => {
        const malformed = invalidJsonPayload(valid[kind], { required: Object.keys(valid[kind]), constrained: Object.keys(valid[kind]), maxBytes: 256 * 1024 });
        const body = wellFormed && hostile[kind] ? hostile[kind].map((v) => enc.encode(JSON.stringify(v))) : malformed.map((x) => x.data);
        return body.map((data) => ({ subject: subjectOf(kind, rank), data, mac, chunk, who }));
      });
    const serviceGroupPlan = fuzzPlan('svc subjects', 100);
    const started = Date.now();
    const problems = await runFuzz(serviceGroupPlan, fc.array(oneCase, { minLength: 100, maxLength: 100 }), async (cases) => {
      for (const c of cases) {
        const h = headers();
        if (c.mac !== undefined) h.set(SERVICE_GROUP_MAC_HEADER, c.mac);
        if (c.chunk) {
          if (c.chunk[0]) h.set(SERVICE_GROUP_HEADERS.seq, c.chunk[0]);
          if (c.chunk[1]) h.set(SERVICE_GROUP_HEADERS.offset, c.chunk[1]);
        }
        attackers[c.who].publish(c.subject, c.data, {
          headers: h,
          reply: c.subject.endsWith('.status') ? `_INBOX.${c.who ? 'agent-2' : CLIENT_USER}.fz` : undefined,
        });
      }
      await Promise.race([
        Promise.all(attackers.map((x) => x.flush())),
        new Promise((_, reject) => setTimeout(() => reject(new Error('an attacker connection did not flush within 20 s')), 20_000)),
      ]);
      // a real op after every batch: neither member nor worker went deaf
      const err = await realOp().then(
        () => null,
        (e: Error) => e.message,
      );
      return err ? [err] : [];
    });
    expect(problems).toEqual([]);
    for (const x of groups) expect(x.dropped.bad_mac).toBeGreaterThan(0);
    process.stdout.write(`fuzz svc subjects: ${serviceGroupPlan.cases} cases and ${ops} real ops in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);

    // ---- the local socket of the NATS member's agent ----
    const frame = fc.oneof(
      fc.uint8Array({ minLength: 1, maxLength: 200 }).map((x) => Buffer.from(x)),
      fc.jsonValue({ maxDepth: 3 }).map((v) => `${JSON.stringify(v)}\n`),
      fc
        .record({
          type: fc.constant('hello'),
          member: fc.constantFrom(natsMember.placed.members[natsMember.rank].member, 'x', ''),
          nonce: fc.string({ maxLength: 80 }),
        })
        .map((v) => `${JSON.stringify(v)}\n`),
      fc
        .record({
          type: fc.constant('proof'),
          proof: fc.oneof(hex64, fc.string()),
          pid: fc.constantFrom(process.pid, 1, 2 ** 31),
          fd: fc.nat(1000),
          bytes: big,
        })
        .map((v) => `${JSON.stringify(v)}\n`),
      fc
        .record({ type: fc.constantFrom('segment', 'op'), pid: fc.constant(process.pid), fd: fc.nat(100), bytes: big, op: fc.constant(valid.op) })
        .map((v) => `${JSON.stringify(v)}\n`),
      fc.constantFrom('\n', '{}\n', 'not json\n', `${'x'.repeat(70_000)}\n`, 'x'.repeat(70_000)),
    );
    const sockPlan = fuzzPlan('svc local socket', 4);
    const startedSock = Date.now();
    let challenged = 0;
    const sockProblems = await runFuzz(sockPlan, fc.array(fc.array(frame, { minLength: 1, maxLength: 4 }), { minLength: 4, maxLength: 4 }), async (conns) => {
      const out = await Promise.all(conns.map((frames) => talk(socket, frames)));
      const p: string[] = [];
      for (const o of out) {
        if (o.hung) p.push(`the socket neither answered nor closed within 3 s after ${JSON.stringify(o.sent).slice(0, 200)}`);
        for (const f of o.frames) {
          const t = (f as { type?: string }).type;
          if (t === 'challenge') challenged++;
          else if (t !== 'refused') p.push(`a stranger got ${JSON.stringify(f).slice(0, 200)}`);
        }
      }
      return p;
    });
    expect(sockProblems).toEqual([]);
    expect(challenged).toBeGreaterThan(0);
    process.stdout.write(`fuzz svc local socket: ${sockPlan.cases} cases in ${((Date.now() - startedSock) / 1000).toFixed(1)} s\n`);

    // afterwards: the group computes, the coordinator and every agent answer, the workers answer their status
    for (let i = 0; i < 5; i++) await realOp();
    const detail = await mesh.client.get<ServiceGroupDetail>('/service-groups/fuzzed');
    expect([detail.state, detail.inFlight?.missing]).toEqual(['placed', []]);
    const agents = await mesh.client.get<{ agents: { state: string }[] } | { state: string }[]>('/agents');
    expect((Array.isArray(agents) ? agents : agents.agents).map((x) => x.state).filter((st) => st === 'lost')).toEqual([]);
    await Promise.all(groups.map((x) => x.leave()));
  }, 600_000);
});

/** One connection to a local socket: sends the frames, half-closes, and reads what comes back until it closes. */
function talk(path: string, frames: (string | Buffer)[]): Promise<{ frames: unknown[]; sent: unknown[]; hung: boolean }> {
  return new Promise((resolve) => {
    const got: unknown[] = [];
    let buf = '';
    const sock = netConnect(path);
    const timer = setTimeout(() => {
      sock.destroy();
      resolve({ frames: got, sent: frames.map(String), hung: true });
    }, 3000);
    sock.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        try {
          got.push(JSON.parse(buf.slice(0, i)));
        } catch {
          got.push({ type: 'unparsable', line: buf.slice(0, i) });
        }
        buf = buf.slice(i + 1);
      }
    });
    sock.on('error', () => undefined);
    sock.once('close', () => {
      clearTimeout(timer);
      resolve({ frames: got, sent: frames.map(String), hung: false });
    });
    sock.once('connect', () => {
      for (const f of frames) sock.write(f);
      sock.end();
    });
  });
}
