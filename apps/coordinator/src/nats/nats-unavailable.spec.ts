import { ClosedConnectionError, RequestError, TimeoutError, NoRespondersError } from '@nats-io/nats-core';
import { JetStreamApiError } from '@nats-io/jetstream';
import { NatsConnectionLostError } from '@cmesh/collectives/errors';
import { natsUnavailable } from './nats-unavailable';

describe('natsUnavailable', () => {
  it.each([
    ['a request timeout', new TimeoutError()],
    ['no responders', new RequestError('no responders', { cause: new NoRespondersError('$JS.API.STREAM.INFO.x') })],
    ['a closed connection', new ClosedConnectionError()],
    ['JetStream temporarily unavailable', new JetStreamApiError({ code: 503, err_code: 10008, description: 'JetStream system temporarily unavailable' })],
    ['no placement', new JetStreamApiError({ code: 500, err_code: 10005, description: 'insufficient resources' })],
    ['a lost connection', new NatsConnectionLostError('down', ['nats://127.0.0.1:4222'], 3000)],
    ['a wrapped timeout', new Error('KV read of claims failed', { cause: new TimeoutError() })],
  ])('%s is 503 UNAVAILABLE', (_what, e) => {
    const r = natsUnavailable(e);
    expect(r?.code).toBe('UNAVAILABLE');
    expect(r?.message).toContain(e.message);
  });

  it.each([
    ['a bug', new TypeError("Cannot read properties of undefined (reading 'x')")],
    ['a JetStream refusal of the request', new JetStreamApiError({ code: 400, err_code: 10058, description: 'stream name already in use' })],
    ['not an error', 'timeout'],
  ])('%s is not', (_what, e) => {
    expect(natsUnavailable(e)).toBeUndefined();
  });
});
