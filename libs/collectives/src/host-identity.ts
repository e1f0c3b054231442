// Which processes share a host, as the data plane's shared memory and the service's placement
// need it: no cmesh imports, so @cmesh/client can use it without loading the library.
import { readFileSync, readlinkSync } from 'fs';
import * as os from 'os';

function readOr(read: () => string, fallback: string): string {
  try {
    return read().trim();
  } catch {
    return fallback;
  }
}

/**
 * Ranks with the same identity can map each other's segments: one kernel (boot id), one PID
 * namespace (a segment is opened through /proc/<pid>/fd) and one network namespace (ranks in
 * separate network namespaces are treated as separate hosts, as containers are).
 */
export function hostIdentity(): string {
  const boot = readOr(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8'), os.hostname());
  const pidNs = readOr(() => readlinkSync('/proc/self/ns/pid'), '?');
  const netNs = readOr(() => readlinkSync('/proc/self/ns/net'), '?');
  return `${boot}/${pidNs}/${netNs}`;
}
