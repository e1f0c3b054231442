// A service member written against the documented wire protocol only (docs/api.md, "Collectives
// as a service"), with the stock NATS client (@nats-io/transport-node) and nothing of cmesh: what
// a Go or Python service does. Runs the 'all' scenario of member.ts and checks every element; JSON lines on stdout.
'use strict';
const { connect, headers } = require('@nats-io/transport-node');
const { createDecipheriv, createHmac, hkdfSync, randomBytes, randomUUID, timingSafeEqual } = require('crypto');
const { SCENARIOS, inputs, expected } = require('./scenario-data');

const say = (o) => process.stdout.write(JSON.stringify(o, (_, v) => (typeof v === 'bigint' ? String(v) : v)) + '\n');
const enc = (o) => Buffer.from(JSON.stringify(o));
const dec = (d) => JSON.parse(Buffer.from(d).toString());
const P = 'cmesh'; // the default cluster's subjects; cluster <c>: cmesh.<c>

async function main() {
  const nc = await connect({ servers: process.env.NATS_URL });
  const name = process.env.GROUP;
  const size = Number(process.env.SIZE);
  const member = randomUUID();
  // a key only this member knows: the placement carries the group's secret sealed under it
  const key = randomBytes(32);
  // 1. subscribe to the placements first, then join
  const placedSub = nc.subscribe(`${P}.svc.placed.${name}`);
  const reply = dec(
    (await nc.request(`${P}.svc.join`, enc({ name, size, member, label: process.env.LABEL, key: key.toString('base64') }), { timeout: 10000 })).data,
  );
  if (!reply.ok) throw new Error(`join refused: ${reply.error.message}`);
  let placed, rank, secret;
  for await (const m of placedSub) {
    const p = dec(m.data);
    if (p.joined && p.joined.includes(member)) throw new Error(p.error);
    rank = p.members.findIndex((x) => x.member === member);
    secret = rank >= 0 && p.sealed ? unseal(key, p.sealed[rank], p.groupId, rank) : null;
    if (secret) {
      placed = p;
      break;
    }
  }
  const g = `${P}.svc.g.${placed.groupId}`;
  say({ event: 'joined', rank, size: placed.size });

  // every message of the group carries Cmesh-Mac: HMAC-SHA256 under HKDF(G, "cmesh svc mac") over
  // subject, Cmesh-Seq, Cmesh-Offset (each followed by a newline) and the payload; others are dropped
  const macKey = Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), 'cmesh svc mac', 32));
  const macOf = (subject, seq, off, data) => createHmac('sha256', macKey).update(`${subject}\n${seq}\n${off}\n`).update(data).digest('hex');
  const pub = (subject, data, seq, off) => {
    const h = headers();
    if (seq !== undefined) {
      h.set('Cmesh-Seq', String(seq));
      h.set('Cmesh-Offset', String(off));
    }
    h.set('Cmesh-Mac', macOf(subject, seq === undefined ? '' : seq, off === undefined ? '' : off, data));
    nc.publish(subject, data, { headers: h });
  };
  const authentic = (m) => {
    const h = m.headers;
    const got = Buffer.from((h && h.get('Cmesh-Mac')) || '', 'hex');
    const want = Buffer.from(macOf(m.subject, (h && h.get('Cmesh-Seq')) || '', (h && h.get('Cmesh-Offset')) || '', m.data), 'hex');
    return got.length === want.length && timingSafeEqual(got, want);
  };

  // 2. heartbeat every 500 ms; wait until every agent says ready; watch the end subject
  const ready = new Set();
  let ended = null;
  let allReady;
  const readyP = new Promise((r) => (allReady = r));
  nc.subscribe(`${g}.hb`, {
    callback: (_, m) => {
      if (!authentic(m)) return;
      const hb = dec(m.data);
      if (hb.role === 'agent' && hb.ready) {
        ready.add(hb.rank);
        if (ready.size === size) allReady();
      }
    },
  });
  // an op whose result is on its way still completes: fail what is pending only after a second
  nc.subscribe(`${g}.end`, {
    callback: (_, m) => {
      if (!authentic(m)) return;
      ended = dec(m.data);
      setTimeout(() => {
        for (const p of pending.values()) p.reject(new Error(`group ended: ${JSON.stringify(ended)}`));
      }, 1000).unref();
    },
  });
  // heartbeats count up (n): a replayed one is ignored
  let n = 0;
  const beat = setInterval(() => pub(`${g}.hb`, enc({ rank, role: 'member', n: ++n })), 500);
  pub(`${g}.hb`, enc({ rank, role: 'member', n: ++n }));
  await readyP;

  // 3. results: a JSON header, then the bytes in chunks (headers Cmesh-Seq, Cmesh-Offset)
  const pending = new Map();
  nc.subscribe(`${g}.res.${rank}`, {
    callback: (_, m) => {
      if (!authentic(m)) return;
      const seq = m.headers && m.headers.get('Cmesh-Seq');
      if (seq) {
        const p = pending.get(Number(seq));
        p.buf.set(m.data, Number(m.headers.get('Cmesh-Offset')));
        p.got += m.data.length;
      } else {
        const r = dec(m.data);
        const p = pending.get(r.seq);
        if (!r.ok) return p.reject(new Error(`${r.error.name}: ${r.error.message}`));
        p.buf = new Uint8Array(r.bytes);
        p.got = 0;
        p.want = r.bytes;
      }
      const p = pending.get(Number(seq) || dec(m.data).seq);
      if (p && p.buf && p.got === p.want) {
        pending.delete(p.seq);
        p.resolve(p.buf);
      }
    },
  });
  let seq = 0;
  const chunk = nc.info.max_payload - 1024;
  function op(header, typed) {
    const s = ++seq;
    const data = typed ? new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength) : new Uint8Array(0);
    return new Promise((resolve, reject) => {
      pending.set(s, { seq: s, resolve, reject });
      pub(`${g}.op.${rank}`, enc({ seq: s, timeoutMs: 60000, bytes: data.length, ...header }));
      for (let off = 0; off < data.length; off += chunk) pub(`${g}.op.${rank}`, data.subarray(off, off + chunk), s, off);
    });
  }
  let checked = 0;
  const check = (what, got, want) => {
    if (got.length !== want.length) throw new Error(`${what}: ${got.length} elements, want ${want.length}`);
    for (let i = 0; i < want.length; i++) if (got[i] !== want[i]) throw new Error(`${what}[${i}] = ${got[i]}, want ${want[i]}`);
    checked += want.length;
  };
  const inp = inputs(rank, size);
  const exp = expected(size, rank);
  const as = (C, bytes) => new C(bytes.buffer, bytes.byteOffset, bytes.byteLength / C.BYTES_PER_ELEMENT);
  // one buffer of a list of tensors, and back
  const packed = (C, lists) => C.from(lists.flat());
  const pieces = (arr, n) => Array.from({ length: arr.length / n }, (_, q) => arr.subarray(q * n, q * n + n));
  check(
    'allReduce float32 sum',
    as(Float32Array, await op({ op: 'allReduce', dtype: 'float32', count: inp.sum.length, redop: 'sum' }, Float32Array.from(inp.sum))),
    exp.sum,
  );
  check(
    'allReduce int32 max',
    as(Int32Array, await op({ op: 'allReduce', dtype: 'int32', count: inp.max.length, redop: 'max' }, Int32Array.from(inp.max))),
    exp.max,
  );
  check(
    'allReduce float64 avg',
    as(Float64Array, await op({ op: 'allReduce', dtype: 'float64', count: inp.avg.length, redop: 'avg' }, Float64Array.from(inp.avg))),
    exp.avg,
  );
  check(
    'allReduce int64 product',
    as(BigInt64Array, await op({ op: 'allReduce', dtype: 'int64', count: inp.product.length, redop: 'product' }, BigInt64Array.from(inp.product))),
    exp.product,
  );
  check('allReduce int8 min', as(Int8Array, await op({ op: 'allReduce', dtype: 'int8', count: 8, redop: 'min' }, Int8Array.from(inp.int8min))), exp.int8min);
  check(
    'allReduce uint8 bor',
    as(Uint8Array, await op({ op: 'allReduce', dtype: 'uint8', count: 4, redop: 'bor' }, Uint8Array.from(inp.uint8bor))),
    exp.uint8bor,
  );
  check(
    'allReduce float16 sum',
    as(Uint16Array, await op({ op: 'allReduce', dtype: 'float16', count: 4, redop: 'sum' }, Uint16Array.from(inp.f16sum))),
    exp.f16sum,
  );
  check(
    'allReduce bfloat16 sum',
    as(Uint16Array, await op({ op: 'allReduce', dtype: 'bfloat16', count: 4, redop: 'sum' }, Uint16Array.from(inp.bf16sum))),
    exp.bf16sum,
  );
  check(
    'broadcast float64',
    as(
      Float64Array,
      await op({ op: 'broadcast', dtype: 'float64', count: inp.broadcast.length, src: SCENARIOS.broadcastSrc }, Float64Array.from(inp.broadcast)),
    ),
    exp.broadcast,
  );
  // reduce: the destination gets the result, the others an empty one (their tensor stays)
  const reduced = as(
    Float32Array,
    await op({ op: 'reduce', dtype: 'float32', count: 6, dst: SCENARIOS.reduceDst, redop: 'sum' }, Float32Array.from(inp.reduce)),
  );
  check('reduce float32 sum', reduced.length ? reduced : Float32Array.from(inp.reduce), exp.reduce);
  const gathered = as(Int32Array, await op({ op: 'allGather', dtype: 'int32', count: inp.gather.length }, Int32Array.from(inp.gather)));
  exp.gather.forEach((want, q) => check(`allGather int32 [${q}]`, gathered.subarray(q * 5, q * 5 + 5), want));
  const gatheredTo = as(Int32Array, await op({ op: 'gather', dtype: 'int32', count: 3, dst: SCENARIOS.gatherDst }, Int32Array.from(inp.gatherTo)));
  if (rank === SCENARIOS.gatherDst) exp.gatherTo.forEach((want, q) => check(`gather int32 [${q}]`, pieces(gatheredTo, 3)[q], want));
  // scatter: only the source sends (its list, one tensor per rank)
  const scattered = as(
    Float64Array,
    await op({ op: 'scatter', dtype: 'float64', count: 4, src: size - 1 }, rank === size - 1 ? packed(Float64Array, inp.scatter) : null),
  );
  check('scatter float64', scattered, exp.scatter);
  check(
    'reduceScatter float32 sum',
    as(Float32Array, await op({ op: 'reduceScatter', dtype: 'float32', count: 3, redop: 'sum' }, packed(Float32Array, inp.reduceScatter))),
    exp.reduceScatter,
  );
  const exchanged = pieces(as(Int32Array, await op({ op: 'allToAll', dtype: 'int32', count: 2 }, packed(Int32Array, inp.allToAll))), 2);
  exp.allToAll.forEach((want, q) => check(`allToAll int32 [${q}]`, exchanged[q], want));
  await op({ op: 'barrier', dtype: 'uint8', count: 0 }, null);
  say({ event: 'done', rank, checked });
  // 4. leave: the group ends for everyone
  pub(`${g}.end`, enc({ groupId: placed.groupId, reason: 'left', rank, who: `member "${process.env.LABEL}" (rank ${rank})` }));
  clearInterval(beat);
  await nc.drain();
}

/** G from the member's sealed copy: base64 of a 12-byte IV, the AES-256-GCM ciphertext and its 16-byte tag, bound to the group and rank. */
function unseal(key, sealed, groupId, rank) {
  const raw = Buffer.from(sealed || '', 'base64');
  if (raw.length !== 60) return null;
  try {
    const d = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
    d.setAAD(Buffer.from(`cmesh svc seal\n${groupId}\n${rank}`));
    d.setAuthTag(raw.subarray(44));
    return Buffer.concat([d.update(raw.subarray(12, 44)), d.final()]);
  } catch {
    return null;
  }
}

main().catch((e) => {
  say({ event: 'fatal', name: e.name, message: e.message });
  process.exit(2);
});
