// Shared pieces of the fuzz tests: how many cases and which seed (both from the environment, the
// seed printed so a failure can be replayed), and generators of hostile JSON payloads built from
// one valid message of an entry point.
import fc from 'fast-check';

/**
 * Cases per entry point: CMESH_FUZZ_RUNS, else `fallback` (10000; entry points that cost a
 * round trip through several processes per case pass less, so the suite stays within its time).
 */
export function fuzzRuns(fallback = 10_000): number {
  const v = process.env.CMESH_FUZZ_RUNS;
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`CMESH_FUZZ_RUNS must be a positive integer, got ${JSON.stringify(v)}`);
  return n;
}

/** A fixed seed per entry point, so every run sends the same cases; CMESH_FUZZ_SEED replaces it. */
export function fuzzSeed(entryPoint: string): number {
  const v = process.env.CMESH_FUZZ_SEED;
  if (v !== undefined && v !== '') {
    const n = Number(v);
    if (!Number.isInteger(n)) throw new Error(`CMESH_FUZZ_SEED must be an integer, got ${JSON.stringify(v)}`);
    return n | 0;
  }
  let h = 0x811c9dc5; // FNV-1a of the name: stable across runs and machines
  for (let i = 0; i < entryPoint.length; i++) h = Math.imul(h ^ entryPoint.charCodeAt(i), 0x01000193);
  return h | 0;
}

export interface FuzzPlan {
  entryPoint: string;
  seed: number;
  /** cases in all: batches × batch */
  cases: number;
  /** fast-check runs; each run sends one batch of `batch` cases */
  numRuns: number;
  batch: number;
}

/** The runs for `entryPoint` with `batch` cases per run, printed with the line that replays them. */
export function fuzzPlan(entryPoint: string, batch = 1, fallbackRuns?: number): FuzzPlan {
  const seed = fuzzSeed(entryPoint);
  const runs = fuzzRuns(fallbackRuns);
  const numRuns = Math.max(1, Math.ceil(runs / batch));
  const plan = { entryPoint, seed, numRuns, batch, cases: numRuns * batch };
  process.stdout.write(`fuzz ${entryPoint}: ${plan.cases} cases, seed ${seed} (replay: CMESH_FUZZ_SEED=${seed} CMESH_FUZZ_RUNS=${runs})\n`);
  return plan;
}

/**
 * Runs a property over a plan without shrinking (each case costs a round trip to a real server)
 * and without printing the counterexample (it can be megabytes): the property collects what went
 * wrong in words, and this returns it, with the seed and path that replay the failing run.
 */
export async function runFuzz<T>(plan: FuzzPlan, arb: fc.Arbitrary<T>, check: (value: T) => Promise<string[]>): Promise<string[]> {
  const problems: string[] = [];
  const details = await fc.check(
    fc.asyncProperty(arb, async (v) => {
      const p = await check(v);
      problems.push(...p);
      return p.length === 0;
    }),
    { seed: plan.seed, numRuns: plan.numRuns, endOnFailure: true },
  );
  if (details.failed) {
    const err = details.errorInstance ? `: ${(details.errorInstance as Error).message}` : '';
    problems.push(`${plan.entryPoint}: run ${details.numRuns} failed (seed ${plan.seed}, path ${details.counterexamplePath})${err}`);
  }
  return problems;
}

const enc = new TextEncoder();
const bytes = (s: string) => enc.encode(s);

/** A JSON value of another type than `v` (so a required field set to it is always wrong). */
function otherType(v: unknown): fc.Arbitrary<unknown> {
  const all: Array<[string, fc.Arbitrary<unknown>]> = [
    ['string', fc.string({ maxLength: 40 })],
    ['number', fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }))],
    ['boolean', fc.boolean()],
    ['null', fc.constant(null)],
    ['array', fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 })],
    ['object', fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 })],
  ];
  const t = v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
  return fc.oneof(...all.filter(([k]) => k !== t).map(([, a]) => a));
}

/** Values a field of the same type may take that a schema should refuse (bounds, ids, sizes). */
function hostileSameType(v: unknown): fc.Arbitrary<unknown> {
  if (typeof v === 'string')
    return fc.oneof(
      fc.constantFrom('', ' ', '*', '>', 'a b', '../x', '\u0000', 'é', '%2e', 'x'.repeat(129), 'y'.repeat(20_000)),
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }).map((s) => `${s}*`),
    );
  if (typeof v === 'number') return fc.constantFrom(0, -1, -0.5, 0.5, 1e308, -1e308, 2 ** 53, 2 ** 64, -(2 ** 31));
  return otherType(v);
}

