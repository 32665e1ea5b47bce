#!/usr/bin/env python3
"""E15's constant: how much of a link's rate a bsp exchange among hosts gets over TCP
(docs/scaling.md, "Where the links bind"). No PSTrain program runs: one plain Python
process a host plays its shard and its workers, over network-namespace hosts whose links
are shaped as bench/host_layout.py shapes them (tbf both ends, --rate-mbit).

The pattern is PSTrain's bsp exchange with a shard on every host: each of a host's
`--per-host` workers sends every other host's shard `--shard-mb` (rounded to whole 1 MiB
chunks; the bytes sent are recorded) in order on a connection of its own; a shard sends
chunk i back to every remote worker, on a connection of its own, once chunk i is in from
all of them (--hold-replies: once all its chunks are in); a host's next iteration starts
once its workers have every chunk back (its own shard's go through memory). A host's
uplink carries 2 x per_host x (hosts - 1) x the shard bytes an iteration, and so does its
downlink. The period of an iteration is the time between the slowest host's ends of two
iterations; the first and the last are left out (in the last, the hosts done early send
nothing beside the slowest one's replies). Two efficiencies: those bytes over the median
period, at the link's TCP rate (97.5 % of the tbf rate, measured in
bench/data/host_layout_200mbit.log: `efficiency`, the model's η where β is a TCP rate,
as bench/scaling_predict.py's) and at the tbf rate itself (`efficiency_of_rate`, η where
β is the shaped rate, as bench/host_layout.py --predict takes it).

Links shared fairly give 1: a fluid model of the same flows, each link's rate split evenly
among the connections using it, gives 0.99 (a scratch simulation). TCP gives less: its
flows do not share evenly, a chunk's replies wait for its slowest push and an iteration
for its slowest reply.

usage: python3 bench/exchange_probe.py [--hosts 4] [--per-host 1,2] [--shard-mb 11.8]
           [--rate-mbit 200] [--iters 10] [--rounds 2] [--sysctl KEY=VALUE]
           [--hold-replies] [--json OUT]
Needs root, network namespaces, tc and sshd (tests/multihost/netns_hosts.py).
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
sys.path.insert(0, str(ROOT / "tests" / "multihost"))
sys.path.insert(0, str(ROOT / "bench"))
CHUNK = 1 << 20
PORT = 5003
TCP_SHARE = 0.975     # TCP's goodput through the tbf (bench/data/host_layout_200mbit.log)
WAIT_S = 120          # a host gives up on a peer or an iteration after this long


def host_main(me: int, addrs: list[str], per_host: int, chunks: int, iters: int,
              hold: bool) -> int:
    """One host's shard and workers; prints the times its iterations ended (JSON)."""
    hosts = len(addrs)
    remote = [j for j in range(hosts) if j != me]
    failed: list[str] = []
    broken = threading.Event()

    def fail(why: str) -> None:
        failed.append(why)
        broken.set()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((addrs[me], PORT))
    listener.listen(64)
    listener.settimeout(WAIT_S)
    inbound: dict[tuple[int, int, int], socket.socket] = {}

    def accept() -> None:
        try:
            for _ in range(2 * per_host * (hosts - 1)):
                conn, _ = listener.accept()
                conn.settimeout(None)
                tag = conn.recv(3, socket.MSG_WAITALL)   # kind (0 push, 1 reply), host, worker
                inbound[(tag[0], tag[1], tag[2])] = conn
        except OSError as e:
            fail(f"accepting the other hosts' connections: {e}")
    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    pushes, replies = {}, {}
    sockets = [listener]
    try:
        for j in remote:
            for w in range(per_host):
                for kind, table in ((0, pushes), (1, replies)):
                    for _ in range(int(WAIT_S / 0.1)):
                        try:
                            conn = socket.create_connection((addrs[j], PORT))
                            break
                        except OSError:
                            time.sleep(0.1)
                    else:
                        print(f"exchange_probe: host {me} cannot connect to {addrs[j]}",
                              file=sys.stderr)
                        return 1
                    sockets.append(conn)
                    conn.sendall(bytes([kind, me, w]))
                    table[(j, w)] = conn
        acceptor.join()
        if failed:
            print(f"exchange_probe: host {me}: {failed[0]}", file=sys.stderr)
            return 1
        sockets += inbound.values()
        return exchange(me, per_host, hosts, chunks, iters, hold, pushes, replies, inbound,
                        fail, broken, failed)
    finally:
        for s in sockets:
            s.close()


