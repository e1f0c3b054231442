"""Open MPI peer through mpi4py. Launch with mpirun, choosing the transport:
  shared memory: mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 --mca btl self,vader python3 mpi_peer.py
  TCP loopback:  mpirun ... --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo python3 mpi_peer.py
  --control HOST:PORT   serve steps for bench/compare.ts (--name labels the backend)
  otherwise             standalone sweep: --ops all_reduce --min 8 --max 1048576 -n 20 -w 5
"""
import argparse
import os
import sys

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


class Step:
    def __init__(self, src, buf, fn, result):
        self.src, self.buf, self._fn, self._result = src, buf, fn, result

    def reset(self):
        if self.buf is not None:
            np.copyto(self.buf, self.src)

    def run(self):
        self._fn()

    def result(self):
        return self._result()


class Mpi:
    def __init__(self, name):
        self.name = name
        self.comm = MPI.COMM_WORLD
        self.rank, self.world = self.comm.Get_rank(), self.comm.Get_size()

    def barrier(self):
        self.comm.Barrier()

    def gather_object(self, obj):
        return self.comm.gather(obj, root=0)

    @staticmethod
    def variant(op):
        return "in-place" if op in ("all_reduce", "broadcast", "reduce") else "out-of-place"

    def prepare(self, op, src, recv_count, root):
        c, f32 = self.comm, MPI.FLOAT
        if op in ("all_reduce", "broadcast", "reduce"):
            buf = np.empty_like(src)
            if op == "all_reduce":
                fn = lambda: c.Allreduce(MPI.IN_PLACE, [buf, f32], op=MPI.SUM)
            elif op == "broadcast":
                fn = lambda: c.Bcast([buf, f32], root=root)
            elif self.rank == root:
                fn = lambda: c.Reduce(MPI.IN_PLACE, [buf, f32], op=MPI.SUM, root=root)
            else:
                fn = lambda: c.Reduce([buf, f32], None, op=MPI.SUM, root=root)
            return Step(src, buf, fn, lambda: buf)
        out = np.empty(recv_count, dtype=np.float32)
        if op == "all_gather":
            fn = lambda: c.Allgather([src, f32], [out, f32])
        elif op == "reduce_scatter":
            fn = lambda: c.Reduce_scatter_block([src, f32], [out, f32], op=MPI.SUM)
        elif op == "all_to_all":
            fn = lambda: c.Alltoall([src, f32], [out, f32])
        else:
            raise ValueError("unknown op %r" % op)
        return Step(src, None, fn, lambda: out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--control")
    ap.add_argument("--name", default="mpi")
    ap.add_argument("--ops", default="all_reduce")
    ap.add_argument("--min", type=int, default=8)
    ap.add_argument("--max", type=int, default=1 << 20)
    ap.add_argument("-f", type=int, default=2)
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("-w", type=int, default=5)
    a = ap.parse_args()
    b = Mpi(a.name)
    if a.control:
        common.serve(b, a.control)
    else:
        sizes, s = [], a.min
        while s <= a.max:
            sizes.append(s)
            s *= a.f
        common.standalone(b, a.ops.split(","), sizes, a.n, a.w)


if __name__ == "__main__":
    main()
