// Inputs and expected outputs of the 'all' scenario, shared by the @cmesh/client member (member.ts)
// and the member speaking the raw protocol (raw-member.js): plain JavaScript for both.
'use strict';
const SCENARIOS = { sumCount: 300_000, broadcastSrc: 2, reduceDst: 1, gatherDst: 0 };

/** float16 bits of a small non-negative integer (exact up to 2048) */
function f16(v) {
  if (v === 0) return 0;
  const e = Math.floor(Math.log2(v));
  return ((e + 15) << 10) | ((v / 2 ** e - 1) * 1024);
}
/** bfloat16 bits: the high half of the float32 */
const bf16 = (v) => new Uint16Array(new Float32Array([v]).buffer)[1];
const range = (n, f) => Array.from({ length: n }, (_, i) => f(i));

function inputs(rank, size) {
  return {
    // over 1 MiB: the op and its result travel in several chunks (nats-server's max_payload 1 MiB)
    sum: range(SCENARIOS.sumCount, (i) => rank + 1 + (i % 7)),
    max: range(1000, (i) => (i % 2 ? rank * 1000 + i : -rank * 1000 - i)),
    avg: range(10, (i) => rank + i),
    product: range(8, (i) => BigInt(rank + 1 + i)),
    int8min: range(8, (i) => i - rank),
    uint8bor: range(4, () => 1 << rank),
    f16sum: range(4, (i) => f16(rank + 1 + i)),
    bf16sum: range(4, (i) => bf16(rank + 1 + i)),
    broadcast: range(100, (i) => rank * 100 + i + 0.25),
    reduce: range(6, (i) => rank + i),
    gather: range(5, (i) => rank * 10 + i),
    gatherTo: range(3, (i) => rank * 100 + i),
    // only the source's list is sent
    scatter: range(size, (q) => range(4, (i) => q * 1000 + i + 0.5)),
    reduceScatter: range(size, (q) => range(3, (i) => (rank + 1) * (q + 1) + i)),
    allToAll: range(size, (q) => range(2, (i) => rank * 10 + q + i * 100)),
  };
}

function expected(size, rank) {
  const ranks = [...Array(size).keys()];
  const tri = (size * (size + 1)) / 2;
  return {
    sum: range(SCENARIOS.sumCount, (i) => ranks.reduce((a, r) => a + r + 1 + (i % 7), 0)),
    max: range(1000, (i) => (i % 2 ? (size - 1) * 1000 + i : -i)),
    avg: range(10, (i) => (size - 1) / 2 + i),
    product: range(8, (i) => ranks.reduce((a, r) => a * BigInt(r + 1 + i), 1n)),
    int8min: range(8, (i) => i - (size - 1)),
    uint8bor: range(4, () => (1 << size) - 1),
    f16sum: range(4, (i) => f16(tri + size * i)),
    bf16sum: range(4, (i) => bf16(tri + size * i)),
    broadcast: range(100, (i) => SCENARIOS.broadcastSrc * 100 + i + 0.25),
    // the destination's tensor; the others' stay as they were
    reduce: rank === SCENARIOS.reduceDst ? range(6, (i) => (size * (size - 1)) / 2 + size * i) : range(6, (i) => rank + i),
    gather: ranks.map((q) => range(5, (i) => q * 10 + i)),
    gatherTo: rank === SCENARIOS.gatherDst ? ranks.map((q) => range(3, (i) => q * 100 + i)) : [],
    scatter: range(4, (i) => rank * 1000 + i + 0.5),
    reduceScatter: range(3, (i) => (rank + 1) * tri + size * i),
    allToAll: ranks.map((q) => range(2, (i) => q * 10 + rank + i * 100)),
  };
}

/** Elements a member of `rank` checks in the 'all' scenario. */
function checkedBy(rank, size) {
  const e = expected(size, rank);
  return Object.values(e).reduce((n, v) => n + (Array.isArray(v[0]) ? v.reduce((m, x) => m + x.length, 0) : v.length), 0);
}

module.exports = { SCENARIOS, inputs, expected, checkedBy };
