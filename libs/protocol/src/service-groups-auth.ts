// The integrity of a service group (docs/api.md, "Collectives as a service"): the coordinator makes
// a secret G of 32 random bytes per placed round and hands it to each member sealed under the key
// the member sent in its join (AES-256-GCM), and to each agent on its own events subject. Every
// message on the group's subjects carries Cmesh-Mac, an HMAC-SHA256 under a key derived from G over
// the subject, the chunk headers and the payload: a publisher without G (any other login of the
// mesh) cannot make one that passes. The local path proves G both ways before any op; the group's
// process group uses a data-plane secret derived from G.
//
// Everything here is plain HMAC-SHA256, HKDF-SHA256 and AES-256-GCM, so a client in any language
// can do the same (examples/service_weight_averaging.py).
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'crypto';
import { SERVICE_GROUP_HEADERS } from './service-groups';

/** The header that carries a message's MAC (64 hex digits). */
export const SERVICE_GROUP_MAC_HEADER = 'Cmesh-Mac';
/** G, a member's join key and each derived key: 32 bytes. */
export const SERVICE_GROUP_KEY_BYTES = 32;

/** A 32-byte key in standard base64 (44 characters): the join's `key`, the agent's `secret`. */
export const SERVICE_GROUP_KEY_PATTERN = /^[A-Za-z0-9+/]{43}=$/;

/** What a group's members and agents derive from G. */
export interface ServiceGroupKeys {
  /** HKDF(G, "cmesh svc mac"): the key of every message's Cmesh-Mac */
  mac: Buffer;
  /** HKDF(G, "cmesh svc local"): the key of the local path's challenge-response */
  local: Buffer;
  /** HKDF(G, "cmesh svc data-plane"), base64url: the group's process group secret (initProcessGroup({ secret })) */
  dataPlane: string;
}

function hkdf(secret: Uint8Array, info: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), info, SERVICE_GROUP_KEY_BYTES));
}

export function serviceGroupKeys(secret: Uint8Array): ServiceGroupKeys {
  if (secret.byteLength !== SERVICE_GROUP_KEY_BYTES) throw new RangeError(`a group secret has ${SERVICE_GROUP_KEY_BYTES} bytes, not ${secret.byteLength}`);
  return { mac: hkdf(secret, 'cmesh svc mac'), local: hkdf(secret, 'cmesh svc local'), dataPlane: hkdf(secret, 'cmesh svc data-plane').toString('base64url') };
}

/** A fresh group secret, or a member's join key. */
export function newServiceGroupKey(): Buffer {
  return randomBytes(SERVICE_GROUP_KEY_BYTES);
}

/** A 32-byte key from its base64, or null when it is not one. */
export function serviceGroupKeyFrom(b64: string | undefined): Buffer | null {
  if (!b64 || !SERVICE_GROUP_KEY_PATTERN.test(b64)) return null;
  const k = Buffer.from(b64, 'base64');
  return k.byteLength === SERVICE_GROUP_KEY_BYTES ? k : null;
}

/**
 * HMAC-SHA256(key, subject "\n" Cmesh-Seq "\n" Cmesh-Offset "\n" payload), hex; an absent header
 * is the empty string. A reply's subject is the reply subject it is published on.
 */
export function serviceGroupMac(key: Uint8Array, subject: string, seq: string | undefined, offset: string | undefined, payload: Uint8Array): string {
  return createHmac('sha256', key)
    .update(`${subject}\n${seq ?? ''}\n${offset ?? ''}\n`)
    .update(payload)
    .digest('hex');
}

/** The headers of a message this checks (nats.js's MsgHdrs has this shape). */
export interface ServiceGroupMacHeaders {
  get(name: string): string;
}

/** Whether the message's Cmesh-Mac is the one G's key makes for it. */
export function serviceGroupMacValid(key: Uint8Array, subject: string, headers: ServiceGroupMacHeaders | undefined, payload: Uint8Array): boolean {
  const given = headers?.get(SERVICE_GROUP_MAC_HEADER) ?? '';
  if (given.length !== 64) return false;
  const want = Buffer.from(serviceGroupMac(key, subject, headers?.get(SERVICE_GROUP_HEADERS.seq), headers?.get(SERVICE_GROUP_HEADERS.offset), payload), 'hex');
  const got = Buffer.from(given, 'hex');
  return got.byteLength === want.byteLength && timingSafeEqual(got, want);
}

/** The additional data a member's sealed G is bound to: its group and its rank. */
const sealAad = (groupId: string, rank: number) => Buffer.from(`cmesh svc seal\n${groupId}\n${rank}`);

/** G sealed for one member under its join key: base64 of a 12-byte IV, the ciphertext and the 16-byte tag. */
export function sealServiceGroupSecret(memberKey: Uint8Array, secret: Uint8Array, groupId: string, rank: number): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', memberKey, iv);
  c.setAAD(sealAad(groupId, rank));
  const body = Buffer.concat([c.update(secret), c.final()]);
  return Buffer.concat([iv, body, c.getAuthTag()]).toString('base64');
}

/** G from the member's sealed copy, or null when it was not sealed under this key for this group and rank. */
export function openServiceGroupSecret(memberKey: Uint8Array, sealed: string, groupId: string, rank: number): Buffer | null {
  const raw = Buffer.from(sealed, 'base64');
  if (raw.byteLength !== 12 + SERVICE_GROUP_KEY_BYTES + 16) return null;
  try {
    const d = createDecipheriv('aes-256-gcm', memberKey, raw.subarray(0, 12));
    d.setAAD(sealAad(groupId, rank));
    d.setAuthTag(raw.subarray(12 + SERVICE_GROUP_KEY_BYTES));
    return Buffer.concat([d.update(raw.subarray(12, 12 + SERVICE_GROUP_KEY_BYTES)), d.final()]);
  } catch {
    return null;
  }
}

/**
 * The local path's proofs: HMAC-SHA256(local key, role "\n" member nonce "\n" agent nonce), hex.
 * The agent answers the member's nonce with its proof and a nonce of its own; the member answers
 * with its proof. Each side's role is in its proof, so one cannot be reflected as the other.
 */
export function serviceGroupLocalProof(localKey: Uint8Array, role: 'agent' | 'member', memberNonce: string, agentNonce: string): string {
  return createHmac('sha256', localKey).update(`cmesh svc local\n${role}\n${memberNonce}\n${agentNonce}`).digest('hex');
}

/** Compares a proof in constant time. */
export function serviceGroupProofValid(localKey: Uint8Array, role: 'agent' | 'member', memberNonce: string, agentNonce: string, given: string): boolean {
  const want = Buffer.from(serviceGroupLocalProof(localKey, role, memberNonce, agentNonce), 'hex');
  const got = Buffer.from(typeof given === 'string' && given.length === 64 ? given : '', 'hex');
  return got.byteLength === want.byteLength && timingSafeEqual(got, want);
}

/** A nonce for the local path's challenge: 32 random bytes, base64. */
export function serviceGroupNonce(): string {
  return randomBytes(SERVICE_GROUP_KEY_BYTES).toString('base64');
}
