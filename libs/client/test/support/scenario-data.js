// Inputs and expected outputs of the 'all' scenario, shared by the @cmesh/client member (member.ts)
// and the member speaking the raw protocol (raw-member.js): plain JavaScript for both.
'use strict';
const SCENARIOS = { sumCount: 300_000, broadcastSrc: 2 };

function inputs(rank) {
  return {
    // over 1 MiB: the op and its result travel in several chunks (nats-server's max_payload 1 MiB)
    sum: Array.from({ length: SCENARIOS.sumCount }, (_, i) => rank + 1 + (i % 7)),
    max: Array.from({ length: 1000 }, (_, i) => (i % 2 ? rank * 1000 + i : -rank * 1000 - i)),
    avg: Array.from({ length: 10 }, (_, i) => rank + i),
    product: Array.from({ length: 8 }, (_, i) => BigInt(rank + 1 + i)),
    broadcast: Array.from({ length: 100 }, (_, i) => rank * 100 + i + 0.25),
    gather: Array.from({ length: 5 }, (_, i) => rank * 10 + i),
  };
}

function expected(size) {
  const ranks = [...Array(size).keys()];
  return {
    sum: Array.from({ length: SCENARIOS.sumCount }, (_, i) => ranks.reduce((a, r) => a + r + 1 + (i % 7), 0)),
    max: Array.from({ length: 1000 }, (_, i) => (i % 2 ? (size - 1) * 1000 + i : -i)),
    avg: Array.from({ length: 10 }, (_, i) => (size - 1) / 2 + i),
    product: Array.from({ length: 8 }, (_, i) => ranks.reduce((a, r) => a * BigInt(r + 1 + i), 1n)),
    broadcast: Array.from({ length: 100 }, (_, i) => SCENARIOS.broadcastSrc * 100 + i + 0.25),
    gather: ranks.map((q) => Array.from({ length: 5 }, (_, i) => q * 10 + i)),
  };
}

module.exports = { SCENARIOS, inputs, expected };
