/** The coordinator's one NatsConnection (provided by NatsModule). */
export const NATS_CONNECTION = Symbol('NATS_CONNECTION');
