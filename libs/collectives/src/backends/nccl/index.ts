export * from './errors';
export * from './frame-codec';
export * from './protocol';
export * from './sidecar-client';
export * from './sidecar-process';
export * from './sidecar';
export * from './unique-id';
