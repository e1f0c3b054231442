// The targets column of bench/compare.ts: which bound each row is held to, and the verdicts.
import { formatTargets, serviceTargetsFor, summarizeTargets, targetsFor } from './targets';

describe('bench targets', () => {
  it('ranks with a core each: <= 4 KiB within 2x Open MPI shm, from 1 MiB at least its busbw, between them nothing', () => {
    expect(targetsFor({ world: 2, bytes: 8, cmesh: 1.5, mpiShm: 1, mpiTcp: 10 }, 2)).toEqual([{ what: '<=2x mpi-shm', ok: true, ratio: 1.5 }]);
    expect(targetsFor({ world: 2, bytes: 4096, cmesh: 3, mpiShm: 1 }, 2)).toEqual([{ what: '<=2x mpi-shm', ok: false, ratio: 3 }]);
    expect(targetsFor({ world: 2, bytes: 1 << 20, cmeshBusBw: 4, mpiShmBusBw: 5 }, 2)).toEqual([{ what: 'busbw>=mpi-shm', ok: false, ratio: 0.8 }]);
    expect(targetsFor({ world: 2, bytes: 65536, cmesh: 9, mpiShm: 1 }, 2)).toEqual([]);
  });

  it('more ranks than cores: never slower than Open MPI over TCP, and <= 4 KiB within 3x Open MPI shm', () => {
    const checks = targetsFor({ world: 4, bytes: 8, cmesh: 20, mpiShm: 10, mpiTcp: 40 }, 2);
    expect(checks).toEqual([
      { what: '<=mpi-tcp', ok: true, ratio: 0.5 },
      { what: '<=3x mpi-shm', ok: true, ratio: 2 },
    ]);
    expect(targetsFor({ world: 4, bytes: 1 << 20, cmesh: 50, mpiTcp: 40 }, 2)).toEqual([{ what: '<=mpi-tcp', ok: false, ratio: 1.25 }]);
    expect(formatTargets(checks)).toBe('ok <=mpi-tcp (0.50x); ok <=3x mpi-shm (2.00x)');
  });

  it('a missing figure checks nothing; the summary counts and names what was missed', () => {
    expect(targetsFor({ world: 2, bytes: 8, cmesh: 5 }, 2)).toEqual([]);
    expect(summarizeTargets([])).toMatch(/none checked/);
    const rows = [
      { label: 'w2 all_reduce 8', checks: targetsFor({ world: 2, bytes: 8, cmesh: 3, mpiShm: 1 }, 2) },
      { label: 'w2 broadcast 8', checks: targetsFor({ world: 2, bytes: 8, cmesh: 1, mpiShm: 1 }, 2) },
    ];
    expect(summarizeTargets(rows)).toBe('targets: 1 of 2 met (missed: w2 all_reduce 8 <=2x mpi-shm 3.00x)');
  });

  it('holds the service to 150 us up to 4 KiB with world 2, and to 1.3x the library from 1 MiB', () => {
    expect(serviceTargetsFor({ world: 2, bytes: 4096, service: 120, library: 30 })).toEqual([{ what: '<=150us', ok: true, ratio: 0.8 }]);
    expect(serviceTargetsFor({ world: 2, bytes: 8, service: 300 })).toEqual([{ what: '<=150us', ok: false, ratio: 2 }]);
    expect(serviceTargetsFor({ world: 4, bytes: 8, service: 300, library: 100 })).toEqual([]);
    expect(serviceTargetsFor({ world: 2, bytes: 65536, service: 300, library: 100 })).toEqual([]);
    expect(serviceTargetsFor({ world: 4, bytes: 1 << 20, service: 260, library: 200 })).toEqual([{ what: '<=1.3x library', ok: true, ratio: 1.3 }]);
    expect(serviceTargetsFor({ world: 2, bytes: 1 << 23, service: 300, library: 200 })).toEqual([{ what: '<=1.3x library', ok: false, ratio: 1.5 }]);
    expect(serviceTargetsFor({ world: 2, bytes: 1 << 23, library: 200 })).toEqual([]);
  });
});
