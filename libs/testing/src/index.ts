export * from './free-port';
export * from './nats-server';
export * from './prometheus';
export * from './inspector';
export * from './fuzz';
export * from './netns';
export * from './nccl-sim';
export * from './forged-trace';