def exchange(me, per_host, hosts, chunks, iters, hold, pushes, replies, inbound, fail,
             broken, failed) -> int:
    payload = memoryview(bytearray(CHUNK))
    lock = threading.Lock()
    arrived = [0] * chunks
    ready = {key: queue.Queue() for key in inbound if key[0] == 0}   # replies to send, by pusher
    finished = [0]
    iteration_done = threading.Event()
    go = {key: threading.Event() for key in pushes}

    def guarded(body):
        def run(key) -> None:
            try:
                body(key)
            except (OSError, RuntimeError) as e:
                fail(f"{body.__name__} {key}: {e}")
        return run

    def read_chunk(conn: socket.socket, buffer: bytearray) -> None:
        if conn.recv_into(buffer, CHUNK, socket.MSG_WAITALL) != CHUNK:
            raise RuntimeError("a peer closed its connection")

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
                    if arrived[i] < len(ready):        # chunk i not in from every worker
                        continue
                    arrived[i] = 0
                    if not hold:
                        for q in ready.values():
                            q.put(i)
                    elif i == chunks - 1:              # all of them: every reply at once
                        for q in ready.values():
                            for c in range(chunks):
                                q.put(c)

    def reply_sender(key) -> None:
        # the reply connection to pusher `key` is the one this host opened to its host
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
    threads = ([threading.Thread(target=guarded(push_sender), args=(k,), daemon=True)
                for k in pushes]
               + [threading.Thread(target=guarded(reply_sender), args=(k,), daemon=True)
                  for k in ready]
               + [threading.Thread(target=guarded(push_receiver if k[0] == 0 else
                                                  reply_receiver), args=(k,), daemon=True)
                  for k in inbound])
    for t in threads:
        t.start()
    ends = []
    for n in range(iters):
        for event in go.values():
            event.set()
        deadline = time.monotonic() + WAIT_S
        while not iteration_done.wait(timeout=0.5):
            if broken.is_set() or time.monotonic() > deadline:
                why = failed[0] if failed else f"no replies of iteration {n} in {WAIT_S} s"
                print(f"exchange_probe: host {me}: {why}", file=sys.stderr)
                return 1
        iteration_done.clear()
        ends.append(time.time())
    # the other hosts may still wait for this shard's last replies: send them before leaving
    for t in threads:
        t.join(timeout=WAIT_S)
    print(json.dumps({"host": me, "ends": ends}), flush=True)
    return 0


def hosts_congestion_control(net) -> str:
    return subprocess.run(["ip", "netns", "exec", net.ns(1), "sysctl", "-n",
                           "net.ipv4.tcp_congestion_control"], capture_output=True, text=True,
                          timeout=30).stdout.strip()


