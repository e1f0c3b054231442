"""torch's TCPStore (torch.distributed, c10d) for bench/store/store-scale.ts, run with /usr/bin/python3.

  torch_store.py server                       hosts TCPStore(is_master=True, wait_for_workers=False)
  torch_store.py clients HOST PORT FIRST COUNT TOTAL [--setter]
                                              COUNT TCPStore(is_master=False) objects in this process

Speaks the driver's line protocol on stdin/stdout (one JSON object a line): the driver writes a
phase name, the clients answer when every one of them has finished it. A torch client's calls
block, so each client gets its own thread; times are wall-clock milliseconds (time.time()), read
next to each call, so the driver can take the first start and the last end over all processes.
"""
import datetime
import gc
import json
import sys
import threading
import time

import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=300)


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def now_ms():
    return time.time() * 1000.0


def server():
    store = dist.TCPStore("127.0.0.1", 0, None, True, TIMEOUT, wait_for_workers=False)
    say({"port": store.port})
    for line in sys.stdin:  # serves until the driver closes stdin
        if line.strip() == "gc":
            gc.collect()
            say({"gc": True})
    del store


class Phase:
    """One step every client thread runs once; the last one to finish reports the span."""

    def __init__(self, name, count):
        self.name = name
        self.go = threading.Event()
        self.lock = threading.Lock()
        self.left = count
        self.first = float("inf")
        self.last = 0.0
        self.results = []
        self.errors = []

    def done(self, start, end, result=None, error=None):
        with self.lock:
            self.first = min(self.first, start)
            self.last = max(self.last, end)
            if result is not None:
                self.results.append(result)
            if error is not None:
                self.errors.append(error)
            self.left -= 1
            finished = self.left == 0
        if finished:
            say({"phase": self.name, "first": self.first, "last": self.last, "results": self.results, "errors": self.errors[:5], "failed": len(self.errors)})


def clients(host, port, first, count, total, setter):
    threading.stack_size(256 * 1024)
    names = ["connect", "set", "barrier", "wait"]
    phases = {n: Phase(n, count) for n in names}
    issued = Phase("wait-issued", count)
    stores = [None] * count

    def run(i):
        rank = first + i
        p = phases["connect"]
        p.go.wait()
        s = now_ms()
        try:
            stores[i] = dist.TCPStore(host, port, None, False, TIMEOUT, wait_for_workers=False)
            p.done(s, now_ms())
        except Exception as e:  # noqa: BLE001 - reported to the driver, the phase goes on
            p.done(s, now_ms(), error=str(e))
            return
        store = stores[i]
        p = phases["set"]
        p.go.wait()
        s = now_ms()
        try:
            # every client publishes its key and reads its neighbour's, as ranks exchange addresses
            store.set(f"rank/{rank}", str(rank))
            got = store.get(f"rank/{(rank + 1) % total}").decode()
            p.done(s, now_ms(), error=None if got == str((rank + 1) % total) else f"rank {rank} read {got}")
        except Exception as e:  # noqa: BLE001
            p.done(s, now_ms(), error=str(e))
        p = phases["barrier"]
        p.go.wait()
        s = now_ms()
        try:
            v = store.add("barrier", 1)
            if v == total:
                store.set("barrier/done", "1")
            store.wait(["barrier/done"])
            p.done(s, now_ms(), result=v)
        except Exception as e:  # noqa: BLE001
            p.done(s, now_ms(), error=str(e))
        p = phases["wait"]
        p.go.wait()
        s = now_ms()
        issued.done(s, s)
        try:
            store.wait(["release"])
            p.done(s, now_ms())
        except Exception as e:  # noqa: BLE001
            p.done(s, now_ms(), error=str(e))

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    extra = dist.TCPStore(host, port, None, False, TIMEOUT, wait_for_workers=False) if setter else None
    say({"ready": True})
    for line in sys.stdin:
        cmd = line.strip()
        if cmd in phases:
            phases[cmd].go.set()
        elif cmd == "release" and extra is not None:
            s = now_ms()
            extra.set("release", "1")
            say({"phase": "release", "at": s})
        elif cmd == "close":
            break
    del stores[:]
    say({"phase": "closed"})


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server()
    else:
        host, port, first, count, total = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
        clients(host, port, first, count, total, "--setter" in sys.argv)
