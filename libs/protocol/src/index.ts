export * from './reply';
export * from './agents';
export * from './rendezvous';
export * from './groups';
export * from './kv';
export * from './metrics';
export * from './bench';
export * from './jobs';
