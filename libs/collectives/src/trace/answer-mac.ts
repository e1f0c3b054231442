// The MAC of a rank's answer to a trace request: anyone allowed to answer requests could answer
// `trace.collect` with a made-up dump, so a rank that has its process group's data-plane secret
// signs what it sends, and the coordinator believes a dump about a job only when the MAC checks
// against that job's secret. The key is derived from the secret (never the secret itself, which
// also authenticates the data plane), and the MAC covers the request's nonce (an old answer
// cannot be replayed to a later request) and the dump exactly as sent.
import { createHmac, hkdfSync, timingSafeEqual } from 'crypto';

/** The NATS header that carries the MAC (base64url) of an answer. */
export const TRACE_MAC_HEADER = 'Cmesh-Trace-Mac';
/** A request's nonce longer than this is not signed with (nor answered). */
export const TRACE_NONCE_MAX = 64;

const INFO = 'cmesh flight recorder answer v1';

/** HKDF-SHA256 of the secret for trace answers (32 bytes). */
export function traceAnswerKey(secret: string | Uint8Array): Buffer {
  return Buffer.from(hkdfSync('sha256', typeof secret === 'string' ? Buffer.from(secret, 'utf8') : secret, Buffer.alloc(0), INFO, 32));
}

/** HMAC-SHA256 over the nonce (length-prefixed) and the dump's bytes, base64url. */
export function traceAnswerMac(key: Buffer, nonce: string, dump: Uint8Array): string {
  const n = Buffer.from(nonce, 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32BE(n.length);
  return createHmac('sha256', key).update(len).update(n).update(dump).digest('base64url');
}

/** Whether `mac` is the MAC of the dump for this nonce under `key` (constant time). */
export function checkTraceAnswerMac(key: Buffer, nonce: string, dump: Uint8Array, mac: string | undefined): boolean {
  if (typeof mac !== 'string' || mac.length > 64) return false;
  const want = Buffer.from(traceAnswerMac(key, nonce, dump), 'base64url');
  const got = Buffer.from(mac, 'base64url');
  return got.length === want.length && timingSafeEqual(got, want);
}
