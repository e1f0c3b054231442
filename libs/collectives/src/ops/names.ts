// The one vocabulary of collective names: the library's API spellings (torch's, in camelCase).
// Protocol schemas, the bench harness, the agents and the sidecar client all use these; other
// spellings (nccl-tests' all_reduce, metric labels) are made from them where text is printed.

/** The collectives, in the order `cmesh bench all` runs them. */
export const COLLECTIVES = ['allReduce', 'broadcast', 'reduce', 'allGather', 'reduceScatter', 'allToAll', 'gather', 'scatter', 'barrier'] as const;
export type Collective = (typeof COLLECTIVES)[number];

export function isCollective(v: unknown): v is Collective {
  return typeof v === 'string' && (COLLECTIVES as readonly string[]).includes(v);
}

/**
 * What a benchmark sweep runs: every collective that moves data, and `sendRecv`, a ring of
 * point-to-point transfers (each rank sends to the next and receives from the previous, like
 * nccl-tests' sendrecv).
 */
export type SweepOp = Exclude<Collective, 'barrier'> | 'sendRecv';
export const SWEEP_OPS = [...COLLECTIVES.filter((c): c is Exclude<Collective, 'barrier'> => c !== 'barrier'), 'sendRecv'] as readonly SweepOp[] as readonly [
  SweepOp,
  ...SweepOp[],
];

export function isSweepOp(v: unknown): v is SweepOp {
  return typeof v === 'string' && (SWEEP_OPS as readonly string[]).includes(v);
}
