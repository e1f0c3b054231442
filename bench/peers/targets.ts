// The bounds cmesh's default data plane is held to on one host, checked per row of the side-by-side
// table (bench/compare.ts) against Open MPI in the same run:
//   ranks with a core each: up to 4 KiB within 2x Open MPI shm's time; from 1 MiB at least its bus
//     bandwidth
//   more ranks than cores:  never slower than Open MPI over TCP, and up to 4 KiB within 3x Open MPI
//     shm's time
// A row whose figures are missing (a backend not run, n/a) checks nothing. The collectives
// service's bounds (serviceTargetsFor) are held against the library in the same way.

export interface TargetInput {
  world: number;
  bytes: number;
  /** microseconds */
  cmesh?: number;
  mpiShm?: number;
  mpiTcp?: number;
  /** GB/s */
  cmeshBusBw?: number;
  mpiShmBusBw?: number;
}

export interface TargetCheck {
  /** what is checked, e.g. "<=2x mpi-shm" */
  what: string;
  ok: boolean;
  /** the measured ratio it rests on */
  ratio: number;
}

const SMALL = 4096;
const LARGE = 1 << 20;

export function targetsFor(row: TargetInput, cores: number): TargetCheck[] {
  const out: TargetCheck[] = [];
  const time = (what: string, bound: number, other?: number) => {
    if (row.cmesh === undefined || other === undefined || !(other > 0)) return;
    const ratio = row.cmesh / other;
    out.push({ what, ok: ratio <= bound, ratio });
  };
  if (row.world > cores) {
    time('<=mpi-tcp', 1, row.mpiTcp);
    if (row.bytes <= SMALL) time('<=3x mpi-shm', 3, row.mpiShm);
  } else if (row.bytes <= SMALL) {
    time('<=2x mpi-shm', 2, row.mpiShm);
  } else if (row.bytes >= LARGE && row.cmeshBusBw !== undefined && row.mpiShmBusBw !== undefined && row.mpiShmBusBw > 0) {
    const ratio = row.cmeshBusBw / row.mpiShmBusBw;
    out.push({ what: 'busbw>=mpi-shm', ok: ratio >= 1, ratio });
  }
  return out;
}

/** Microseconds a service op (world 2, the local path) may take up to 4 KiB. */
const SERVICE_SMALL_US = 150;
/** The service's time over the library's from 1 MiB (the local path). */
const SERVICE_LARGE_RATIO = 1.3;

/**
 * The bounds of the collectives service's local path (bench/compare.ts --service), against the
 * library's ranks in the same run: with world 2, up to 4 KiB at most 150 us per op; at every world,
 * from 1 MiB at most 1.3x the library's time. `ratio` is the time over the bound's reference
 * (150 us, or the library's time).
 */
export function serviceTargetsFor(row: { world: number; bytes: number; service?: number; library?: number }): TargetCheck[] {
  if (row.service === undefined) return [];
  if (row.bytes <= SMALL && row.world === 2) {
    return [{ what: `<=${SERVICE_SMALL_US}us`, ok: row.service <= SERVICE_SMALL_US, ratio: row.service / SERVICE_SMALL_US }];
  }
  if (row.bytes >= LARGE && row.library !== undefined && row.library > 0) {
    const ratio = row.service / row.library;
    return [{ what: `<=${SERVICE_LARGE_RATIO}x library`, ok: ratio <= SERVICE_LARGE_RATIO, ratio }];
  }
  return [];
}

/** One table cell: "ok <=2x mpi-shm (1.4x)", "MISSED busbw>=mpi-shm (0.8x)"; empty where nothing is checked. */
export function formatTargets(checks: TargetCheck[]): string {
  return checks.map((c) => `${c.ok ? 'ok' : 'MISSED'} ${c.what} (${c.ratio.toFixed(2)}x)`).join('; ');
}

/** "targets: 9 of 12 met (missed: ...)" over every row's checks. */
export function summarizeTargets(rows: { label: string; checks: TargetCheck[] }[]): string {
  const all = rows.flatMap((r) => r.checks.map((c) => ({ ...c, label: r.label })));
  if (!all.length) return 'targets: none checked (run cmesh with the peers it is compared with)';
  const missed = all.filter((c) => !c.ok);
  return `targets: ${all.length - missed.length} of ${all.length} met${missed.length ? ` (missed: ${missed.map((c) => `${c.label} ${c.what} ${c.ratio.toFixed(2)}x`).join(', ')})` : ''}`;
}
