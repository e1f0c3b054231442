#!/usr/bin/env python3
"""GPU check, peer side: the same sweep as nccl-sweep.ts through torch.distributed's nccl backend,
every dtype, out of place and in place where torch has the form (nccl-tests' two column groups:
all_reduce, broadcast and reduce exist in place only; all_gather_into_tensor and
reduce_scatter_tensor both ways; send/recv, gather, scatter and all_to_all out of place only),
verified, timed with CUDA events around the iterations (one synchronisation after them), printed
in the nccl-tests table, optionally written as JSON rows (--json) for scripts/gpu-check/compare.ts.

One node:  python3 scripts/gpu-check/torch_nccl_sweep.py --world N
Two nodes (torchrun's flags; ranks node_rank * nproc_per_node + local rank, NCCL over
NCCL_SOCKET_IFNAME / IB as NCCL chooses):
  python3 scripts/gpu-check/torch_nccl_sweep.py --nnodes 2 --node-rank R --nproc-per-node G \\
      --master-addr HOST0 --master-port 29533
Options: --min B --max B --iters 20 --warmup 5 --dtype all|float32,... --ops allReduce,... --check-max B
  --cpu: the same steps and checks over gloo on the CPU, host-timed (a dry run without a GPU); where
    gloo lacks a form or dtype (torch 1.13), the step goes through what it has, said at the start
"""
import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

OPS = ["allReduce", "broadcast", "reduce", "allGather", "reduceScatter", "allToAll", "gather", "scatter", "sendRecv"]
NAMES = {"allReduce": "all_reduce", "broadcast": "broadcast", "reduce": "reduce", "allGather": "all_gather",
         "reduceScatter": "reduce_scatter", "allToAll": "all_to_all", "gather": "gather", "scatter": "scatter",
         "sendRecv": "sendrecv"}
SPLIT = {"allGather", "reduceScatter", "gather", "scatter", "allToAll"}
REDUCING = {"allReduce", "reduce", "reduceScatter"}
ROOTED = {"broadcast", "reduce", "gather", "scatter"}
# which forms torch has: the op's only call works in place for the first three
MODES = {"allReduce": ["in-place"], "broadcast": ["in-place"], "reduce": ["in-place"],
         "allGather": ["out-of-place", "in-place"], "reduceScatter": ["out-of-place", "in-place"],
         "allToAll": ["out-of-place"], "gather": ["out-of-place"], "scatter": ["out-of-place"],
         "sendRecv": ["out-of-place"]}
# cmesh's dtype names (the same order as its sweep), torch's dtype, nccl-tests' name, the largest
# value a sum over the ranks may reach and stay exact
DTYPES = {
    "float32": (torch.float32, "float", 1 << 24), "float64": (torch.float64, "double", 1 << 53),
    "int8": (torch.int8, "int8", 127), "uint8": (torch.uint8, "uint8", 255), "int32": (torch.int32, "int32", 1 << 31),
    "int64": (torch.int64, "int64", 1 << 62), "float16": (torch.float16, "half", 2048),
    "bfloat16": (torch.bfloat16, "bfloat16", 256),
}
IN_COUNT_ALL = {"reduceScatter", "scatter", "allToAll"}  # the input holds one block per rank
OUT_COUNT_ALL = {"allGather", "gather", "allToAll"}  # the output holds one block per rank


def bus_factor(op, n):
    if op == "allReduce":
        return 2 * (n - 1) / n
    if op in SPLIT:
        return (n - 1) / n
    return 1.0


