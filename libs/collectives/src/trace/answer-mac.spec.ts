import { checkTraceAnswerMac, traceAnswerKey, traceAnswerMac } from './answer-mac';

const dump = new TextEncoder().encode('{"rank":1,"job":"j"}');

describe('trace answer MAC', () => {
  const key = traceAnswerKey('a-secret-of-the-job-0123456789');

  it('checks with the same secret, nonce and bytes only', () => {
    const mac = traceAnswerMac(key, 'n1', dump);
    expect(checkTraceAnswerMac(key, 'n1', dump, mac)).toBe(true);
    expect(checkTraceAnswerMac(traceAnswerKey('another-secret-0123456789'), 'n1', dump, mac)).toBe(false);
    expect(checkTraceAnswerMac(key, 'n2', dump, mac)).toBe(false);
    expect(checkTraceAnswerMac(key, 'n1', new TextEncoder().encode('{"rank":2,"job":"j"}'), mac)).toBe(false);
  });

  it('refuses a missing, short, long or garbled MAC', () => {
    const mac = traceAnswerMac(key, '', dump);
    for (const bad of [undefined, '', mac.slice(0, 10), mac + 'AA', 'x'.repeat(5000), '!!!!']) expect(checkTraceAnswerMac(key, '', dump, bad)).toBe(false);
  });

  it('the nonce is length-prefixed: moving bytes between nonce and dump changes the MAC', () => {
    expect(traceAnswerMac(key, 'ab', new TextEncoder().encode('c'))).not.toBe(traceAnswerMac(key, 'a', new TextEncoder().encode('bc')));
  });

  it('the key is derived, not the secret itself', () => {
    expect(key.equals(Buffer.from('a-secret-of-the-job-0123456789'))).toBe(false);
    expect(key.length).toBe(32);
  });
});
