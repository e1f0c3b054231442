// Strings a peer chose (agent names, member labels, hosts, end messages, reasons, errors) reach a
// terminal (`cmesh status`, `cmesh scan`, log lines) and a page (/ui). A control character in one
// could move the cursor, recolour or rewrite what an operator reads (ANSI escapes), or reorder it
// (bidirectional overrides), so every such string is shown through printable(): the character
// escaped visibly, `\x1b[31m` as those eight characters, the rest unchanged.

/** C0 (newline and tab too), DEL, C1, and Unicode's invisible format and bidirectional controls. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

/** The same less C0, which JSON.stringify escapes inside strings (outside them: its own newlines). */
const NOT_C0 = /[\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

const escape = (c: string) => {
  const n = c.charCodeAt(0);
  return n < 0x100 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
};

/** A peer-supplied string with every control character escaped visibly (`\x1b`, `\u202e`); anything else as a string first. */
export function printable(s: unknown): string {
  return (typeof s === 'string' ? s : String(s)).replace(CONTROL, escape);
}

/** printable() for text of several lines: the newlines are kept, every other control character escaped. */
export function printableLines(s: string): string {
  return s
    .split('\n')
    .map((l) => printable(l))
    .join('\n');
}

/** A copy of a value (parsed JSON) with printable() applied to every string in it, keys included. */
export function printableDeep<T>(v: T): T {
  if (typeof v === 'string') return printable(v) as T;
  if (Array.isArray(v)) return v.map((x) => printableDeep(x)) as T;
  if (v && typeof v === 'object' && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null)) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [printable(k), printableDeep(x)])) as T;
  }
  return v;
}

/**
 * JSON text for a terminal: JSON.stringify escapes C0 already; DEL, C1 and the format controls it
 * leaves raw are written as \u escapes too (the same JSON to a parser).
 */
export function printableJson(value: unknown, space?: number): string {
  return JSON.stringify(value, null, space).replace(NOT_C0, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * pino's `hooks` for a process's logger: every string a log line is made of goes through
 * printable(), so a peer's name or message in it cannot carry a control character (JSON escapes
 * C0 but leaves DEL, C1 and the format controls raw).
 */
export const printableLogHooks = {
  logMethod(this: unknown, args: unknown[], method: (...args: unknown[]) => void): void {
    method.apply(
      this,
      args.map((a) => (typeof a === 'string' ? printable(a) : a)),
    );
  },
};
