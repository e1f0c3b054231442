# Collectives as a service from Python, with the stock NATS client and AES-GCM from `cryptography`
# (pip install nats-py cryptography) and the wire protocol of docs/api.md ("Collectives as a
# service"), nothing of cmesh: the same job as
# service-weight-averaging.ts, and the two can be members of one group. Each copy joins group
# GROUP of SIZE members, takes a local step on its own data, all-reduces the weights with AVG,
# and at the end checks that it holds rank 0's weights (a broadcast).
#
#   NATS_URL=nats://127.0.0.1:4222 SIZE=2 python3 examples/service_weight_averaging.py &
#   NATS_URL=nats://127.0.0.1:4222 SIZE=2 node -r @swc-node/register examples/service-weight-averaging.ts
import asyncio
import base64
import hashlib
import hmac
import json
import os
import sys
import uuid
from array import array

import nats
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

PARAMS = 10_000
STEPS = int(os.environ.get("STEPS", "5"))
P = "cmesh"  # the default cluster's subjects; cluster <c>: cmesh.<c>


def hkdf(secret: bytes, info: bytes) -> bytes:
    """HKDF-SHA256 with no salt, 32 bytes (RFC 5869)."""
    prk = hmac.new(bytes(32), secret, hashlib.sha256).digest()
    return hmac.new(prk, info + b"\x01", hashlib.sha256).digest()


def unseal(key: bytes, sealed: str, group_id: str, rank: int) -> bytes | None:
    """The group's secret G from this member's sealed copy (IV, AES-256-GCM ciphertext and tag), or None."""
    raw = base64.b64decode(sealed or "")
    try:
        return AESGCM(key).decrypt(raw[:12], raw[12:], f"cmesh svc seal\n{group_id}\n{rank}".encode())
    except Exception:
        return None