def pattern(dtype, rank, n_elems, n, dev):
    """Small integers, distinct per rank, whose sum over n ranks stays exact in the dtype."""
    tdt, _, limit = DTYPES[dtype]
    m = max(2, min(61, limit // max(n, 1)))
    return ((torch.arange(n_elems, dtype=torch.int64, device=dev) + rank * 7) % m).to(tdt)


# What the backend lacks, probed once (--cpu only) the same way on every rank: torch 1.13's gloo has
# neither all_gather_into_tensor nor reduce_scatter_tensor (nor a list form of reduce_scatter), and
# no bfloat16. The steps then go through what it has, said at the start: all_gather into the
# output's blocks, a reduce of each block to its rank, and bfloat16 carried as float32 for sums
# (the patterns' sums are exact in both) and as a float16 view for copies (gloo has no int16; a
# copy moves the bits unchanged). Layouts, patterns and checks stay the same.
LACKS = set()
WORKAROUNDS = {"all_gather_into_tensor": "all_gather into the output's blocks",
               "reduce_scatter_tensor": "a reduce of each block to its rank",
               "bfloat16": "bfloat16 carried as float32 (sums) and as a float16 view (copies move bits)"}


def probe(n, dev):
    one, every = lambda: torch.zeros(1, device=dev), lambda: torch.zeros(n, device=dev)
    tries = {
        "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(every(), one()),
        "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(one(), every()),
        "bfloat16": lambda: dist.all_reduce(torch.zeros(1, dtype=torch.bfloat16, device=dev)),
    }
    for name, call in tries.items():
        try:
            call()
        except (RuntimeError, AttributeError):
            LACKS.add(name)


def all_gather_into_tensor(out, inp):
    if "all_gather_into_tensor" in LACKS:
        dist.all_gather(list(out.split(inp.numel())), inp)  # gloo reads the input before writing the blocks
    else:
        dist.all_gather_into_tensor(out, inp)


def reduce_scatter_tensor(out, inp, rank):
    if "reduce_scatter_tensor" in LACKS:
        blocks = [b.clone() for b in inp.split(out.numel())]  # in place, `out` is one of the input's blocks
        for r, b in enumerate(blocks):
            dist.reduce(b, dst=r)
        out.copy_(blocks[rank])
    else:
        dist.reduce_scatter_tensor(out, inp)


def run_op(op, mode, send, recv, rank, n, count, root):
    """One call of the collective. In place, `recv` is the only buffer (as nccl-tests lays it out)."""
    if recv.dtype == torch.bfloat16 and "bfloat16" in LACKS:
        if op in REDUCING:
            wide = recv.float()
            run_op(op, mode, None if send is None else send.float(), wide, rank, n, count, root)
            recv.copy_(wide)
            return
        send, recv = None if send is None else send.view(torch.float16), recv.view(torch.float16)
    if op == "allReduce":
        dist.all_reduce(recv)
    elif op == "broadcast":
        dist.broadcast(recv, src=root)
    elif op == "reduce":
        dist.reduce(recv, dst=root)
    elif op == "allGather":
        all_gather_into_tensor(recv, recv[rank * count:(rank + 1) * count] if mode == "in-place" else send)
    elif op == "reduceScatter":
        # in place, the output is this rank's block of the input
        if mode == "in-place":
            reduce_scatter_tensor(recv[rank * count:(rank + 1) * count], recv, rank)
        else:
            reduce_scatter_tensor(recv, send, rank)
    elif op == "sendRecv":
        ops = [dist.P2POp(dist.isend, send, (rank + 1) % n), dist.P2POp(dist.irecv, recv, (rank - 1 + n) % n)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
    elif op == "gather":
        dist.gather(send, list(recv.split(count)) if rank == root else None, dst=root)
    elif op == "scatter":
        dist.scatter(recv, list(send.split(count)) if rank == root else None, src=root)
    elif op == "allToAll":
        dist.all_to_all_single(recv, send)


def expected(op, dtype, rank, n, count, root, dev):
    """What the output must hold, from every rank's pattern; None where undefined on this rank."""
    ins = [pattern(dtype, r, count * (n if op in IN_COUNT_ALL else 1), n, dev).to(torch.float64) for r in range(n)]
    tdt = DTYPES[dtype][0]
    out = None
    if op == "allReduce" or (op == "reduce" and rank == root):
        out = sum(ins)
    elif op == "reduceScatter":
        out = sum(ins)[rank * count:(rank + 1) * count]
    elif op == "broadcast":
        out = ins[root]
    elif op == "allGather" or (op == "gather" and rank == root):
        out = torch.cat(ins)
    elif op == "scatter":
        out = ins[root][rank * count:(rank + 1) * count]
    elif op == "allToAll":
        out = torch.cat([x[rank * count:(rank + 1) * count] for x in ins])
    elif op == "sendRecv":
        out = ins[(rank - 1 + n) % n]
    return None if out is None else out.to(tdt)


def step(op, dtype, mode, size, rank, n, root, dev, iters, warmup, check_max):
    """One size in one mode: checked once (up to check_max bytes), then timed. None where the size is
    below one element per rank."""
    tdt = DTYPES[dtype][0]
    es = torch.tensor([], dtype=tdt).element_size()
    count = size // es // (n if op in SPLIT else 1)
    if count == 0:
        return None
    send_n = count * (n if op in IN_COUNT_ALL else 1)
    recv_n = count * (n if op in OUT_COUNT_ALL else 1)
    mine = pattern(dtype, rank, send_n, n, dev)
    if mode == "in-place":
        buf = torch.full((max(send_n, recv_n),), 0, dtype=tdt, device=dev)
        if op == "allGather":
            buf[rank * count:(rank + 1) * count] = mine
        else:
            buf[:send_n] = mine
        send, recv = None, buf
    else:
        send, recv = mine, torch.zeros((recv_n,), dtype=tdt, device=dev)
    run_op(op, mode, send, recv, rank, n, count, root)
    sync(dev)
    size_b = count * es * (n if op in SPLIT else 1)
    checked = size_b <= check_max
    exp = expected(op, dtype, rank, n, count, root, dev) if checked else None
    out = recv[rank * count:(rank + 1) * count] if (mode == "in-place" and op == "reduceScatter") else recv[:recv_n]
    wrong = int((out != exp).sum().item()) if exp is not None else 0
    wrong_t = torch.tensor([wrong], device=dev)
    dist.all_reduce(wrong_t)
    del exp
    for _ in range(warmup):
        run_op(op, mode, send, recv, rank, n, count, root)
    timer = Timer(dev)
    # Line the ranks up (a completed 1-element all-reduce) so the first timed iteration does not
    # absorb the skew between them; then no host wait until the last launch is queued.
    align = torch.zeros(1, device=dev)
    dist.all_reduce(align)
    sync(dev)
    timer.start()
    for _ in range(iters):
        run_op(op, mode, send, recv, rank, n, count, root)
    seconds = timer.stop()
    # The slowest rank's time (rank 0, the root of rooted ops, finishes early).
    sec_t = torch.tensor([seconds / iters], dtype=torch.float64, device=dev)
    dist.all_reduce(sec_t, op=dist.ReduceOp.MAX)
    sec = float(sec_t.item())
    algbw = size_b / sec / 1e9 if sec > 0 else 0.0
    return {"bytes": size_b, "count": count, "m": {"timeUs": sec * 1e6, "algBwGBs": algbw,
                                                  "busBwGBs": algbw * bus_factor(op, n),
                                                  "wrong": int(wrong_t.item()) if checked else None, "iters": iters}}


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


class Timer:
    """CUDA events around the launches on a GPU (no host wait between them); the host clock on the CPU."""

    def __init__(self, dev):
        self.cuda = dev.type == "cuda"
        if self.cuda:
            self.a, self.b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def start(self):
        if self.cuda:
            self.a.record()
        else:
            self.t0 = time.perf_counter()

    def stop(self):
        if self.cuda:
            self.b.record()
            torch.cuda.synchronize()
            return self.a.elapsed_time(self.b) / 1e3
        return time.perf_counter() - self.t0


def fmt_time(us):
    return f"{us:.0f}" if us >= 10000 else f"{us:.1f}" if us >= 100 else f"{us:.2f}"


def fmt_variant(m):
    if m is None:
        return "  " + "N/A".rjust(7) + "  " + "N/A".rjust(6) + "  " + "N/A".rjust(6) + "  " + "N/A".rjust(6)
    return ("  " + fmt_time(m["timeUs"]).rjust(7) + "  " + f"{m['algBwGBs']:.2f}".rjust(6) + "  " +
            f"{m['busBwGBs']:.2f}".rjust(6) + "  " + ("N/A" if m["wrong"] is None else str(m["wrong"])).rjust(6))


def header():
    fixed = "#" + "size".rjust(11) + "  " + "count".rjust(12) + "  " + "type".rjust(8) + "  " + "redop".rjust(6) + "  " + "root".rjust(6)
    var = lambda a, b, c, d: "  " + a.rjust(7) + "  " + b.rjust(6) + "  " + c.rjust(6) + "  " + d.rjust(6)
    span = len(var("", "", "", ""))
    title = " " * len(fixed)
    centre = lambda t: t.rjust((span + len(t)) // 2).ljust(span)
    return ["#", ("#" + (title + centre("out-of-place") + centre("in-place"))[1:]).rstrip(),
            fixed + var("time", "algbw", "busbw", "#wrong") + var("time", "algbw", "busbw", "#wrong"),
            ("#" + "(B)".rjust(11) + "  " + "(elements)".rjust(12) + "  " + "".rjust(8) + "  " + "".rjust(6) + "  " +
             "".rjust(6) + var("(us)", "(GB/s)", "(GB/s)", "") + var("(us)", "(GB/s)", "(GB/s)", "")).rstrip()]


def fmt_row(r):
    return (" " + str(r["bytes"]).rjust(11) + "  " + str(r["count"]).rjust(12) + "  " + DTYPES[r["type"]][1].rjust(8) +
            "  " + r["redop"].rjust(6) + "  " + str(r["root"]).rjust(6) +
            fmt_variant(r["outOfPlace"]) + fmt_variant(r["inPlace"]))


def worker(local_rank, a, sizes):
    n = a.nnodes * a.nproc_per_node
    rank = a.node_rank * a.nproc_per_node + local_rank
    init = dict(init_method=f"tcp://{a.master_addr}:{a.master_port}", rank=rank, world_size=n)
    if a.cpu:
        dev = torch.device("cpu")
        dist.init_process_group(backend="gloo", **init)
    else:
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
        try:
            dist.init_process_group(backend="nccl", **init, device_id=dev)  # torch >= 2.3: eager NCCL init on this GPU
        except TypeError:
            dist.init_process_group(backend="nccl", **init)
    if a.cpu:
        probe(n, dev)
    root = 0
    failures = 0
    dtypes = list(DTYPES) if a.dtype == "all" else a.dtype.split(",")
    ops = OPS if not a.ops else a.ops.split(",")
    if rank == 0:
        lib = "gloo on the CPU (a dry run: the figures mean nothing)" if a.cpu else \
            f"nccl {'.'.join(map(str, torch.cuda.nccl.version()))}, device {torch.cuda.get_device_name(local_rank)}"
        print(f"# torch {torch.__version__} {lib}; world {n} ({a.nnodes} node(s)), "
              f"types {','.join(DTYPES[d][1] for d in dtypes)}, warmup {a.warmup}, iters {a.iters}", flush=True)
        if LACKS:
            print(f"# this torch's {'gloo' if a.cpu else 'nccl'} lacks {', '.join(sorted(LACKS))}: "
                  f"{'; '.join(WORKAROUNDS[k] for k in sorted(LACKS))}", flush=True)
    every = []
    refused = set()
    for op in ops:
        rows = []
        for dtype in dtypes:
            for size in sizes:
                line = None
                for mode in MODES[op]:
                    if (op, dtype, mode) in refused:
                        continue
                    try:
                        s = step(op, dtype, mode, size, rank, n, root, dev, a.iters, a.warmup, a.check_max)
                    except (RuntimeError, ValueError) as e:
                        if mode == "out-of-place":
                            raise
                        # a torch that refuses this in-place form (checked before any launch, the
                        # same on every rank): its column stays N/A, said once
                        refused.add((op, dtype, mode))
                        if rank == 0:
                            print(f"# torch refuses {NAMES[op]} {dtype} in place: {str(e).splitlines()[0]}", flush=True)
                        continue
                    if s is None:
                        continue
                    if line is None:
                        line = {"backend": "torch-nccl", "op": op, "nranks": n, "bytes": s["bytes"], "count": s["count"],
                                "type": dtype, "redop": "sum" if op in REDUCING else "none",
                                "root": root if op in ROOTED else -1, "outOfPlace": None, "inPlace": None}
                    line["inPlace" if mode == "in-place" else "outOfPlace"] = s["m"]
                    failures += 1 if (s["m"]["wrong"] or 0) > 0 else 0
                if line is not None:
                    rows.append(line)
        if rank == 0:
            print(f"# {NAMES[op]} (torch.distributed {'gloo' if a.cpu else 'nccl'}, world {n})")
            print("\n".join(header() + [fmt_row(r) for r in rows]), flush=True)
        every.extend(rows)
    dist.destroy_process_group()
    if rank == 0:
        if a.json:
            with open(a.json, "w") as f:
                json.dump(every, f)
        print(f"# torch nccl sweep world {n}: {'all verified' if failures == 0 else f'{failures} steps wrong'}", flush=True)
    if failures:
        sys.exit(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=None, help="one node: ranks (GPUs); same as --nproc-per-node")
    p.add_argument("--nproc-per-node", type=int, default=None)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=0)
    p.add_argument("--min", type=int, default=8)
    p.add_argument("--max", type=int, default=64 << 20)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--check-max", type=int, default=1 << 62, help="check sizes up to this many bytes; larger ones are timed only")
    p.add_argument("--dtype", default="all", help="all (every dtype torch's nccl has) or a comma list of cmesh's names")
    p.add_argument("--ops", default="", help="comma list of cmesh's op names (default: all)")
    p.add_argument("--json", default="", help="write the rows (cmesh's BenchRow shape) to this file")
    p.add_argument("--cpu", action="store_true", help="gloo on the CPU, host-timed: a dry run of the script's steps and checks without a GPU")
    a = p.parse_args()
    a.nproc_per_node = a.nproc_per_node or a.world or 1
    if a.warmup < 1:
        p.error("--warmup must be at least 1 (the first iterations set up connections lazily)")
    bad = [d for d in ([] if a.dtype == "all" else a.dtype.split(",")) if d not in DTYPES]
    if bad:
        p.error(f"unknown dtype(s) {bad}; known: {list(DTYPES)}")
    if a.nnodes > 1 and (a.master_port == 0 or a.master_addr in ("127.0.0.1", "localhost")):
        p.error("two nodes need --master-addr (node 0's address the other node reaches) and --master-port")
    if a.master_port == 0:
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            a.master_port = sk.getsockname()[1]
    sizes = []
    s = a.min
    while s <= a.max:
        sizes.append(s)
        s *= 2
    os.environ.setdefault("NCCL_DEBUG", "WARN")
    mp.spawn(worker, args=(a, sizes), nprocs=a.nproc_per_node, join=True)


if __name__ == "__main__":
    main()
