// Loads the shared-memory addon (native/shm-transport) on first use, from the prebuilt copy an
// installed package carries (prebuilds/<platform>-<arch>/) or the repository's `make native`
// output. Without it the data plane stays on TCP (or, with CMESH_TRANSPORT=shm, says why it cannot).
import { existsSync } from 'fs';
import { join, resolve } from 'path';

export interface ShmAddon {
  createSegment(bytes: number): { fd: number; buffer: ArrayBuffer };
  openSegment(pid: number, fd: number, bytes: number): ArrayBuffer;
  closeFd(fd: number): void;
  /** FUTEX_WAKE on the int32 at `offset`. */
  wake(buffer: ArrayBuffer, offset: number): void;
  /** A native thread that waits for the int32 at `doorbell` to change and calls `fn` on the event loop. */
  startWaiter(buffer: ArrayBuffer, doorbell: number, sleeping: number, spinUs: number, fn: () => void): object;
  stopWaiter(waiter: object): void;
}

const ADDON = 'cmesh_shm.node';
/** The package's root: src/transport/shm or dist/transport/shm, three levels up. */
const PACKAGE_ROOT = resolve(__dirname, '../../..');

export function shmAddonCandidates(): string[] {
  return [join(PACKAGE_ROOT, 'prebuilds', `${process.platform}-${process.arch}`, ADDON), resolve(PACKAGE_ROOT, '../../native/shm-transport/build/Release', ADDON)];
}

let loaded: ShmAddon | undefined;

/** The addon; throws an Error saying why when it is not there or does not load. */
export function loadShmAddon(): ShmAddon {
  if (loaded) return loaded;
  if (process.platform !== 'linux') throw new Error(`shared memory needs Linux (this is ${process.platform})`);
  const file = shmAddonCandidates().find((p) => existsSync(p));
  if (!file) throw new Error(`the shm addon is not built (looked in ${shmAddonCandidates().join(', ')}; run make setup)`);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  loaded = require(file) as ShmAddon;
  return loaded;
}
