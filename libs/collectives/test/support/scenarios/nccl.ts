// The nccl scenario lives in @cmesh/testing: scripts/gpu-check runs it on real GPUs.
export { runNcclScenario as run } from '@cmesh/testing';
