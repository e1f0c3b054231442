// Loads the shared-memory addon (native/shm-transport) on first use, from the prebuilt copy an
// installed package carries (prebuilds/<platform>-<arch>/) or the repository's `make native`
// output. Without it the data plane stays on TCP (or, with CMESH_TRANSPORT=shm, says why it cannot).
import { existsSync } from 'fs';
import { join, resolve } from 'path';

export interface ShmAddon {
  createSegment(bytes: number): { fd: number; buffer: ArrayBuffer };
  openSegment(pid: number, fd: number, bytes: number): ArrayBuffer;
  closeFd(fd: number): void;
  /** A non-blocking pipe: the rank's doorbell. */
  createDoorbell(): { readFd: number; writeFd: number };
  /** A peer's doorbell (its write end), through /proc/<pid>/fd. */
  openDoorbell(pid: number, writeFd: number): number;
  /** Writes one byte: a wake-up. */
  ring(fd: number): void;
  /** Calls `fn` on the event loop whenever the doorbell rang (uv_poll on the read end). */
  startPoll(readFd: number, fn: () => void): object;
  stopPoll(poll: object): void;
  /** sched_yield(): the core to a runnable peer. */
  yield(): void;
  /** The small-collective regions of this rank and its peers ([segment, region offset, doorbell]). */
  fastOpen(own: ArrayBuffer, ownOffset: number, peers: [ArrayBuffer, number, number][]): object;
  /** Publishes op `seq` (its data and signature are written) and wakes the peers waiting for it. */
  fastPost(handle: object, seq: number): void;
  /** -1 once every peer (or peer index `only`, in group order without this rank) has posted op `seq`, else (after spinning spinUs, yielding the core up to yieldUs, then sleeping up to sleepUs) the index of one that has not. */
  fastWait(handle: object, seq: number, spinUs: number, sleepUs: number, yieldUs?: number, only?: number): number;
}

const ADDON = 'cmesh_shm.node';
const FUNCTIONS: (keyof ShmAddon)[] = [
  'createSegment',
  'openSegment',
  'closeFd',
  'createDoorbell',
  'openDoorbell',
  'ring',
  'startPoll',
  'stopPoll',
  'yield',
  'fastOpen',
  'fastPost',
  'fastWait',
];
/** The package's root: src/transport/shm or dist/transport/shm, three levels up. */
const PACKAGE_ROOT = resolve(__dirname, '../../..');

export function shmAddonCandidates(): string[] {
  // a checkout's own build first: a fresh `make native` wins over a copy packed earlier
  return [
    resolve(PACKAGE_ROOT, '../../native/shm-transport/build/Release', ADDON),
    join(PACKAGE_ROOT, 'prebuilds', `${process.platform}-${process.arch}`, ADDON),
  ];
}

let loaded: ShmAddon | undefined;

/** The addon; throws an Error saying why when it is not there or does not load. */
export function loadShmAddon(): ShmAddon {
  if (loaded) return loaded;
  if (process.platform !== 'linux') throw new Error(`shared memory needs Linux (this is ${process.platform})`);
  const file = shmAddonCandidates().find((p) => existsSync(p));
  if (!file) throw new Error(`the shm addon is not built (looked in ${shmAddonCandidates().join(', ')}; run make setup)`);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const addon = require(file) as ShmAddon;
  const missing = FUNCTIONS.filter((f) => typeof addon[f] !== 'function');
  if (missing.length) throw new Error(`the shm addon at ${file} is from another version (no ${missing.join(', ')}; run make native)`);
  loaded = addon;
  return loaded;
}
