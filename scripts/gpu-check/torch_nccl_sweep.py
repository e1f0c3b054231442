#!/usr/bin/env python3
"""GPU check, peer side: the same sweep as nccl-sweep.ts through torch.distributed's nccl backend,
timed with CUDA events and verified, printed in the same nccl-tests-style table.

Usage: python3 scripts/gpu-check/torch_nccl_sweep.py --world N [--min B] [--max B] [--iters 20] [--warmup 5]
"""
import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

OPS = ["allReduce", "broadcast", "reduce", "allGather", "reduceScatter", "sendRecv", "gather", "scatter", "allToAll"]
SPLIT = {"allGather", "reduceScatter", "gather", "scatter", "allToAll"}
REDUCING = {"allReduce", "reduce", "reduceScatter"}
ROOTED = {"broadcast", "reduce", "gather", "scatter"}


def bus_factor(op, n):
    if op == "allReduce":
        return 2 * (n - 1) / n
    if op in SPLIT:
        return (n - 1) / n
    return 1.0


def pattern(rank, n_elems, offset=0):
    # small integers, exact in float32; distinct per rank
    return ((torch.arange(n_elems, dtype=torch.float64) + offset + rank * 7) % 61).to(torch.float32)


def prepare(op, send, recv, rank, root):
    """torch's in-place ops start from the input: copied once, before the op (never timed)."""
    if op in ("allReduce", "reduce") or (op == "broadcast" and rank == root):
        recv.copy_(send)


def run_op(op, send, recv, rank, n, count, root):
    """One call of the collective alone (in place on `recv` where torch has no out-of-place form)."""
    if op == "allReduce":
        dist.all_reduce(recv)
    elif op == "broadcast":
        dist.broadcast(recv, src=root)
    elif op == "reduce":
        dist.reduce(recv, dst=root)
    elif op == "allGather":
        dist.all_gather_into_tensor(recv, send)
    elif op == "reduceScatter":
        dist.reduce_scatter_tensor(recv, send)
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


def expected(op, rank, n, count, root, dev):
    """What `recv` must hold, from every rank's pattern; None where undefined on this rank."""
    ins = [pattern(r, count * (n if op in ("reduceScatter", "scatter", "allToAll") else 1)) for r in range(n)]
    if op == "allReduce":
        return sum(ins).to(dev)
    if op == "reduce":
        return sum(ins).to(dev) if rank == root else None
    if op == "reduceScatter":
        return sum(ins)[rank * count:(rank + 1) * count].to(dev)
    if op == "broadcast":
        return ins[root].to(dev)
    if op == "allGather":
        return torch.cat(ins).to(dev)
    if op == "gather":
        return torch.cat(ins).to(dev) if rank == root else None
    if op == "scatter":
        return ins[root][rank * count:(rank + 1) * count].to(dev)
    if op == "allToAll":
        return torch.cat([x[rank * count:(rank + 1) * count] for x in ins]).to(dev)
    if op == "sendRecv":
        return ins[(rank - 1 + n) % n].to(dev)
    raise ValueError(op)


def worker(rank, n, port, sizes, iters, warmup):
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    init = dict(backend="nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    try:
        dist.init_process_group(**init, device_id=dev)  # torch >= 2.3: eager NCCL init on this GPU
    except TypeError:
        dist.init_process_group(**init)
    root = 0
    failures = 0
    if rank == 0:
        print(f"# torch {torch.__version__} nccl {'.'.join(map(str, torch.cuda.nccl.version()))}, "
              f"device {torch.cuda.get_device_name(0)}; world {n}, float32, warmup {warmup}, iters {iters}", flush=True)
    for op in OPS:
        rows = []
        for size in sizes:
            es = 4
            count = size // es // (n if op in SPLIT else 1)
            if count == 0:
                continue  # as nccl-tests: a size too small to split over n ranks has no row
            one = count
            send_n = one * n if op in ("reduceScatter", "scatter", "allToAll") else one
            recv_n = one * n if op in ("allGather", "gather", "allToAll") else one
            send = pattern(rank, send_n).to(dev)
            recv = torch.full((recv_n,), float("nan"), device=dev)
            prepare(op, send, recv, rank, root)
            run_op(op, send, recv, rank, n, count, root)
            torch.cuda.synchronize()
            exp = expected(op, rank, n, count, root, dev)
            wrong = int((recv != exp).sum().item()) if exp is not None else 0
            wrong_t = torch.tensor([wrong], device=dev)
            dist.all_reduce(wrong_t)
            for _ in range(warmup):
                run_op(op, send, recv, rank, n, count, root)
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            # Line the ranks up (a completed 1-element all-reduce) so the first timed iteration
            # does not absorb the skew between them.
            align = torch.zeros(1, device=dev)
            dist.all_reduce(align)
            torch.cuda.synchronize()
            start.record()
            for _ in range(iters):
                run_op(op, send, recv, rank, n, count, root)
            stop.record()
            torch.cuda.synchronize()
            # The slowest rank's time (rank 0, the root of rooted ops, finishes early).
            sec_t = torch.tensor([start.elapsed_time(stop) / 1e3 / iters], dtype=torch.float64, device=dev)
            dist.all_reduce(sec_t, op=dist.ReduceOp.MAX)
            sec = float(sec_t.item())
            size_b = count * es * (n if op in SPLIT else 1)
            algbw = size_b / sec / 1e9 if sec > 0 else 0.0
            rows.append((size_b, count, sec * 1e6, algbw, algbw * bus_factor(op, n), int(wrong_t.item())))
        if rank == 0:
            print(f"# {op} (torch.distributed nccl, world {n})")
            print("#" + "".join(h.rjust(11 if i == 0 else 12) for i, h in enumerate(
                ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"])))
            print("#" + "".join(h.rjust(11 if i == 0 else 12) for i, h in enumerate(
                ["(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", ""])))
            for size_b, count, us, algbw, busbw, wrong in rows:
                print(" " + "".join([str(size_b).rjust(11), str(count).rjust(12), "float32".rjust(12),
                                     ("sum" if op in REDUCING else "none").rjust(12),
                                     (str(root) if op in ROOTED else "-1").rjust(12), f"{us:.2f}".rjust(12),
                                     f"{algbw:.2f}".rjust(12), f"{busbw:.2f}".rjust(12), str(wrong).rjust(12)]),
                      flush=True)
        failures += sum(1 for r in rows if r[5] > 0)
    dist.destroy_process_group()
    if rank == 0:
        print(f"# torch nccl sweep world {n}: {'all verified' if failures == 0 else f'{failures} sizes wrong'}", flush=True)
    if failures:
        sys.exit(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--min", type=int, default=8)
    p.add_argument("--max", type=int, default=64 << 20)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    if a.warmup < 1:
        p.error("--warmup must be at least 1 (the first iterations set up connections lazily)")
    sizes = []
    s = a.min
    while s <= a.max:
        sizes.append(s)
        s *= 2
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    os.environ.setdefault("NCCL_DEBUG", "WARN")
    mp.spawn(worker, args=(a.world, port, sizes, a.iters, a.warmup), nprocs=a.world, join=True)


if __name__ == "__main__":
    main()
