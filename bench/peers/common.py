"""Shared by the Gloo and MPI peers: the buffer pattern, expected results, the timing loop and
the control channel to the comparison driver (bench/compare.ts).

Method (identical for every backend, cmesh included): for each iteration the input is reset,
all ranks meet in a barrier, the collective is timed on each rank, and the result is checked
outside the timed region. The driver takes, per iteration, the slowest rank's time and reports
the median over iterations.
"""
import json
import socket
import time

import numpy as np

# Small integers: sums over up to 16 ranks stay exact in float32.
def pattern(rank, start, count):
    idx = np.arange(start, start + count, dtype=np.int64)
    return ((idx * 7 + rank * 3) % 5).astype(np.float32)


def summed(world, start, count):
    out = np.zeros(count, dtype=np.float32)
    for r in range(world):
        out += pattern(r, start, count)
    return out


def shape(op, nbytes, world):
    """(send elements, recv elements, count column, size in bytes) as nccl-tests counts them."""
    total = nbytes // 4
    if op in ("all_reduce", "broadcast", "reduce"):
        return total, total, total, total * 4
    per = total // world
    if op == "all_gather":
        return per, per * world, per, per * world * 4
    if op == "reduce_scatter":
        return per * world, per, per, per * world * 4
    if op == "all_to_all":
        return per * world, per * world, per, per * world * 4
    raise ValueError("unknown op %r" % op)


def buffers(op, rank, world, send_count, recv_count, root):
    """Pristine input, expected output (None where this rank's output is unspecified)."""
    if op == "all_reduce":
        return pattern(rank, 0, send_count), summed(world, 0, send_count)
    if op == "reduce":
        return pattern(rank, 0, send_count), (summed(world, 0, send_count) if rank == root else None)
    if op == "broadcast":
        src = pattern(root, 0, send_count) if rank == root else np.full(send_count, -1, np.float32)
        return src, pattern(root, 0, send_count)
    if op == "all_gather":
        return pattern(rank, 0, send_count), np.concatenate([pattern(r, 0, send_count) for r in range(world)])
    if op == "reduce_scatter":
        return pattern(rank, 0, send_count), summed(world, rank * recv_count, recv_count)
    if op == "all_to_all":
        per = send_count // world
        return pattern(rank, 0, send_count), np.concatenate([pattern(q, rank * per, per) for q in range(world)])
    raise ValueError("unknown op %r" % op)


def run_step(backend, cmd):
    """Runs one size step on this rank; returns {'times': [s...], 'wrong': n, 'count': c, 'bytes': b}."""
    op, world, rank = cmd["op"], backend.world, backend.rank
    root = cmd.get("root", 0)
    send_count, recv_count, count, nbytes = shape(op, cmd["bytes"], world)
    if count == 0:
        return {"times": [], "wrong": 0, "count": 0, "bytes": 0}
    src, expected = buffers(op, rank, world, send_count, recv_count, root)
    step = backend.prepare(op, src, recv_count, root)
    times, wrong = [], 0
    for i in range(cmd["warmup"] + cmd["iters"]):
        step.reset()
        backend.barrier()
        t0 = time.perf_counter()
        step.run()
        t1 = time.perf_counter()
        if i >= cmd["warmup"]:
            times.append(t1 - t0)
            if cmd.get("check", True) and expected is not None:
                wrong = max(wrong, int(np.count_nonzero(step.result() != expected)))
    return {"times": times, "wrong": wrong, "count": count, "bytes": nbytes}


def serve(backend, control):
    """Connects to the driver, says hello, and runs steps until told to quit."""
    host, port = control.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    f = sock.makefile("rw")
    f.write(json.dumps({"hello": backend.name, "rank": backend.rank, "world": backend.world}) + "\n")
    f.flush()
    for line in f:
        cmd = json.loads(line)
        if cmd.get("quit"):
            break
        try:
            reply = run_step(backend, cmd)
        except Exception as e:  # reported to the driver, which marks the cell unsupported
            reply = {"error": "%s: %s" % (type(e).__name__, e)}
        f.write(json.dumps(reply) + "\n")
        f.flush()
    sock.close()


def standalone(backend, ops, sizes, iters, warmup):
    """Without a driver: runs the sweep and prints one nccl-tests-style JSON row per size on rank 0."""
    for op in ops:
        for nbytes in sizes:
            res = run_step(backend, {"op": op, "bytes": nbytes, "iters": iters, "warmup": warmup})
            all_times = backend.gather_object(res["times"])
            wrong = sum(backend.gather_object([res["wrong"]]) or [[0]], [])
            if backend.rank != 0 or res["count"] == 0:
                continue
            slowest = [max(t[i] for t in all_times) for i in range(len(all_times[0]))]
            us = float(np.median(slowest)) * 1e6
            alg = res["bytes"] / (us * 1e3)
            factor = {"all_reduce": 2 * (backend.world - 1) / backend.world, "broadcast": 1.0, "reduce": 1.0}.get(
                op, (backend.world - 1) / backend.world
            )
            print(json.dumps({
                "backend": backend.name, "op": op, "nranks": backend.world, "bytes": res["bytes"],
                "count": res["count"], "type": "float", "redop": "sum" if op in ("all_reduce", "reduce", "reduce_scatter") else "none",
                "root": 0 if op in ("broadcast", "reduce") else -1, "variant": backend.variant(op),
                "timeUs": us, "algBwGBs": alg, "busBwGBs": alg * factor, "wrong": sum(wrong), "iters": len(slowest),
            }), flush=True)