def measure(hosts: int, per_host: int, chunks: int, rate_mbit: int, iters: int,
            sysctls: list[str], hold: bool) -> dict:
    import host_layout
    import netns_hosts
    uplink = 2 * per_host * (hosts - 1) * chunks * CHUNK
    tcp_rate = rate_mbit * 1e6 / 8 * TCP_SHARE
    ideal = uplink / tcp_rate
    runs = iters + 1                  # the last period is left out (see the docstring)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="exchange-probe-"))
    net = netns_hosts.NetnsHosts(tmp, hosts)
    try:
        host_layout.shape(net, rate_mbit)
        host_layout.set_sysctls(net, sysctls)
        cc = hosts_congestion_control(net)
        addrs = ",".join(net.address(i) for i in range(1, hosts + 1))
        procs = [subprocess.Popen(["ip", "netns", "exec", net.ns(i), sys.executable, __file__,
                                   "--host", str(i - 1), addrs, str(per_host), str(chunks),
                                   str(runs), "1" if hold else "0"],
                                  stdout=subprocess.PIPE, text=True)
                 for i in range(1, hosts + 1)]
        outs = []
        try:
            deadline = time.monotonic() + 2 * WAIT_S + 4 * runs * ideal
            for i, p in enumerate(procs):
                try:
                    out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise SystemExit(f"exchange_probe: host {i} did not finish in time") from None
                if p.returncode != 0:
                    raise SystemExit(f"exchange_probe: host {i} failed (exit {p.returncode})")
                outs.append(json.loads(out))
        finally:
            for p in procs:
                p.kill()
                p.wait()
    finally:
        net.close()
        shutil.rmtree(tmp, ignore_errors=True)
    ends = [max(r["ends"][i] for r in outs) for i in range(runs)]
    periods = [b - a for a, b in zip(ends, ends[1:])][:-1]
    median = statistics.median(periods)
    return {"per_host": per_host, "congestion_control": cc,
            "periods_s": [round(x, 3) for x in periods], "ideal_s": round(ideal, 3),
            "efficiency": round(ideal / median, 3),
            "efficiency_of_rate": round(ideal * TCP_SHARE / median, 3)}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--host":
        me, addrs, per_host, chunks, iters, hold = sys.argv[2:8]
        return host_main(int(me), addrs.split(","), int(per_host), int(chunks), int(iters),
                         hold == "1")
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--per-host", default="1,2", help="workers a host, one probe each")
    ap.add_argument("--shard-mb", type=float, default=11.8,
                    help="MB a worker pushes to one shard (bench/host_layout.py's MLP: 47.2 "
                         "MB over 4 shards), rounded to whole 1 MiB chunks")
    ap.add_argument("--rate-mbit", type=int, default=200)
    ap.add_argument("--iters", type=int, default=10,
                    help="iterations a round: the iters - 1 periods between their ends are "
                         "measured (one more runs, whose period is left out)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sysctl", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--hold-replies", action="store_true",
                    help="a shard replies once all its chunks are in, not chunk by chunk")
    ap.add_argument("--json", type=pathlib.Path, help="write the results here too")
    a = ap.parse_args()
    if a.hosts < 2 or a.iters < 2 or a.rounds < 1 or a.shard_mb <= 0:
        ap.error("--hosts must be >= 2, --iters >= 2, --rounds >= 1, --shard-mb > 0")
    import netns_hosts
    why = netns_hosts.unavailable()
    if why:
        print(f"exchange_probe: {why}", file=sys.stderr)
        return 2
    chunks = max(1, round(a.shard_mb * 1e6 / CHUNK))
    results = []
    for per_host in (int(x) for x in a.per_host.split(",")):
        rounds = [measure(a.hosts, per_host, chunks, a.rate_mbit, a.iters, a.sysctl,
                          a.hold_replies) for _ in range(a.rounds)]
        entry = {"hosts": a.hosts, "per_host": per_host, "shard_bytes": chunks * CHUNK,
                 "rate_mbit": a.rate_mbit, "sysctl": a.sysctl,
                 "congestion_control": rounds[0]["congestion_control"],
                 "hold_replies": a.hold_replies,
                 "efficiency": statistics.median(r["efficiency"] for r in rounds),
                 "efficiency_of_rate": statistics.median(r["efficiency_of_rate"]
                                                         for r in rounds),
                 "rounds": rounds}
        print(json.dumps(entry), flush=True)
        results.append(entry)
    if a.json:
        a.json.write_text(json.dumps({
            "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "tcp_share": TCP_SHARE, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
