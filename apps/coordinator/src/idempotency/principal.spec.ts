import { IdempotencyKeys } from './idempotency-keys';
import { NO_INBOX, checkKeyOwner, natsPrincipal } from './principal';

describe('whose idempotency key a request carries', () => {
  it('with authentication, the login its reply inbox names; without, one anonymous caller', () => {
    expect(natsPrincipal('_INBOX.client.AbC123.7', true)).toBe('nats:client');
    expect(natsPrincipal('_INBOX.team-b.x', true)).toBe('nats:team-b');
    // no inbox of a login (a reply to a subject the caller may read, say): nobody, and its key is refused
    expect(natsPrincipal(undefined, true)).toBe(NO_INBOX);
    expect(natsPrincipal('cmesh.svc.g.x_1.hb', true)).toBe(NO_INBOX);
    expect(() => checkKeyOwner(NO_INBOX, 'submit')).toThrow(/needs a reply inbox of your login/);
    expect(() => checkKeyOwner('nats:client', 'submit')).not.toThrow();
    expect(natsPrincipal('_INBOX.AbC123.7', false)).toBe('nats');
  });

  it("one login's key is not another's, nor a join's a job's", () => {
    const a = IdempotencyKeys.slot('job', 'nats:client', 'k-0000001');
    expect(IdempotencyKeys.slot('job', 'nats:client', 'k-0000001')).toBe(a);
    expect(IdempotencyKeys.slot('job', 'nats:team-b', 'k-0000001')).not.toBe(a);
    expect(IdempotencyKeys.slot('join', 'nats:client', 'k-0000001')).not.toBe(a);
    // any key becomes a valid KV key
    expect(IdempotencyKeys.slot('job', 'rest', 'a key/with.dots*and>wildcards')).toMatch(/^job\.[0-9a-f]{48}$/);
  });
});
