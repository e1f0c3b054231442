// @cmesh/protocol: the wire contract between the coordinator, the agents and clients: NATS
// subjects and permissions, zod schemas of messages, KV records and replies, the guarded decoder,
// metric names. The app kit that serves it (settings, secrets, Inbound, exitOnFatal) is
// @cmesh/protocol/kit, the Nest transport @cmesh/protocol/nest.
export * from './reply';
export * from './idempotency';
export * from './agents';
export * from './rendezvous';
export * from './groups';
export * from './kv';
export * from './cluster';
export * from './metrics';
export * from './last-sweep';
export * from './bench';
export * from './jobs';
export * from './inbound';
export * from './trace';
export * from './scans';
export * from './scan-gate';
export * from './nats-permissions';
export * from './service-groups';
export * from './service-groups-status';
export * from './stores';
export * from './printable';
export * from './service-groups-auth';
export * from './ui-login';
export * from './nats-cluster';
export * from './node-agents';