export interface PayloadOptions {
  /** keys of `valid` whose absence or wrong type the schema must refuse */
  required: readonly string[];
  /** keys of `required` whose values are constrained (ids, bounded numbers): hostile values of the same type are tried too */
  constrained?: readonly string[];
  /** extra size: payloads up to this many bytes (default 900 KiB, under nats-server's 1 MiB) */
  maxBytes?: number;
}

/**
 * Payloads an entry point taking `valid`-shaped JSON must refuse: random bytes, text that is not
 * JSON, the valid message cut short, values of other JSON types, a required key missing or of
 * another type or out of range, nesting deep enough to overflow a recursive parser, `__proto__`
 * keys, and messages of up to maxBytes. Each is labelled with what it is.
 */
export function invalidJsonPayload(valid: Record<string, unknown>, opts: PayloadOptions): fc.Arbitrary<{ what: string; data: Uint8Array }> {
  const text = JSON.stringify(valid);
  const maxBytes = opts.maxBytes ?? 900 * 1024;
  if (!opts.required.length) throw new Error('invalidJsonPayload: name at least one key of the valid message');
  const key = fc.constantFrom(...opts.required);
  const mutate = (k: string, v: unknown) => bytes(JSON.stringify({ ...valid, [k]: v }));
  // weights keep the costly cases (deep, large) rare: each case is a round trip to a real server
  const p = (what: string, a: fc.Arbitrary<Uint8Array>, weight = 10) => ({ arbitrary: a.map((data) => ({ what, data })), weight });
  return fc.oneof(
    p('random bytes', fc.uint8Array({ minLength: 1, maxLength: 512 })),
    p(
      'not JSON',
      fc
        .string({ minLength: 1, maxLength: 200 })
        .filter((s) => !isJson(s))
        .map(bytes),
    ),
    p(
      'truncated',
      fc.integer({ min: 1, max: Math.max(1, text.length - 1) }).map((n) => bytes(text.slice(0, n))),
    ),
    p(
      'trailing garbage',
      fc
        .string({ minLength: 1, maxLength: 20 })
        .filter((s) => !isJson(text + s))
        .map((s) => bytes(text + s)),
    ),
    p(
      'another JSON type',
      fc
        .oneof(fc.constant(null), fc.boolean(), fc.integer(), fc.string({ maxLength: 50 }), fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 5 }))
        .map((v) => bytes(JSON.stringify(v))),
    ),
    p(
      'missing key',
      key.map((k) => bytes(JSON.stringify(Object.fromEntries(Object.entries(valid).filter(([x]) => x !== k))))),
    ),
    p(
      'key of another type',
      key.chain((k) => otherType(valid[k]).map((v) => mutate(k, v))),
    ),
    ...(opts.constrained?.length
      ? [
          p(
            'key out of range',
            fc.constantFrom(...opts.constrained).chain((k) =>
              hostileSameType(valid[k])
                .filter((v) => v !== valid[k])
                .map((v) => mutate(k, v)),
            ),
          ),
        ]
      : []),
    p(
      'deep nesting',
      fc.integer({ min: 1000, max: 50_000 }).map((n) => bytes(`${'['.repeat(n)}${']'.repeat(n)}`)),
      1,
    ),
    p(
      'deep nesting in a key',
      fc.tuple(key, fc.integer({ min: 1000, max: 20_000 })).map(([k, n]) => bytes(`{"${k}":${'{"a":'.repeat(n)}1${'}'.repeat(n)}}`)),
      1,
    ),
    p(
      '__proto__',
      key.map((k) => bytes(`{"__proto__":${text},"constructor":{"prototype":{"${k}":1}}}`)),
    ),
    p(
      'large',
      fc.tuple(key, fc.integer({ min: 64 * 1024, max: maxBytes - text.length - 64 })).map(([k, n]) => mutate(k, ['z'.repeat(n)])),
      1,
    ),
  );
}

function isJson(s: string): boolean {
  try {
    JSON.parse(s);
    return true;
  } catch {
    return false;
  }
}

/**
 * cmesh_rejected_messages_total of one subject (every reason) from a Prometheus text page: how
 * many of the messages sent there a process has received and refused.
 */
export async function rejectedMessages(metricsUrl: string, subject: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  let n = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('cmesh_rejected_messages_total{') || !line.includes(`subject="${subject}"`)) continue;
    n += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return n;
}
