// Prints typed arrays the way torch prints tensors (torch/_tensor_str.py, default print
// options), so the examples' output reads like the originals': `tensor([[6., 6.],\n        [6., 6.]])`.
// Typed arrays carry no shape, so callers pass one (default: 1-D; [] for a 0-dim tensor).
// There is no device suffix: the examples run on the CPU data plane.
import * as dist from '@cmesh/collectives';
import { formatExp, formatFixed, pyFloat } from './py-number';

const PRECISION = 4;
const THRESHOLD = 1000;
const EDGEITEMS = 3;
const LINEWIDTH = 80;

type Tensor = dist.Tensor;
type Scalar = number | bigint;

/** torch's dtype name, e.g. torch.int32. */
export function torchDtype(t: Tensor): string {
  return `torch.${dist.dtypeOf(t)}`;
}

function isFloat(t: Tensor): boolean {
  return ['float32', 'float64', 'float16', 'bfloat16'].includes(dist.dtypeOf(t));
}

/** Element values as JS numbers (bigints for int64); 16-bit floats decoded. */
function valuesOf(t: Tensor): ArrayLike<Scalar> {
  const dtype = dist.dtypeOf(t);
  if (dtype === 'float16' || dtype === 'bfloat16') return (t as dist.Float16BitsArray).toFloat32();
  return t as ArrayLike<Scalar>;
}

/** torch's _Formatter: int mode, fixed or scientific, one width for all elements. */
class Formatter {
  private intMode = true;
  private sciMode = false;
  private maxWidth = 1;

  constructor(
    private readonly floating: boolean,
    values: Scalar[],
  ) {
    if (!floating) {
      for (const v of values) this.maxWidth = Math.max(this.maxWidth, String(v).length);
      return;
    }
    const nz = (values as number[]).filter((v) => Number.isFinite(v) && v !== 0);
    if (nz.length === 0) return;
    const abs = nz.map(Math.abs);
    const min = Math.min(...abs);
    const max = Math.max(...abs);
    this.intMode = nz.every((v) => v === Math.ceil(v));
    if (this.intMode) {
      if (max / min > 1000 || max > 1e8) {
        this.sciMode = true;
        for (const v of nz) this.maxWidth = Math.max(this.maxWidth, formatExp(v, PRECISION).length);
      } else {
        for (const v of nz) this.maxWidth = Math.max(this.maxWidth, formatFixed(v, 0).length + 1);
      }
    } else if (max / min > 1000 || max > 1e8 || min < 1e-4) {
      this.sciMode = true;
      for (const v of nz) this.maxWidth = Math.max(this.maxWidth, formatExp(v, PRECISION).length);
    } else {
      for (const v of nz) this.maxWidth = Math.max(this.maxWidth, formatFixed(v, PRECISION).length);
    }
  }

  width(): number {
    return this.maxWidth;
  }

  format(value: Scalar): string {
    let s: string;
    if (!this.floating) {
      s = String(value);
    } else {
      const v = value as number;
      if (this.sciMode) s = formatExp(v, PRECISION);
      else if (this.intMode) s = formatFixed(v, 0) + (Number.isFinite(v) ? '.' : '');
      else s = formatFixed(v, PRECISION);
    }
    return s.padStart(this.maxWidth, ' ');
  }
}

/** A row-major view: values[offset + i*strides[0] + ...]. */
interface View {
  values: ArrayLike<Scalar>;
  offset: number;
  shape: readonly number[];
  strides: readonly number[];
}

function sub(v: View, i: number): View {
  return { values: v.values, offset: v.offset + i * v.strides[0], shape: v.shape.slice(1), strides: v.strides.slice(1) };
}

/** Indices kept along the first dim (all, or the edge items when summarizing). */
function keptIndices(size: number, summarize: boolean): number[] {
  const all = Array.from({ length: size }, (_, i) => i);
  if (!summarize || size <= 2 * EDGEITEMS) return all;
  return [...all.slice(0, EDGEITEMS), ...all.slice(size - EDGEITEMS)];
}

/** torch's get_summarized_data, flattened: the values the formatter measures. */
function summarizedValues(v: View, summarize: boolean, out: Scalar[]): void {
  if (v.shape.length === 0) {
    out.push(v.values[v.offset]);
    return;
  }
  for (const i of keptIndices(v.shape[0], summarize)) summarizedValues(sub(v, i), summarize, out);
}

