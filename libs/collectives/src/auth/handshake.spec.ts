// The challenge-response without sockets: both sides fed byte by byte, a wrong key, a proof
// replayed on another connection, a payload changed in flight, a stranger's protocol.
import { AUTH_MESSAGE_BYTES, AuthDialer, AuthListener, readRefusal, RefuseReason, Step } from './handshake';

const KEY = Buffer.from('k'.repeat(32));
const rank = (r: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(r);
  return b;
};

/** Feeds `bytes` one byte at a time; returns the last step and everything sent. */
function feed<T>(side: { push(b: Buffer): Step<T> }, bytes: Buffer): { step: Step<T>; sent: Buffer } {
  let step: Step<T> = { state: 'more' };
  const sent: Buffer[] = [];
  for (let i = 0; i < bytes.length; i++) {
    step = side.push(bytes.subarray(i, i + 1));
    if (step.send) sent.push(step.send);
    if (step.state !== 'more') break;
  }
  return { step, sent: Buffer.concat(sent) };
}

function handshake(dialerKey: Buffer, listenerKey: Buffer, context = 'data-plane', listenerContext = context) {
  const d = new AuthDialer(dialerKey, context, rank(3));
  const l = new AuthListener(listenerKey, listenerContext, 4);
  const challenge = feed(l, d.hello());
  const proof = feed(d, challenge.sent);
  const verdict = feed(l, proof.sent);
  const end = verdict.sent.length ? feed(d, verdict.sent) : undefined;
  return { d, l, challenge, proof, verdict, end };
}

it("the same key: both sides done, the dialer's payload (its rank) delivered, bytes after the verdict kept", () => {
  const { verdict, end } = handshake(KEY, KEY);
  expect(verdict.step.state).toBe('done');
  expect(verdict.step.state === 'done' && verdict.step.value.readUInt32LE(0)).toBe(3);
  expect(end!.step.state).toBe('done');
  const d = new AuthDialer(KEY, 'store');
  const l = new AuthListener(KEY, 'store');
  const proof = d.push(l.push(d.hello()).send!).send!;
  const accept = l.push(Buffer.concat([proof, Buffer.from('first frame')]));
  expect(accept.state === 'done' && accept.rest.toString()).toBe('first frame');
});

it('another key: the listener refuses (wrong secret) and sends no proof of its own', () => {
  const { verdict, end } = handshake(KEY, Buffer.from('x'.repeat(32)));
  expect(verdict.step).toMatchObject({ state: 'failed', reason: RefuseReason.WrongSecret, by: 'us' });
  expect(verdict.sent.length).toBe(AUTH_MESSAGE_BYTES);
  expect(readRefusal(verdict.sent)).toBe(RefuseReason.WrongSecret);
  expect(end!.step).toMatchObject({ state: 'failed', reason: RefuseReason.WrongSecret, by: 'them' });
});

it('a proof for one context is no proof for another (store vs data plane)', () => {
  const { verdict } = handshake(KEY, KEY, 'store', 'data-plane');
  expect(verdict.step).toMatchObject({ state: 'failed', reason: RefuseReason.WrongSecret });
});

it('a proof replayed on a new connection (a fresh listener nonce) is refused', () => {
  const first = handshake(KEY, KEY);
  const l2 = new AuthListener(KEY, 'data-plane', 4);
  const d = new AuthDialer(KEY, 'data-plane', rank(3));
  l2.push(d.hello());
  expect(l2.push(first.proof.sent)).toMatchObject({ state: 'failed', reason: RefuseReason.WrongSecret });
});

it('a rank changed in flight breaks the proof', () => {
  const d = new AuthDialer(KEY, 'data-plane', rank(3));
  const l = new AuthListener(KEY, 'data-plane', 4);
  const proof = Buffer.from(d.push(l.push(d.hello()).send!).send!);
  proof.writeUInt32LE(0, 0); // claims rank 0
  expect(l.push(proof)).toMatchObject({ state: 'failed', reason: RefuseReason.WrongSecret });
});

it('a stranger speaking another protocol is refused at its first byte', () => {
  const l = new AuthListener(KEY, 'store');
  const step = l.push(Buffer.from([0x0b, 0, 0, 0]));
  expect(step).toMatchObject({ state: 'failed', reason: RefuseReason.NoAuthentication });
  expect(readRefusal(step.send!)).toBe(RefuseReason.NoAuthentication);
});
