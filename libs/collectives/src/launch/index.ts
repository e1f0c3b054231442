export * from './env';
export * from './spawn';
export { record, recordError, ErrorFileData, ERROR_FILE_ENV } from './record';
export { ChildGroup, ChildGroupOptions, ChildExit, describeExit, KILL_GRACE_MS } from './children';
export { freePort } from './free-port';