function vectorStr(v: View, indent: number, summarize: boolean, fmt: Formatter): string {
  const elementLength = fmt.width() + 2;
  const perLine = Math.max(1, Math.floor((LINEWIDTH - indent) / elementLength));
  const size = v.shape[0];
  const at = (i: number) => fmt.format(v.values[v.offset + i * v.strides[0]]);
  let data: string[];
  if (summarize && size > 2 * EDGEITEMS) {
    data = [...Array.from({ length: EDGEITEMS }, (_, i) => at(i)), ' ...', ...Array.from({ length: EDGEITEMS }, (_, i) => at(size - EDGEITEMS + i))];
  } else {
    data = Array.from({ length: size }, (_, i) => at(i));
  }
  const lines: string[] = [];
  for (let i = 0; i < data.length; i += perLine) lines.push(data.slice(i, i + perLine).join(', '));
  return '[' + lines.join(',\n' + ' '.repeat(indent + 1)) + ']';
}

function tensorStr(v: View, indent: number, summarize: boolean, fmt: Formatter): string {
  const dim = v.shape.length;
  if (dim === 0) return fmt.format(v.values[v.offset]).trimStart();
  if (dim === 1) return vectorStr(v, indent, summarize, fmt);
  const size = v.shape[0];
  let slices: string[];
  if (summarize && size > 2 * EDGEITEMS) {
    slices = [
      ...Array.from({ length: EDGEITEMS }, (_, i) => tensorStr(sub(v, i), indent + 1, summarize, fmt)),
      '...',
      ...Array.from({ length: EDGEITEMS }, (_, i) => tensorStr(sub(v, size - EDGEITEMS + i), indent + 1, summarize, fmt)),
    ];
  } else {
    slices = Array.from({ length: size }, (_, i) => tensorStr(sub(v, i), indent + 1, summarize, fmt));
  }
  return '[' + slices.join(',' + '\n'.repeat(dim - 1) + ' '.repeat(indent + 1)) + ']';
}

function addSuffixes(tensorStr: string, suffixes: string[], indent: number): string {
  const parts = [tensorStr];
  let lastLineLen = tensorStr.length - tensorStr.lastIndexOf('\n') + 1;
  for (const suffix of suffixes) {
    if (lastLineLen + suffix.length + 2 > LINEWIDTH) {
      parts.push(',\n' + ' '.repeat(indent) + suffix);
      lastLineLen = indent + suffix.length;
    } else {
      parts.push(', ' + suffix);
      lastLineLen += suffix.length + 2;
    }
  }
  parts.push(')');
  return parts.join('');
}

/** Python's tuple repr of a shape: (0, 3), (5,). */
function shapeTuple(shape: readonly number[]): string {
  return shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
}

/** repr(tensor) as torch prints it. `shape` defaults to [t.length]; [] means a 0-dim tensor. */
export function tensorRepr(t: Tensor, shape: readonly number[] = [t.length]): string {
  const numel = shape.reduce((a, b) => a * b, 1);
  if (numel !== t.length) {
    throw new Error(`shape [${shape.join(', ')}] has ${numel} elements but the tensor has ${t.length}`);
  }
  const dtype = dist.dtypeOf(t);
  const prefix = 'tensor(';
  const indent = prefix.length;
  const suffixes: string[] = [];
  let body: string;
  if (numel === 0) {
    if (shape.length !== 1) suffixes.push(`size=${shapeTuple(shape)}`);
    if (dtype !== 'float32') suffixes.push(`dtype=${torchDtype(t)}`);
    body = '[]';
  } else {
    // float32 and int64 are torch's defaults and are not printed
    if (dtype !== 'float32' && dtype !== 'int64') suffixes.push(`dtype=${torchDtype(t)}`);
    const strides = shape.map((_, i) => shape.slice(i + 1).reduce((a, b) => a * b, 1));
    const view: View = { values: valuesOf(t), offset: 0, shape, strides };
    const summarize = numel > THRESHOLD;
    const measured: Scalar[] = [];
    summarizedValues(view, summarize, measured);
    body = tensorStr(view, indent, summarize, new Formatter(isFloat(t), measured));
  }
  return addSuffixes(prefix + body, suffixes, indent);
}

/** A tensor with a shape, printable in template strings like a torch tensor. */
export class Shaped {
  constructor(
    readonly data: Tensor,
    readonly shape: readonly number[] = [data.length],
  ) {}
  toString(): string {
    return tensorRepr(this.data, this.shape);
  }
}

/** Python's repr of a list of tensors: [tensor([0.]), tensor([1.])]. `null` prints None. */
export function listRepr(list: readonly (Tensor | Shaped)[] | null | undefined, shape?: readonly number[]): string {
  if (list === null || list === undefined) return 'None';
  return '[' + list.map((x) => (x instanceof Shaped ? x.toString() : tensorRepr(x, shape))).join(', ') + ']';
}

/** f"{tensor[i]}": a 0-dim float tensor formats as the Python float (4.0). */
export function itemStr(t: Tensor, i = 0): string {
  const v = valuesOf(t)[i];
  return isFloat(t) ? pyFloat(v as number) : String(v);
}
