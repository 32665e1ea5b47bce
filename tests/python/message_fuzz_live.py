"""Fuzzed messages against a live ps-server on 127.0.0.1 (real process, real
ZeroMQ), checked against an undisturbed run of the same session.

A worker (one DEALER) trains a two-parameter net for STEPS bsp steps: HELLO,
INIT_PUSH, then PULL / PUSH per step, then a final PULL of the weights. A
second DEALER, the stranger, sends COUNT fuzzed messages in between:
random frames, truncations and bit flips of valid messages, payloads of the
wrong length, chunk lists that do not match the shard, clocks out of range,
another job's key. Mutations that would make a well-formed, correctly keyed
message that changes state (PUSH, INIT_PUSH, SHUTDOWN, HELLO, NORM_*) are
re-drawn: a peer holding the job key is authenticated, which is CURVE's
concern, not the decoder's. Afterwards:
  - the server is alive and answers STATS; bad_messages >= what was sent
    (each fuzzed message is either dropped on arrival or refused);
  - the final weights are bit-identical to the undisturbed run's;
  - VmRSS (/proc/<pid>/status) grew by at most RSS_BOUND_MB over the whole run, and
    its anonymous memory (RssAnon: the heap, where a leak lands) by at most
    RSS_STEADY_BOUND_MB after the warm-up (the first WARM_UP_STEPS of the STEPS
    batches of messages: allocator arenas and ZeroMQ's buffers grow there; the
    stranger waits for the server every SYNC_EVERY messages, so that its queue
    is as deep in every step). 20,000 messages leave 15,000 after
    the warm-up: a leak of 1 KB a message would add 15 MB there, where runs
    without one grow by 0-0.5 MB (a million: 1 MB);
  - the server's log grew by at most LOG_BOUND_BYTES.

    python3 tests/python/message_fuzz_live.py --messages 1000000   # the full run
pytest runs it with 20,000 messages (test_message_fuzz_live.py).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import random
import re
import struct
import subprocess
import sys
import tempfile
import time

import zmq

from pb_wire import field_bytes, field_varint, parse, varint  # noqa: F401

ROOT = pathlib.Path(__file__).resolve().parents[2]

# pstrain.Header fields (proto/pstrain.proto).
HELLO, HELLO_ACK, INIT_PUSH, INIT_ACK, PULL, PULL_REPLY, PUSH, PUSH_ACK = 1, 2, 3, 4, 5, 6, 7, 8
SHUTDOWN, HEARTBEAT, ERROR, NORM_PARTIAL, NORM_TOTAL, STATS = 11, 12, 13, 14, 15, 16
GATE, GATE_ACK = 17, 18
WORKER, SERVER, CONTROL = 1, 2, 3
STATE_CHANGING = {HELLO, INIT_PUSH, PUSH, SHUTDOWN, NORM_PARTIAL, NORM_TOTAL}

CHUNK_BYTES = 16                  # w (6 values) -> chunks 0: w[0,4), 1: w[4,6); b (2) -> chunk 2
CHUNKS = [(0, 4), (1, 2), (2, 2)]  # (id, length)
INITIAL = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.5, -0.5]
STEPS = 8
RSS_BOUND_MB = 8
WARM_UP_STEPS = 2
RSS_STEADY_BOUND_MB = 4
# The stranger waits for the server every SYNC_EVERY messages: what waits in the server's
# ZeroMQ queue (and the heap it leaves behind) stays the same from step to step.
SYNC_EVERY = 500
LOG_BOUND_BYTES = 256 * 1024


def header(type_: int, *, key: int, sender: int = 0, role: int = WORKER, clock: int | None = None,
           chunks: list[tuple[int, int]] = (), world_size: int | None = None,
           params: list[tuple[str, list[int]]] = (), sum_squares: float | None = None) -> bytes:
    out = field_varint(1, type_) + field_varint(2, role) + field_varint(3, sender)
    if clock is not None:
        out += field_varint(4, clock)
    for cid, length in chunks:
        out += field_bytes(6, field_varint(1, cid) + field_varint(2, length))
    for name, shape in params:
        out += field_bytes(10, field_bytes(1, name.encode()) +
                           b"".join(field_varint(2, d) for d in shape))
    if world_size is not None:
        out += field_varint(11, world_size)
    if sum_squares is not None:
        out += varint(12 << 3 | 1) + struct.pack("<d", sum_squares)
    return out + field_varint(14, key)


def floats(values: list[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def gradient(t: int, i: int) -> float:
    return 0.25 - 0.125 * i + 0.5 * t


class Stranger:
    """Draws fuzzed messages from valid ones of this job (seeded)."""

    def __init__(self, key: int, seed: int):
        self.key = key
        self.rng = random.Random(seed)
        self.kinds = 0

    def valid(self, t: int) -> list[bytes]:
        r = self.rng
        kind = r.choice([HELLO, INIT_PUSH, PULL, PUSH, STATS, HEARTBEAT, SHUTDOWN, NORM_PARTIAL])
        sender = r.choice([0, 0, 1, -1])
        if kind == INIT_PUSH:
            h = header(kind, key=self.key, chunks=CHUNKS, params=[("w", [2, 3]), ("b", [2])])
            return [h] + [floats([9.0] * length) for _, length in CHUNKS]
        if kind == PUSH:
            h = header(kind, key=self.key, sender=sender, clock=t, chunks=CHUNKS, sum_squares=1.0)
            return [h] + [floats([7.0] * length) for _, length in CHUNKS]
        if kind == HELLO:
            return [header(kind, key=self.key, sender=sender, world_size=1)]
        if kind == NORM_PARTIAL:
            return [header(kind, key=self.key, role=SERVER, clock=t, sum_squares=4.0)]
        return [header(kind, key=self.key, sender=sender, clock=t)]

    def invalid_by_construction(self, t: int) -> list[bytes]:
        """Correctly keyed messages the validator must refuse, each for its reason."""
        r = self.rng
        case = r.randrange(7)
        if case == 0:  # a payload of the wrong length
            frames = [header(PUSH, key=self.key, clock=t, chunks=CHUNKS)]
            frames += [floats([7.0] * length) for _, length in CHUNKS]
            k = r.randrange(1, 4)
            frames[k] = frames[k][:-r.randint(1, 4)] if r.random() < 0.5 else frames[k] + b"\0" * r.randint(1, 5)
            return frames
        if case == 1:  # one payload frame too few or too many
            frames = [header(PUSH, key=self.key, clock=t, chunks=CHUNKS)]
            frames += [floats([7.0] * length) for _, length in CHUNKS]
            return frames[:-1] if r.random() < 0.5 else frames + [floats([7.0])]
        if case == 2:  # a chunk that does not exist, or twice
            chunks = [(r.choice([3, 17, 2 ** 32 - 1]), 2)] if r.random() < 0.5 else [(0, 4), (0, 4)]
            h = header(PUSH, key=self.key, clock=t, chunks=chunks)
            return [h] + [floats([7.0] * length) for _, length in chunks]
        if case == 3:  # the header's length differs from the chunk's
            h = header(PUSH, key=self.key, clock=t, chunks=[(0, 5)])
            return [h, floats([7.0] * 5)]
        if case == 4:  # a worker that is not in this job
            h = header(PUSH, key=self.key, sender=r.choice([1, 5, -3, 2 ** 31 - 1]), clock=t,
                       chunks=CHUNKS)
            return [h] + [floats([7.0] * length) for _, length in CHUNKS]
        if case == 5:  # a kind a server does not accept, or from the wrong role
            return [header(r.choice([HELLO_ACK, PULL_REPLY, PUSH_ACK, ERROR, GATE_ACK, 99]),
                           key=self.key)] \
                if r.random() < 0.5 else [header(PUSH, key=self.key, role=CONTROL, clock=t)]
        # another job's key (many bits away from this one)
        h = header(SHUTDOWN, key=self.key ^ 0x5A5A5A5A5A5A5A5A)
        return [h]

    def mutate(self, frames: list[bytes]) -> list[bytes]:
        r = self.rng
        frames = list(frames)
        how = r.randrange(3)
        k = r.randrange(len(frames))
        if how == 0 and frames[k]:  # truncation
            frames[k] = frames[k][:r.randrange(len(frames[k]))]
        elif how == 1 and frames[k]:  # bit flips
            data = bytearray(frames[k])
            for _ in range(r.randint(1, 4)):
                data[r.randrange(len(data))] ^= 1 << r.randrange(8)
            frames[k] = bytes(data)
        else:  # drop, duplicate or insert a frame
            op = r.randrange(3)
            if op == 0 and len(frames) > 1:
                del frames[k]
            elif op == 1:
                frames.insert(k, frames[k])
            else:
                frames.insert(k, r.randbytes(r.randrange(64)))
        return frames

    def harmless(self, frames: list[bytes]) -> bool:
        """False when frame 0 might be a correctly keyed, state-changing header."""
        if not frames:
            return True
        fields = parse(frames[0])
        if fields is None:
            # The C++ parser may still read it: refuse anything carrying the key.
            return varint(self.key) not in frames[0]
        if fields.get(14, [0])[-1] != self.key:
            return True
        return fields.get(1, [0])[-1] not in STATE_CHANGING

    def draw(self, t: int) -> list[bytes]:
        r = self.rng
        while True:
            choice = r.random()
            if choice < 0.2:  # random frames
                return [r.randbytes(r.choice([0, 1, 5, 20, 64, 300])) for _ in range(r.randint(1, 4))]
            if choice < 0.5:
                return self.invalid_by_construction(t)
            frames = self.mutate(self.valid(t))
            if self.harmless(frames):
                return frames


def rss_kb(pid: int, field: str = "VmRSS") -> int:
    text = pathlib.Path(f"/proc/{pid}/status").read_text()
    return int(re.search(field + r":\s+(\d+) kB", text).group(1))


def ps_server(build_dir: pathlib.Path) -> pathlib.Path:
    return build_dir / "bin" / "ps-server"


def run_session(build_dir: pathlib.Path, workdir: pathlib.Path, messages: int, seed: int,
                timeout_s: float) -> dict:
    """One server, one worker, `messages` fuzzed messages; returns the figures."""
    key = random.Random(seed).getrandbits(63) | 1
    solver = workdir / "solver.prototxt"
    solver.write_text('type: "SGD" base_lr: 0.1 momentum: 0.9 lr_policy: "fixed" max_iter: 1000\n')
    log_path = workdir / f"server-{messages}.log"
    log = open(log_path, "wb")
    server = subprocess.Popen(
        [str(ps_server(build_dir)), "--bind", "tcp://127.0.0.1:0", "--workers", "1",
         "--mode", "bsp", "--chunk-bytes", str(CHUNK_BYTES), "--job-key", str(key),
         "--solver", str(solver), "--idle-exit-s", "120"],
        stdout=log, stderr=subprocess.STDOUT)
    context = zmq.Context()
    sockets = []
    deadline = time.monotonic() + timeout_s
    try:
        endpoint = None
        while endpoint is None:
            assert time.monotonic() < deadline, "ps-server did not start listening"
            assert server.poll() is None, log_path.read_text()
            m = re.search(r"listening on (tcp://\S+)", log_path.read_text())
            endpoint = m.group(1) if m else None
            time.sleep(0.02)

        def dealer(identity: bytes) -> zmq.Socket:
            s = context.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.IDENTITY, identity)
            s.setsockopt(zmq.SNDHWM, 0)
            s.setsockopt(zmq.RCVHWM, 0)
            s.setsockopt(zmq.RCVTIMEO, 30000)
            s.connect(endpoint)
            sockets.append(s)
            return s

        worker = dealer(b"worker-0")
        stranger_socket = dealer(b"stranger")
        stranger = Stranger(key, seed)

        def ask(frames: list[bytes], want: int) -> list[list[bytes]]:
            worker.send_multipart(frames)
            replies = []
            while True:
                reply = worker.recv_multipart()
                fields = parse(reply[0])
                assert fields is not None and fields[1][-1] != ERROR, \
                    f"the server refused the worker: {reply[0]!r}"
                replies.append(reply)
                if fields[1][-1] == want and (want != PULL_REPLY or
                                              sum(len(parse(r[0]).get(6, [])) for r in replies)
                                              == len(CHUNKS)):
                    return replies

        rss_before = None
        anon_by_step = []  # RssAnon after each step's messages were handled
        sent = 0

        def handled() -> None:
            # The stranger's messages are handled before its STATS is answered.
            stranger_socket.send(header(STATS, key=key, role=CONTROL))
            while True:
                reply = stranger_socket.recv_multipart()
                if parse(reply[0]).get(1, [0])[-1] == STATS:
                    return

        def disturb(count: int, t: int) -> None:
            nonlocal sent
            for i in range(count):
                stranger_socket.send_multipart(stranger.draw(t))
                sent += 1
                if (i + 1) % SYNC_EVERY == 0:
                    handled()
            handled()
            anon_by_step.append(rss_kb(server.pid, "RssAnon"))

        ask([header(HELLO, key=key, world_size=1)], HELLO_ACK)
        ask([header(INIT_PUSH, key=key, chunks=CHUNKS, params=[("w", [2, 3]), ("b", [2])])]
            + [floats(INITIAL[o:o + n]) for o, n in ((0, 4), (4, 2), (6, 2))], INIT_ACK)
        rss_before = rss_kb(server.pid)
        log_before = log_path.stat().st_size
        per_step = messages // STEPS
        for t in range(STEPS):
            disturb(per_step + (messages % STEPS if t == 0 else 0), t)
            assert time.monotonic() < deadline, f"timed out at step {t}"
            ask([header(PULL, key=key, clock=t)], PULL_REPLY)
            g = [gradient(t, i) for i in range(8)]
            ask([header(PUSH, key=key, clock=t, chunks=CHUNKS, sum_squares=sum(x * x for x in g))]
                + [floats(g[o:o + n]) for o, n in ((0, 4), (4, 2), (6, 2))], PUSH_ACK)
        replies = ask([header(PULL, key=key, clock=STEPS)], PULL_REPLY)
        weights: dict[int, bytes] = {}
        for reply in replies:
            for ref, payload in zip(parse(reply[0]).get(6, []), reply[1:]):
                weights[parse(ref)[1][0]] = payload
        stats_reply = ask([header(STATS, key=key)], STATS)
        stats = parse(parse(stats_reply[-1][0])[13][0])
        rss_after = rss_kb(server.pid)
        log_after = log_path.stat().st_size
        assert server.poll() is None, "the server died"
        worker.send_multipart([header(SHUTDOWN, key=key)])
        worker.recv_multipart()
        server.wait(30)
        return {"weights": b"".join(weights[c] for c, _ in CHUNKS),
                "bad_messages": stats.get(5, [0])[0], "sent": sent,
                "rss_before_kb": rss_before, "rss_after_kb": rss_after,
                "rss_anon_by_step_kb": anon_by_step,
                "log_growth_bytes": log_after - log_before, "exit": server.returncode,
                "seconds": timeout_s - (deadline - time.monotonic())}
    finally:
        for s in sockets:
            s.close()
        context.term()
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()


def sessions(build_dir: pathlib.Path, messages: int, seed: int = 1,
             timeout_s: float = 600) -> tuple[dict, dict]:
    """The undisturbed session and the one with `messages` fuzzed messages."""
    with tempfile.TemporaryDirectory(prefix="pstrain_msgfuzz_") as d:
        calm = run_session(build_dir, pathlib.Path(d), 0, seed, 120)
        loud = run_session(build_dir, pathlib.Path(d), messages, seed, timeout_s)
    return calm, loud


def steady_growth_mb(figures: dict) -> float:
    """RssAnon's growth from the end of the warm-up to the end of the last step, in MB."""
    anon = figures["rss_anon_by_step_kb"]
    return (anon[-1] - anon[WARM_UP_STEPS - 1]) / 1024


