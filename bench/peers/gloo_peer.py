"""torch.distributed Gloo peer (Debian's python3-torch; run with /usr/bin/python3).

Env: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (env:// rendezvous).
  --control HOST:PORT   serve steps for bench/compare.ts
  otherwise             standalone sweep: --ops all_reduce,broadcast --min 8 --max 1048576 -n 20 -w 5
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


class Step:
    def __init__(self, src, out, fn, result):
        self.src, self.out, self._fn, self._result = src, out, fn, result

    def reset(self):
        self.out.copy_(self.src) if self.out is not None else None

    def run(self):
        self._fn()

    def result(self):
        return self._result()


class Gloo:
    name = "gloo"

    def __init__(self):
        dist.init_process_group("gloo", init_method="env://")
        self.rank, self.world = dist.get_rank(), dist.get_world_size()

    def barrier(self):
        dist.barrier()

    def gather_object(self, obj):
        out = [None] * self.world
        dist.all_gather_object(out, obj)
        return out if self.rank == 0 else None

    @staticmethod
    def variant(op):
        return "in-place" if op in ("all_reduce", "broadcast", "reduce") else "out-of-place"

    def prepare(self, op, src_np, recv_count, root):
        src = torch.from_numpy(src_np)
        if op in ("all_reduce", "broadcast", "reduce"):
            buf = torch.empty_like(src)
            fn = {
                "all_reduce": lambda: dist.all_reduce(buf),
                "broadcast": lambda: dist.broadcast(buf, src=root),
                "reduce": lambda: dist.reduce(buf, dst=root),
            }[op]
            return Step(src, buf, fn, lambda: buf.numpy())
        if op == "all_gather":
            outs = [torch.empty(src.numel()) for _ in range(self.world)]
            return Step(src, None, lambda: dist.all_gather(outs, src), lambda: torch.cat(outs).numpy())
        if op == "reduce_scatter":
            # torch 1.13's Gloo raises here ("ProcessGroupGloo does not support reduce_scatter");
            # the driver records the cell as unsupported.
            out = torch.empty(recv_count)
            chunks = list(src.chunk(self.world))
            return Step(src, None, lambda: dist.reduce_scatter(out, chunks), lambda: out.numpy())
        if op == "all_to_all":
            out = torch.empty(recv_count)
            return Step(src, None, lambda: dist.all_to_all_single(out, src), lambda: out.numpy())
        raise ValueError("unknown op %r" % op)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--control")
    ap.add_argument("--ops", default="all_reduce")
    ap.add_argument("--min", type=int, default=8)
    ap.add_argument("--max", type=int, default=1 << 20)
    ap.add_argument("-f", type=int, default=2)
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("-w", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(1)
    b = Gloo()
    if a.control:
        common.serve(b, a.control)
    else:
        sizes, s = [], a.min
        while s <= a.max:
            sizes.append(s)
            s *= a.f
        common.standalone(b, a.ops.split(","), sizes, a.n, a.w)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
