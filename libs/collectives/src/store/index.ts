export * from './store';
export { TcpStore, TcpStoreOptions, DEFAULT_STORE_TIMEOUT_MS, TCP_STORE_WORKERS_KEY } from './tcp-store';
export { TcpStoreServer, TcpStoreLimits, DEFAULT_TCP_STORE_LIMITS, startTcpStoreServer } from './tcp-store-server';
export { FileStore, FileStoreOptions } from './file-store';
export { PrefixStore } from './prefix-store';