def check(build_dir: pathlib.Path, messages: int, seed: int = 1, timeout_s: float = 600) -> dict:
    calm, loud = sessions(build_dir, messages, seed, timeout_s)
    problems = []
    if loud["weights"] != calm["weights"]:
        problems.append("the weights differ from the undisturbed run")
    if loud["bad_messages"] < messages // 2:
        problems.append(f"only {loud['bad_messages']} bad messages counted")
    growth_mb = (loud["rss_after_kb"] - loud["rss_before_kb"]) / 1024
    if growth_mb > RSS_BOUND_MB:
        problems.append(f"VmRSS grew by {growth_mb:.1f} MB")
    if steady_growth_mb(loud) > RSS_STEADY_BOUND_MB:
        problems.append(f"RssAnon grew by {steady_growth_mb(loud):.1f} MB after the warm-up")
    if loud["log_growth_bytes"] > LOG_BOUND_BYTES:
        problems.append(f"the log grew by {loud['log_growth_bytes']} bytes")
    if loud["exit"] != 0 or calm["exit"] != 0:
        problems.append("the server did not end cleanly")
    loud["problems"] = problems
    return loud


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--build-dir", default=os.environ.get("PSTRAIN_BUILD_DIR", "build"))
    parser.add_argument("--timeout", type=float, default=3600)
    args = parser.parse_args()
    build_dir = pathlib.Path(args.build_dir)
    build_dir = build_dir if build_dir.is_absolute() else ROOT / build_dir
    figures = check(build_dir, args.messages, args.seed, args.timeout)
    figures.pop("weights")
    problems = figures.pop("problems")
    print("message fuzz: " + ", ".join(f"{k} {v if not isinstance(v, float) else round(v, 1)}"
                                        for k, v in figures.items()))
    for p in problems:
        print(f"message fuzz: FAILED: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
