export * from './env';
export * from './spawn';
export { ChildGroup, ChildExit, describeExit, KILL_GRACE_MS } from './children';
