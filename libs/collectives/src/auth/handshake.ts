// The challenge-response every TcpStore and data-plane connection runs first when a secret is
// set. Both sides prove they hold the key without sending it: HMAC-SHA256 over both sides'
// random nonces (so no answer can be replayed on another connection), the connection's context
// (store or data plane: an answer for one is no answer for the other) and the dialer's payload
// (its rank on the data plane). The dialer proves first; the listener answers with its own proof
// only after checking it, so a stranger learns nothing it could use.
//
//   dialer   -> MAGIC | HELLO     | nonceD(32)
//   listener -> MAGIC | CHALLENGE | nonceL(32)
//   dialer   -> payload(n) | HMAC(key, "cmesh-auth-1 dialer"   | context | nonceL | nonceD | payload)
//   listener -> MAGIC | ACCEPT    | HMAC(key, "cmesh-auth-1 listener" | context | nonceD | nonceL | payload)
//            or MAGIC | REFUSE    | reason(1) | zeros(31), and the listener closes
//
// Every listener message is 41 bytes. MAGIC's first byte is 0xff: read as a store frame's or a
// data-plane rank's little-endian u32 it is out of range, so a peer that does not authenticate
// recognises a refusal (and a listener without a secret recognises a HELLO) instead of parsing it.
// Sans I/O: the callers feed bytes in and write what comes out.
import { createHmac, randomBytes, timingSafeEqual } from 'crypto';

export const AUTH_MAGIC = Buffer.from([0xff, 0x43, 0x4d, 0x41, 0x55, 0x54, 0x48, 0x31]); // 0xff "CMAUTH1"
const NONCE = 32;
const MAC = 32;
/** Length of every listener message, and of the dialer's hello. */
export const AUTH_MESSAGE_BYTES = AUTH_MAGIC.length + 1 + NONCE;
/** How long a listener gives a new connection to authenticate before closing it. */
export const AUTH_TIMEOUT_MS = 10_000;

const enum Type {
  Hello = 1,
  Challenge = 2,
  Accept = 3,
  Refuse = 4,
}

/** Why a connection was refused; the texts are what logs and errors say (never a secret). */
export const enum RefuseReason {
  WrongSecret = 1,
  NoAuthentication = 2,
  ListenerHasNoSecret = 3,
  Protocol = 4,
}

export function refuseText(r: RefuseReason): string {
  switch (r) {
    case RefuseReason.WrongSecret:
      return 'wrong secret';
    case RefuseReason.NoAuthentication:
      return 'the connection did not authenticate (no secret set on that side)';
    case RefuseReason.ListenerHasNoSecret:
      return 'the listener has no secret set';
    default:
      return 'not the authentication protocol';
  }
}

function message(type: Type, body: Buffer): Buffer {
  const out = Buffer.alloc(AUTH_MESSAGE_BYTES);
  AUTH_MAGIC.copy(out, 0);
  out[AUTH_MAGIC.length] = type;
  body.copy(out, AUTH_MAGIC.length + 1, 0, NONCE);
  return out;
}

/** The refusal a listener sends before closing. */
export function refusal(reason: RefuseReason): Buffer {
  const body = Buffer.alloc(NONCE);
  body[0] = reason;
  return message(Type.Refuse, body);
}

/** Whether these bytes begin with an authentication message (as far as they go). */
function startsWithMagic(b: Buffer): boolean {
  const n = Math.min(b.length, AUTH_MAGIC.length);
  return n > 0 && b.subarray(0, n).equals(AUTH_MAGIC.subarray(0, n));
}

/** The refusal reason in a listener message that begins these bytes, if it is one. */
export function readRefusal(b: Buffer): RefuseReason | undefined {
  if (b.length < AUTH_MESSAGE_BYTES || !b.subarray(0, AUTH_MAGIC.length).equals(AUTH_MAGIC)) return undefined;
  return b[AUTH_MAGIC.length] === Type.Refuse ? (b[AUTH_MAGIC.length + 1] as RefuseReason) : undefined;
}

function mac(key: Buffer, role: string, context: string, first: Buffer, second: Buffer, payload: Buffer): Buffer {
  return createHmac('sha256', key).update(`cmesh-auth-1 ${role}\0${context}\0`).update(first).update(second).update(payload).digest();
}

export type Step<T> =
  | { state: 'more'; send?: Buffer }
  | { state: 'done'; send?: Buffer; rest: Buffer; value: T }
  | { state: 'failed'; send?: Buffer; reason: RefuseReason; by: 'us' | 'them' };

/** Collects exactly `n` bytes across chunks. */
class Reader {
  private buf = Buffer.alloc(0);
  push(chunk: Buffer): void {
    // always a copy: callers may hand us a read buffer they reuse
    this.buf = Buffer.concat([this.buf, chunk]);
  }
  take(n: number): Buffer | undefined {
    if (this.buf.length < n) return undefined;
    const out = Buffer.from(this.buf.subarray(0, n));
    this.buf = this.buf.subarray(n);
    return out;
  }
  peek(): Buffer {
    return this.buf;
  }
  rest(): Buffer {
    const r = this.buf;
    this.buf = Buffer.alloc(0);
    return r;
  }
  get length(): number {
    return this.buf.length;
  }
}

