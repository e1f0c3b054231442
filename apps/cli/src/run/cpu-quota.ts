// How many CPUs this process can really use: its scheduler affinity (taskset, a cpuset), capped by
// its cgroup's CPU quota (cgroup v2 `cpu.max`, cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`,
// the smallest along the path up to the hierarchy's root), which is what a Kubernetes CPU limit
// or `docker run --cpus` sets. os.availableParallelism() sees only the affinity: a pod limited to
// 2 CPUs on a 64-core node reports 64. `cmesh run` and `cmesh bench` read this before deciding
// whether workers may be pinned to cores and busy-poll.
import { readFileSync } from 'fs';
import * as os from 'os';
import { join, posix } from 'path';

export interface CpuBudget {
  /** whole CPUs usable at once: min(affinity, ceil(quota)) */
  cpus: number;
  /** the affinity's CPU count */
  affinity: number;
  /** the cgroup quota in CPUs (e.g. 1.5), when there is one */
  quota?: number;
  /** where the quota comes from, e.g. "cgroup v2 cpu.max 150000 100000 (/sys/fs/cgroup/kubepods/…)" */
  source?: string;
}

const read = (file: string): string | undefined => {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
};

/** A cgroup v2 `cpu.max` ("max 100000" or "150000 100000") in CPUs; undefined for no limit. */
function parseCpuMax(text: string): number | undefined {
  const [quota, period = '100000'] = text.trim().split(/\s+/);
  if (quota === 'max') return undefined;
  const q = Number(quota);
  const p = Number(period);
  return q > 0 && p > 0 ? q / p : undefined;
}

/** cgroup v1's cfs quota and period (quota -1: no limit) in CPUs. */
function parseCfsQuota(quotaUs: string, periodUs: string): number | undefined {
  const q = Number(quotaUs);
  const p = Number(periodUs);
  return q > 0 && p > 0 ? q / p : undefined;
}

interface Mount {
  root: string;
  point: string;
  fstype: string;
  options: string;
}

/** The cgroup mounts of /proc/self/mountinfo: "id parent dev root point opts ... - fstype source superopts". */
function cgroupMounts(mountinfo: string): Mount[] {
  const out: Mount[] = [];
  for (const line of mountinfo.split('\n')) {
    const [left, right] = line.split(' - ');
    if (!right) continue;
    const f = left.split(' ');
    const [fstype, , superopts = ''] = right.split(' ');
    if (fstype === 'cgroup' || fstype === 'cgroup2') out.push({ root: f[3], point: f[4], fstype, options: superopts });
  }
  return out;
}

/** The directories from the process's cgroup up to the mount's root, deepest first. */
function dirsUp(mount: Mount, cgroupPath: string): string[] {
  // in a cgroup namespace the mount's root is the namespace's, and /proc/self/cgroup is relative to it
  const rel = mount.root !== '/' && cgroupPath.startsWith(mount.root) ? cgroupPath.slice(mount.root.length) : cgroupPath;
  const dirs: string[] = [];
  for (let p = posix.normalize('/' + rel); ; p = posix.dirname(p)) {
    dirs.push(p === '/' ? mount.point : join(mount.point, p));
    if (p === '/') return dirs;
  }
}

/** The smallest CPU quota along this process's cgroups (v2 and v1), with where it was found. */
export function cgroupQuota(
  procCgroup: string,
  mountinfo: string,
  readFile: (f: string) => string | undefined = read,
): { cpus: number; source: string } | undefined {
  const mounts = cgroupMounts(mountinfo);
  let best: { cpus: number; source: string } | undefined;
  const consider = (cpus: number | undefined, source: string) => {
    if (cpus !== undefined && (!best || cpus < best.cpus)) best = { cpus, source };
  };
  for (const line of procCgroup.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    const [, id, controllers, path] = m;
    if (id === '0' && controllers === '') {
      for (const mount of mounts.filter((x) => x.fstype === 'cgroup2')) {
        for (const dir of dirsUp(mount, path)) {
          const max = readFile(join(dir, 'cpu.max'));
          if (max !== undefined) consider(parseCpuMax(max), `cgroup v2 cpu.max "${max}" (${dir})`);
        }
      }
    } else if (controllers.split(',').includes('cpu')) {
      for (const mount of mounts.filter((x) => x.fstype === 'cgroup' && x.options.split(',').includes('cpu'))) {
        for (const dir of dirsUp(mount, path)) {
          const quota = readFile(join(dir, 'cpu.cfs_quota_us'));
          const period = readFile(join(dir, 'cpu.cfs_period_us'));
          if (quota !== undefined && period !== undefined)
            consider(parseCfsQuota(quota, period), `cgroup v1 cpu.cfs_quota_us ${quota} / cpu.cfs_period_us ${period} (${dir})`);
        }
      }
    }
  }
  return best;
}

/** This process's CPU budget (Linux: affinity and cgroup quota; elsewhere the affinity alone). */
export function cpuBudget(): CpuBudget {
  const affinity = os.availableParallelism();
  if (process.platform !== 'linux') return { cpus: affinity, affinity };
  const q = cgroupQuota(read('/proc/self/cgroup') ?? '', read('/proc/self/mountinfo') ?? '');
  if (!q) return { cpus: affinity, affinity };
  return { cpus: Math.max(1, Math.min(affinity, Math.ceil(q.cpus - 1e-9))), affinity, quota: q.cpus, source: q.source };
}
