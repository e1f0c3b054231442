export * from './store';
export { TcpStore, TcpStoreOptions, DEFAULT_STORE_TIMEOUT_MS, TCP_STORE_WORKERS_KEY } from './tcp-store';
export { TcpStoreServer, startTcpStoreServer } from './tcp-store-server';
export { FileStore, FileStoreOptions } from './file-store';
export { PrefixStore } from './prefix-store';