/** The dialing side: `hello()` once connected, then `push()` what the listener sends. */
export class AuthDialer {
  private readonly nonce = randomBytes(NONCE);
  private readonly reader = new Reader();
  private stage: 'challenge' | 'verdict' | 'over' = 'challenge';
  private theirNonce?: Buffer;

  constructor(
    private readonly key: Buffer,
    private readonly context: string,
    private readonly payload: Buffer = Buffer.alloc(0),
  ) {}

  hello(): Buffer {
    return message(Type.Hello, this.nonce);
  }

  push(chunk: Buffer): Step<void> {
    this.reader.push(chunk);
    if (this.stage === 'challenge') {
      const m = this.reader.take(AUTH_MESSAGE_BYTES);
      if (!m) return { state: 'more' };
      const r = this.parse(m, Type.Challenge);
      if (r !== undefined) return this.fail(r);
      this.theirNonce = m.subarray(AUTH_MAGIC.length + 1);
      this.stage = 'verdict';
      const proof = mac(this.key, 'dialer', this.context, this.theirNonce, this.nonce, this.payload);
      return { state: 'more', send: Buffer.concat([this.payload, proof]) };
    }
    if (this.stage === 'verdict') {
      const m = this.reader.take(AUTH_MESSAGE_BYTES);
      if (!m) return { state: 'more' };
      const r = this.parse(m, Type.Accept);
      if (r !== undefined) return this.fail(r);
      const expected = mac(this.key, 'listener', this.context, this.nonce, this.theirNonce!, this.payload);
      // the listener took our proof but cannot prove the key itself: not the peer we meant
      if (!timingSafeEqual(expected, m.subarray(AUTH_MAGIC.length + 1))) return this.fail(RefuseReason.WrongSecret, 'us');
      this.stage = 'over';
      return { state: 'done', rest: this.reader.rest(), value: undefined };
    }
    return { state: 'more' };
  }

  /** undefined: the expected message; else why not. */
  private parse(m: Buffer, want: Type): RefuseReason | undefined {
    if (!m.subarray(0, AUTH_MAGIC.length).equals(AUTH_MAGIC)) return RefuseReason.Protocol;
    const type = m[AUTH_MAGIC.length];
    if (type === Type.Refuse) return (m[AUTH_MAGIC.length + 1] as RefuseReason) || RefuseReason.Protocol;
    return type === want ? undefined : RefuseReason.Protocol;
  }

  private fail(reason: RefuseReason, by: 'us' | 'them' = 'them'): Step<void> {
    this.stage = 'over';
    return { state: 'failed', reason, by };
  }
}

/** The listening side: `push()` what the dialer sends; done yields the dialer's payload. */
export class AuthListener {
  private readonly nonce = randomBytes(NONCE);
  private readonly reader = new Reader();
  private stage: 'hello' | 'proof' | 'over' = 'hello';
  private theirNonce?: Buffer;

  constructor(
    private readonly key: Buffer,
    private readonly context: string,
    private readonly payloadBytes = 0,
  ) {}

  push(chunk: Buffer): Step<Buffer> {
    this.reader.push(chunk);
    if (this.stage === 'hello') {
      // judge a stranger by its first bytes: a client without a secret sends its protocol at once
      if (this.reader.length && !startsWithMagic(this.reader.peek())) return this.refuse(RefuseReason.NoAuthentication);
      const m = this.reader.take(AUTH_MESSAGE_BYTES);
      if (!m) return { state: 'more' };
      if (m[AUTH_MAGIC.length] !== Type.Hello) return this.refuse(RefuseReason.Protocol);
      this.theirNonce = m.subarray(AUTH_MAGIC.length + 1);
      this.stage = 'proof';
      return { state: 'more', send: message(Type.Challenge, this.nonce) };
    }
    if (this.stage === 'proof') {
      const m = this.reader.take(this.payloadBytes + MAC);
      if (!m) return { state: 'more' };
      const payload = m.subarray(0, this.payloadBytes);
      const expected = mac(this.key, 'dialer', this.context, this.nonce, this.theirNonce!, payload);
      if (!timingSafeEqual(expected, m.subarray(this.payloadBytes))) return this.refuse(RefuseReason.WrongSecret);
      this.stage = 'over';
      const proof = mac(this.key, 'listener', this.context, this.theirNonce!, this.nonce, payload);
      return { state: 'done', send: message(Type.Accept, proof), rest: this.reader.rest(), value: Buffer.from(payload) };
    }
    return { state: 'more' };
  }

  private refuse(reason: RefuseReason): Step<Buffer> {
    this.stage = 'over';
    return { state: 'failed', send: refusal(reason), reason, by: 'us' };
  }
}

const lastLogged = new Map<string, { at: number; suppressed: number }>();

/**
 * One stderr line per refused connection (at most one a second per place and reason, with a count
 * of those left out): who was refused and why, never the secret or what the stranger sent.
 */
export function logRefusal(where: string, remote: string, reason: RefuseReason): void {
  const k = `${where}\0${reason}`;
  const now = Date.now();
  const seen = lastLogged.get(k);
  if (seen && now - seen.at < 1000) {
    seen.suppressed++;
    return;
  }
  const more = seen?.suppressed ? ` (${seen.suppressed} more refused since the last line)` : '';
  lastLogged.set(k, { at: now, suppressed: 0 });
  process.stderr.write(`cmesh: ${where} refused a connection from ${remote}: ${refuseText(reason)}${more}\n`);
}
