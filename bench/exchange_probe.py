#!/usr/bin/env python3
"""E15's constant: how much of a link's rate a bsp exchange among hosts gets over TCP
(docs/scaling.md, "Where the links bind"). No PSTrain program runs: one plain Python
process a host plays its shard and its workers, over network-namespace hosts whose links
are shaped as bench/host_layout.py shapes them (tbf both ends, --rate-mbit).

The pattern is PSTrain's bsp exchange with a shard on every host: each of a host's
`--per-host` workers sends every other host's shard `--shard-mb` in 1 MiB chunks on a
connection of its own, in order; a shard sends chunk i back to every remote worker, on a
connection of its own, once chunk i is in from all of them; a host's next iteration
starts once its workers have every chunk back (its own shard's go through memory). A
host's uplink carries 2 x per_host x (hosts - 1) x shard_mb an iteration, and so does its
downlink. Efficiency: that over the link's TCP rate (97.5 % of the tbf rate, as measured
in bench/data/host_layout_200mbit.log), divided by the median period between the slowest
host's ends of iterations (the first iteration left out).

Fully shared links would give 1 (a fluid model of the same flows, each sharing its links
fairly, does). TCP gives less: its flows do not share evenly, a chunk's replies wait for
its slowest push and an iteration for its slowest reply.

usage: python3 bench/exchange_probe.py [--hosts 4] [--per-host 1,2] [--shard-mb 11.8]
           [--rate-mbit 200] [--iters 6] [--rounds 2] [--sysctl KEY=VALUE] [--json OUT]
Needs root (namespaces, tc).
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import queue
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHUNK = 1 << 20
PORT = 5003
TCP_SHARE = 0.975     # TCP's goodput through the tbf (bench/data/host_layout_200mbit.log)


def host_main(me: int, addrs: list[str], per_host: int, shard_bytes: int, iters: int) -> None:
    """One host's shard and workers; prints the times its iterations ended (JSON)."""
    hosts, chunks = len(addrs), max(1, shard_bytes // CHUNK)
    remote = [j for j in range(hosts) if j != me]
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((addrs[me], PORT))
    listener.listen(64)
    inbound: dict[tuple[int, int, int], socket.socket] = {}

    def accept() -> None:
        for _ in range(2 * per_host * (hosts - 1)):
            conn, _ = listener.accept()
            tag = conn.recv(3, socket.MSG_WAITALL)   # kind (0 push, 1 reply), host, worker
            inbound[(tag[0], tag[1], tag[2])] = conn
    acceptor = threading.Thread(target=accept)
    acceptor.start()

    def connect(address: str) -> socket.socket:
        for _ in range(300):
            try:
                return socket.create_connection((address, PORT))
            except OSError:
                time.sleep(0.1)
        raise SystemExit(f"exchange_probe: cannot connect to {address}")
    pushes, replies = {}, {}
    for j in remote:
        for w in range(per_host):
            pushes[(j, w)] = connect(addrs[j])
            pushes[(j, w)].sendall(bytes([0, me, w]))
            replies[(j, w)] = connect(addrs[j])
            replies[(j, w)].sendall(bytes([1, me, w]))
    acceptor.join()
    payload = memoryview(bytearray(CHUNK))
    lock = threading.Lock()
    arrived = [0] * chunks
    ready = {key: queue.Queue() for key in inbound if key[0] == 0}   # replies to send, by pusher
    finished = [0]
    iteration_done = threading.Event()
    go = {key: threading.Event() for key in pushes}

    def read_chunk(conn: socket.socket, buffer: bytearray) -> None:
        if conn.recv_into(buffer, CHUNK, socket.MSG_WAITALL) != CHUNK:
            raise SystemExit("exchange_probe: a peer closed its connection")

    def push_sender(key) -> None:
        for _ in range(iters):
            go[key].wait()
            go[key].clear()
            for _ in range(chunks):
                pushes[key].sendall(payload)

    def push_receiver(key) -> None:
        buffer = bytearray(CHUNK)
        for _ in range(iters):
            for i in range(chunks):
                read_chunk(inbound[key], buffer)
                with lock:
                    arrived[i] += 1
                    if arrived[i] == len(ready):      # chunk i from every remote worker
                        arrived[i] = 0
                        for q in ready.values():
                            q.put(i)

    def reply_sender(key) -> None:
        # the reply connection to pusher `key` is the one that pusher's host accepted from us
        conn = replies[(key[1], key[2])]
        for _ in range(iters * chunks):
            ready[key].get()
            conn.sendall(payload)

    def reply_receiver(key) -> None:
        buffer = bytearray(CHUNK)
        for _ in range(iters):
            for _ in range(chunks):
                read_chunk(inbound[key], buffer)
            with lock:
                finished[0] += 1
                if finished[0] == per_host * (hosts - 1):
                    finished[0] = 0
                    iteration_done.set()
    threads = ([threading.Thread(target=push_sender, args=(k,), daemon=True) for k in pushes]
               + [threading.Thread(target=reply_sender, args=(k,), daemon=True) for k in ready]
               + [threading.Thread(target=push_receiver if k[0] == 0 else reply_receiver,
                                   args=(k,), daemon=True) for k in inbound])
    for t in threads:
        t.start()
    ends = []
    for _ in range(iters):
        for event in go.values():
            event.set()
        if not iteration_done.wait(timeout=300):
            raise SystemExit(f"exchange_probe: host {me} got no iteration's replies in 300 s")
        iteration_done.clear()
        ends.append(time.time())
    # the other hosts may still wait for this shard's last replies: send them before leaving
    for t in threads:
        t.join(timeout=300)
    print(json.dumps({"host": me, "ends": ends}), flush=True)


def measure(hosts: int, per_host: int, shard_bytes: int, rate_mbit: int, iters: int,
            sysctls: list[str]) -> dict:
    sys.path.insert(0, str(ROOT / "tests" / "multihost"))
    sys.path.insert(0, str(ROOT / "bench"))
    import host_layout
    import netns_hosts
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="exchange-probe-"))
    net = netns_hosts.NetnsHosts(tmp, hosts)
    try:
        host_layout.shape(net, rate_mbit)
        host_layout.set_sysctls(net, sysctls)
        addrs = ",".join(net.address(i) for i in range(1, hosts + 1))
        procs = [subprocess.Popen(["ip", "netns", "exec", net.ns(i), sys.executable, __file__,
                                   "--host", str(i - 1), addrs, str(per_host), str(shard_bytes),
                                   str(iters)], stdout=subprocess.PIPE, text=True)
                 for i in range(1, hosts + 1)]
        try:
            outs = [p.communicate(timeout=60 + 30 * iters)[0] for p in procs]
        finally:
            for p in procs:
                p.kill()
        runs = [json.loads(out) for out in outs]
    finally:
        net.close()
        shutil.rmtree(tmp, ignore_errors=True)
    ends = [max(r["ends"][i] for r in runs) for i in range(iters)]
    periods = [b - a for a, b in zip(ends, ends[1:])]
    chunks = max(1, shard_bytes // CHUNK)
    uplink = 2 * per_host * (hosts - 1) * chunks * CHUNK
    ideal = uplink / (rate_mbit * 1e6 / 8 * TCP_SHARE)
    return {"per_host": per_host, "periods_s": [round(x, 3) for x in periods],
            "ideal_s": round(ideal, 3), "efficiency": round(ideal / statistics.median(periods), 3)}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--host":
        me, addrs, per_host, shard_bytes, iters = sys.argv[2:7]
        host_main(int(me), addrs.split(","), int(per_host), int(shard_bytes), int(iters))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--per-host", default="1,2", help="workers a host, one probe each")
    ap.add_argument("--shard-mb", type=float, default=11.8,
                    help="MB a worker pushes to one shard (bench/host_layout.py's MLP: 47.2 "
                         "MB over 4 shards)")
    ap.add_argument("--rate-mbit", type=int, default=200)
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sysctl", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--json", type=pathlib.Path, help="write the results here too")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "multihost"))
    import netns_hosts
    why = netns_hosts.unavailable()
    if why:
        print(f"exchange_probe: {why}", file=sys.stderr)
        return 2
    results = []
    for per_host in (int(x) for x in a.per_host.split(",")):
        rounds = [measure(a.hosts, per_host, int(a.shard_mb * 1e6), a.rate_mbit, a.iters,
                          a.sysctl) for _ in range(a.rounds)]
        entry = {"hosts": a.hosts, "per_host": per_host, "shard_mb": a.shard_mb,
                 "rate_mbit": a.rate_mbit, "sysctl": a.sysctl,
                 "efficiency": statistics.median(r["efficiency"] for r in rounds),
                 "rounds": rounds}
        print(json.dumps(entry), flush=True)
        results.append(entry)
    if a.json:
        a.json.write_text(json.dumps({
            "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            # the hosts' own: a --sysctl's, else the one they inherit from this namespace
            "congestion_control": next(
                (x.split("=", 1)[1] for x in a.sysctl
                 if x.startswith("net.ipv4.tcp_congestion_control=")),
                subprocess.run(["sysctl", "-n", "net.ipv4.tcp_congestion_control"],
                               capture_output=True, text=True).stdout.strip()),
            "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
