export { reduceInto, finishAvg, setKernelMode } from './kernels';
export type { KernelMode } from './kernels';
