export * from './nccl-buffers';
export * from './nccl-sweep';
export * from './nccl-rows';
export * from './memory-store';
export * from './nccl-log';
