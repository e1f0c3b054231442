export * from './nccl-backend';