async def main() -> int:
    password = os.environ.get("NATS_PASSWORD")
    if not password and os.environ.get("NATS_PASSWORD_FILE"):
        password = open(os.environ["NATS_PASSWORD_FILE"]).read().strip()
    nc = await nats.connect(os.environ.get("NATS_URL", "nats://127.0.0.1:4222"), user=os.environ.get("NATS_USER"), password=password)
    name, size, member = os.environ.get("GROUP", "weights"), int(os.environ.get("SIZE", "4")), str(uuid.uuid4())
    enc = lambda o: json.dumps(o).encode()
    # a key only this member knows: the placement carries the group's secret sealed under it
    key = os.urandom(32)

    # 1. subscribe to the placements first, then join; wait for the placement that names us
    placed_sub = await nc.subscribe(f"{P}.svc.placed.{name}")
    join = {"name": name, "size": size, "member": member, "label": f"python-{os.getpid()}", "key": base64.b64encode(key).decode()}
    reply = json.loads((await nc.request(f"{P}.svc.join", enc(join), timeout=10)).data)
    if not reply.get("ok"):
        raise RuntimeError(f"join refused: {reply['error']['message']}")
    while True:
        placed = json.loads((await placed_sub.next_msg(timeout=60)).data)
        if member in placed.get("joined", []):
            raise RuntimeError(placed["error"])
        rank = next((m["rank"] for m in placed["members"] if m["member"] == member), None)
        secret = unseal(key, placed.get("sealed", [])[rank], placed["groupId"], rank) if rank is not None and placed.get("sealed") else None
        if secret:
            break
    await placed_sub.unsubscribe()
    g = f"{P}.svc.g.{placed['groupId']}"
    print(f"rank {rank} of {size}: joined", flush=True)

    # every message of the group carries Cmesh-Mac: HMAC-SHA256 under HKDF(G, "cmesh svc mac") over
    # subject, Cmesh-Seq, Cmesh-Offset (each followed by a newline) and the payload
    mac_key = hkdf(secret, b"cmesh svc mac")
    mac = lambda subject, seq, off, data: hmac.new(mac_key, f"{subject}\n{seq}\n{off}\n".encode() + bytes(data), hashlib.sha256).hexdigest()

    async def pub(subject: str, data: bytes, seq=None, off=None):
        h = {} if seq is None else {"Cmesh-Seq": str(seq), "Cmesh-Offset": str(off)}
        h["Cmesh-Mac"] = mac(subject, "" if seq is None else seq, "" if off is None else off, data)
        await nc.publish(subject, data, headers=h)

    def authentic(m) -> bool:
        h = m.headers or {}
        return hmac.compare_digest(h.get("Cmesh-Mac", ""), mac(m.subject, h.get("Cmesh-Seq", ""), h.get("Cmesh-Offset", ""), m.data))

    # 2. heartbeat every 500 ms (n counts up); wait until every rank's agent says it is ready
    ready, all_ready = set(), asyncio.Event()

    async def on_hb(m):
        if not authentic(m):
            return
        hb = json.loads(m.data)
        if hb["role"] == "agent" and hb.get("ready"):
            ready.add(hb["rank"])
            if len(ready) == size:
                all_ready.set()

    async def beat():
        n = 0
        while True:
            n += 1
            await pub(f"{g}.hb", enc({"rank": rank, "role": "member", "n": n}))
            await asyncio.sleep(0.5)

    await nc.subscribe(f"{g}.hb", cb=on_hb)
    beating = asyncio.create_task(beat())
    await asyncio.wait_for(all_ready.wait(), 60)

    # 3. ops in order: a JSON header, then the data in chunks (headers Cmesh-Seq, Cmesh-Offset);
    #    the result comes back the same way on .res.<rank>
    results: dict[int, dict] = {}
    done: dict[int, asyncio.Future] = {}

    async def on_result(m):
        if not authentic(m):
            return
        seq = m.headers.get("Cmesh-Seq") if m.headers else None
        if seq is None:
            r = json.loads(m.data)
            if not r["ok"]:
                done[r["seq"]].set_exception(RuntimeError(f"{r['error']['name']}: {r['error']['message']}"))
                return
            results[r["seq"]] = {"buf": bytearray(r["bytes"]), "got": 0}
            seq = r["seq"]
        else:
            seq = int(seq)
            res = results[seq]
            off = int(m.headers["Cmesh-Offset"])
            res["buf"][off : off + len(m.data)] = m.data
            res["got"] += len(m.data)
        res = results.get(seq)
        if res is not None and res["got"] == len(res["buf"]) and not done[seq].done():
            done[seq].set_result(bytes(res["buf"]))

    await nc.subscribe(f"{g}.res.{rank}", cb=on_result)
    chunk = nc.max_payload - 1024
    seq = 0

    async def op(header: dict, data: bytes) -> bytes:
        nonlocal seq
        seq += 1
        done[seq] = asyncio.get_running_loop().create_future()
        await pub(f"{g}.op.{rank}", enc({"seq": seq, "timeoutMs": 30_000, "bytes": len(data), **header}))
        for off in range(0, len(data), chunk):
            await pub(f"{g}.op.{rank}", data[off : off + chunk], seq, off)
        return await asyncio.wait_for(done[seq], 35)

    weights = array("f", [1.0]) * PARAMS  # float32, this machine's byte order (little-endian here)
    assert sys.byteorder == "little"
    for step in range(STEPS):
        # a local step on this service's own data: a gradient that differs per rank
        for i in range(PARAMS):
            weights[i] -= 0.01 * ((rank + 1) * ((i % 13) - 6))
        weights = array("f", await op({"op": "allReduce", "dtype": "float32", "count": PARAMS, "redop": "avg"}, weights.tobytes()))
        print(f"rank {rank}: step {step} weights[0..3] = {', '.join(f'{w:.4f}' for w in weights[:4])}", flush=True)

    # everyone must hold rank 0's weights, bit for bit
    reference = await op({"op": "broadcast", "dtype": "float32", "count": PARAMS, "src": 0}, weights.tobytes())
    same = reference == weights.tobytes()
    print(f"rank {rank}: weights identical on all {size} members" if same else f"rank {rank}: weights differ from rank 0's", flush=True)

    # 4. leave: the group ends for everyone (the others' ops up to our last, `seq`, still complete)
    await pub(f"{g}.end", enc({"groupId": placed["groupId"], "reason": "left", "rank": rank, "seq": seq, "who": f'member "python-{os.getpid()}" (rank {rank})'}))
    beating.cancel()
    await nc.drain()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
