// Seeded random numbers for the examples. torch's default generator starts from the same seed
// in every fresh process, so torch.randn in a new process is reproducible; defaultGenerator
// mirrors that (different numbers than torch's, same property).

/** mulberry32: small, fast, good enough for examples and synthetic data. */
export class Generator {
  private state: number;
  private spare: number | undefined;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  uniform(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Standard normal (Box-Muller, both values used). */
  normal(): number {
    if (this.spare !== undefined) {
      const s = this.spare;
      this.spare = undefined;
      return s;
    }
    let u = 0;
    while (u === 0) u = this.uniform();
    const v = this.uniform();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }

  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.uniform() * n);
  }
}

export const DEFAULT_SEED = 67280421310721 % 2 ** 32;

export const defaultGenerator = new Generator(DEFAULT_SEED);

/** torch.randn(n): n standard-normal float32 values (a shape is only for printing). */
export function randn(n: number, gen: Generator = defaultGenerator): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = gen.normal();
  return out;
}
