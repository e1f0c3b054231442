// @cmesh/protocol/kit: what the coordinator, the agents and the CLI share to run as processes, on
// top of the wire contract (@cmesh/protocol): settings from environment and flags, secrets from
// variables or files, guarded NATS subscription callbacks (Inbound), a rate-limited log and the
// one-line fatal exit. The Nest transport is @cmesh/protocol/nest (it needs NestJS).
export * from './settings';
export * from './secrets';
export * from './rate-limited-log';
export * from './exit-on-fatal';
export * from './inbound-handler';
