#!/usr/bin/env python3
"""Where the CPU of a PSTrain job goes, by process and thread (docs/scaling.md, E8, E9).

Samples /proc/PID/task/TID/schedstat (ns on a CPU, ns in the run queue, time slices) of
every thread of a job's processes (and their children) every 25 ms, with the CPUs' idle
time (/proc/stat), and reports over the steady middle of the run, per iteration, each kind
of thread: a worker's training (main) thread, its side threads (data prefetch), its ZeroMQ
I/O thread; a server's main and I/O threads. Three kinds of run:

  * `--jobs 1,2,4 [--mode bsp]`: loopback LeNet b32 jobs, 1 server
    (bench/scaling_validate.run_job): what the validation points spend;
  * `--bench`: ps-bench (tcp, 1 server) at 4K, 16M and LeNet's 1,724 KB, asp with 1 worker
    thread and bsp with 2: the CPU per exchange and per byte of the client's and the
    server's threads (E8's constants; not a validation point);
  * `--interference`: `ps-net time` of LeNet alone and beside a ps-bench loop, unpinned and
    pinned to one core, and beside a second `ps-net time` on one core: the training
    thread's extra CPU when it shares its core (E9).

usage: python3 bench/scaling_cpu.py [--bench] [--jobs 1,2,3,4] [--interference]
                                    [--iters 400] [--json-out F]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))
import scaling_validate as sv  # noqa: E402
from ps_lenet import write_solver  # noqa: E402

def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _threads(pid: int) -> dict:
    """{tid: (comm, cpu seconds)} of one process."""
    out = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            if int(tid) == pid:
                comm += ":main"
            # schedstat: ns on a CPU, ns waiting for one, time slices (stat's utime + stime
            # count 10 ms ticks)
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                run, wait, slices = (int(x) for x in f.read().split()[:3])
            out[int(tid)] = (comm, run / 1e9, wait / 1e9, slices)
    except (OSError, ValueError, IndexError):
        pass
    return out


class ThreadSampler:
    """Samples the threads of `roots` and their descendants: (time, {(role, pid, tid):
    (comm, cpu s)}). `role(pid)` names a process (worker0, server0, ...)."""

    def __init__(self, period: float = 0.025):
        self.roots: dict[int, str] = {}
        self.samples: list[tuple[float, dict]] = []
        self._stop = threading.Event()
        self._period = period
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            snap = {}
            todo = list(self.roots.items())
            while todo:
                pid, role = todo.pop()
                for tid, v in _threads(pid).items():
                    snap[(role, pid, tid)] = v
                todo += [(c, role + "/child") for c in _children(pid)]
            with open("/proc/stat") as f:  # idle + iowait ticks of all CPUs
                fields = f.readline().split()
            snap[("idle", 0, 0)] = ("idle", (int(fields[4]) + int(fields[5])) / TICK, 0, 0)
            self.samples.append((time.monotonic(), snap))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def window(self, start: float, end: float) -> tuple[float, dict]:
        """(seconds, {(role, comm): cpu seconds}) between the samples nearest start and end."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            raise RuntimeError("too few samples in the steady window")
        (t0, a), (t1, b) = inside[0], inside[-1]
        out: dict = {}
        self.extra: dict = {}
        self.idle = 0.0
        for key, (comm, cpu, wait, slices) in b.items():
            if key[0] == "idle":
                self.idle = cpu - a[key][1]
                continue
            if key in a:
                name = (key[0], thread_kind(comm))
                out[name] = out.get(name, 0.0) + cpu - a[key][1]
                w, n = self.extra.get(name, (0.0, 0))
                self.extra[name] = (w + wait - a[key][2], n + slices - a[key][3])
        return t1 - t0, out


def thread_kind(comm: str) -> str:
    if comm == "idle":
        return "idle"
    if comm.startswith("ZMQbg/IO"):
        return "zmq io"
    if comm.startswith("ZMQbg"):
        return "zmq other"
    if comm.endswith(":main"):
        return "main"
    if comm in ("ps-worker", "ps-server", "ps-bench"):
        return "side thread"
    return "other:" + comm


def job_breakdown(build: pathlib.Path, solver: pathlib.Path, workers: int, iters: int,
                  mode: str = "bsp", ipc: bool = False) -> dict:
    """One loopback LeNet bsp job (tcp, or ipc with shared memory); CPU per iteration by
    role and thread kind over the middle of the workers' run (35-85 % of the time from
    start to the first exit)."""
    sampler = ThreadSampler()
    orig = sv.subprocess.Popen
    n = {"server": 0, "worker": 0}

    def tracking(cmd, *a, **k):
        p = orig(cmd, *a, **k)
        role = "server" if "ps-server" in str(cmd[0]) else "worker"
        sampler.roots[p.pid] = f"{role}{n[role]}"
        n[role] += 1
        return p
    sv.subprocess.Popen = tracking
    start = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="scaling-ipc-") as folder:
            raw = sv.run_job(build, solver, workers, 1, mode, 0,
                             ipc_folder=pathlib.Path(folder) if ipc else None)
    finally:
        sv.subprocess.Popen = orig
        sampler.stop()
    # the first worker's exit: the last sample where every worker is still there
    alive = [t for t, snap in sampler.samples
             if len({k[0] for k in snap if k[0].startswith("worker")}) == workers]
    end = alive[-1]
    seconds, cpu = sampler.window(start + 0.35 * (end - start), start + 0.85 * (end - start))
    its_per_s = statistics.mean(raw["per_worker"]) / 32       # per worker
    idle = sampler.idle
    per_iter = {f"{r}:{k}": c / (seconds * its_per_s) for (r, k), c in cpu.items()}
    waits = {f"{r}:{k}": 1e3 * w / (seconds * its_per_s) for (r, k), (w, n) in
             sampler.extra.items()}
    slices = {f"{r}:{k}": n / (seconds * its_per_s) for (r, k), (w, n) in
              sampler.extra.items()}
    return {"workers": workers, "mode": mode, "transport": "ipc" if ipc else "tcp",
            "images_per_s": raw["images_per_s"],
            "iteration_ms": 1e3 / its_per_s, "window_s": seconds,
            "idle_cores": idle / seconds,   # of all CPUs, /proc/stat idle + iowait
            "pull_wait_ms": [1e3 * w for w in raw["pull_wait_s_per_iter"]],
            "background": raw["background"], "cpu_ms_per_iter": {k: 1e3 * v for k, v in
                                                                 sorted(per_iter.items())},
            "runqueue_ms_per_iter": dict(sorted(waits.items())),
            "slices_per_iter": dict(sorted(slices.items()))}


def bench_breakdown(build: pathlib.Path, size: str, params: int, workers: int = 1,
                    mode: str = "asp", client_ns: str | None = None,
                    server_ns: str | None = None, bind_host: str = "127.0.0.1",
                    curve: bool = False) -> dict:
    """ps-bench, 1 worker thread, 1 server, tcp, asp: CPU per round trip of the ps-bench
    process (its worker thread and I/O thread) and of the server, over 30-90 % of its run.
    client_ns, server_ns: network namespaces ps-bench and its server run in (`ip netns
    exec`), the server bound to bind_host, an address of server_ns; curve: CURVE on every
    socket, as a ps-train job over tcp by default (security: curve)."""
    sampler = ThreadSampler()
    cmd = [str(build / "bin/ps-bench"), "--size", size, "--params", str(params), "--runs", "4",
           "--run-seconds", "1.0", "--warmup", "3", "--workers", str(workers), "--mode", mode,
           "--bind-host", bind_host, "--json"] + (["--curve"] if curve else [])
    if server_ns is not None:
        cmd += ["--server-wrapper", f"ip netns exec {server_ns}"]
    if client_ns is not None:   # `ip` execs ps-bench: the pid stays the one sampled
        cmd = ["ip", "netns", "exec", client_ns] + cmd
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler.roots[p.pid] = "bench"
    out, err = p.communicate(timeout=300)
    end = time.monotonic()
    sampler.stop()
    if p.returncode != 0:
        raise RuntimeError(f"ps-bench failed: {err[-800:]}")
    res = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
    rt_per_s = res["its_per_worker"]
    seconds, cpu = sampler.window(start + 0.3 * (end - start), start + 0.9 * (end - start))
    per_rt = {}
    for (role, kind), c in cpu.items():
        who = "server" if role.endswith("/child") else "client"
        key = f"{who}:{kind}"
        per_rt[key] = per_rt.get(key, 0.0) + c / (seconds * rt_per_s)
    # every CPU's busy time (/proc/stat, all but idle and iowait): also the kernel's packet
    # work that ran in softirq while a core idled, which no thread's time counts
    busy = max(0.0, (os.cpu_count() or 1) * seconds - sampler.idle)
    return {"size": size, "params": params, "workers": workers, "mode": mode,
            "round_trip_us": 1e6 / rt_per_s,
            "cpu_us_per_round_trip": {k: 1e6 * v for k, v in sorted(per_rt.items())},
            "machine_busy_us_per_round_trip": 1e6 * busy / (seconds * rt_per_s)}


def cpu_slope_ns_per_byte(small: dict, big: dict, prefix: str = "") -> float:
    """CPU ns per byte of one worker's gradient between two bench_breakdown runs (4K and
    16M) of the threads whose key starts with `prefix` ("client:", "server:zmq", ...); the
    whole machine's busy CPU with prefix "machine". 0 if it fell."""
    def us(run: dict) -> float:
        if prefix == "machine":
            return run["machine_busy_us_per_round_trip"]
        return sum(v for k, v in run["cpu_us_per_round_trip"].items() if k.startswith(prefix))
    return max(0.0, (us(big) - us(small)) / (16e6 - 4e3) * 1e3)


def net_cpu_per_iter(build: pathlib.Path, net: str, iters: int,
                     pin: tuple[str, ...] = ()) -> tuple[float, float]:
    """(CPU s, median wall s) per iteration of `ps-net time --threads 1`: the CPU of a run of
    `iters` iterations less that of a run of 20 (set-up and engine choice drop out)."""
    cpu, median = [], 0.0
    for n in (20, iters):
        cmd = list(pin) + [str(build / "bin/ps-net"), "time", "--model", net, "--threads", "1",
                     "--iterations", str(n), "--json"]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             cwd=ROOT, start_new_session=True)
        out = p.stdout.read()
        _, status, usage = os.wait4(p.pid, 0)
        if status != 0:
            raise RuntimeError("ps-net time failed")
        cpu.append(usage.ru_utime + usage.ru_stime)
        median = [json.loads(l)["median_total_ms"] for l in out.splitlines()
                  if l.startswith('{"event":"time"')][0] / 1e3
    return (cpu[1] - cpu[0]) / (iters - 20), median


def interference(build: pathlib.Path, net: str, size: str, params: int,
                 pin: tuple[str, ...] = (), neighbour: str = "bench") -> dict:
    """The training thread's CPU per iteration alone and beside a ps-bench loop (bsp, 2 worker
    threads, the net's gradient bytes and parameter count; its own session): what the
    communication threads sharing the cores cost the compute beyond their own CPU."""
    alone = net_cpu_per_iter(build, net, 220, pin)
    sampler = ThreadSampler()
    cmd = ([str(build / "bin/ps-bench"), "--size", size, "--params", str(params), "--workers",
            "2", "--mode", "bsp", "--runs", "30", "--run-seconds", "1", "--json"]
           if neighbour == "bench" else
           [str(build / "bin/ps-net"), "time", "--model", net, "--threads", "1",
            "--iterations", "100000"])
    bench = subprocess.Popen(list(pin) + cmd, stdout=subprocess.DEVNULL, cwd=ROOT,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    sampler.roots[bench.pid] = "bench"
    try:
        time.sleep(1.5)
        t0 = time.monotonic()
        beside = net_cpu_per_iter(build, net, 220, pin)
        t1 = time.monotonic()
    finally:
        os.killpg(bench.pid, 9)
        bench.wait()
        sampler.stop()
    seconds, cpu = sampler.window(t0, t1)
    return {"pin": " ".join(pin), "neighbour": neighbour,
            "alone_cpu_ms": 1e3 * alone[0], "alone_median_ms": 1e3 * alone[1],
            "beside_cpu_ms": 1e3 * beside[0], "beside_median_ms": 1e3 * beside[1],
            "bench_cores": sum(cpu.values()) / seconds}


def sched_trace(build: pathlib.Path, solver: pathlib.Path, workers: int,
                seconds: float = 0.5) -> dict:
    """A loopback LeNet bsp job; `perf sched record` of every CPU for `seconds` in its steady
    middle. Returns each CPU's idle time and, summed over the idle stretches, which thread
    went to sleep to start one and which woke to end it (by role: worker main, worker I/O,
    server main, server I/O)."""
    if shutil.which("perf") is None:
        raise SystemExit("bench/scaling_cpu.py --sched: perf not found (Debian: linux-perf, "
                         "scripts/setup.sh installs it with the bench packages)")
    roles: dict[int, str] = {}
    orig = sv.subprocess.Popen
    n = {"server": 0, "worker": 0}

    def tracking(cmd, *a, **k):
        p = orig(cmd, *a, **k)
        role = "server" if "ps-server" in str(cmd[0]) else "worker"
        roles[p.pid] = f"{role}{n[role]}"
        n[role] += 1
        return p
    data = pathlib.Path(tempfile.mkdtemp(prefix="sched-")) / "perf.data"
    result: dict = {}

    def record() -> None:
        time.sleep(1.5 + 0.4 * workers)
        subprocess.run(["perf", "sched", "record", "-a", "-o", str(data), "--", "sleep",
                        str(seconds)], capture_output=True, timeout=60)
        result["thread"] = {tid: roles[pid] for pid in list(roles)
                            for tid in _threads(pid)}
        result["names"] = {tid: comm for pid in list(roles) for tid, (comm, *_) in
                           _threads(pid).items()}
    sv.subprocess.Popen = tracking
    rec = threading.Thread(target=record)
    rec.start()
    try:
        raw = sv.run_job(build, solver, workers, 1, "bsp", 0)
    finally:
        sv.subprocess.Popen = orig
        rec.join()
    out = subprocess.run(["perf", "script", "-i", str(data), "-F", "cpu,time,event,trace"],
                         capture_output=True, text=True, timeout=120).stdout
    shutil.rmtree(data.parent, ignore_errors=True)

    def who(pid: int) -> str:
        role = result["thread"].get(pid)
        if role is None:
            return "other" if pid else "idle"
        kind = thread_kind(result["names"][pid])
        return f"{role[:6]} {kind}"
    pat = re.compile(r"\[(\d+)\]\s+([\d.]+):\s+sched:sched_switch:.*prev_pid=(\d+).*"
                      r"prev_state=(\S+) ==> .*next_pid=(\d+)")
    idle_since: dict = {}
    idle = {}
    starts: dict = {}
    ends: dict = {}
    first = last = None
    for line in out.splitlines():
        m = pat.search(line)
        if not m:
            continue
        cpu, t, prev, state, nxt = int(m[1]), float(m[2]), int(m[3]), m[4], int(m[5])
        first = t if first is None else first
        last = t
        if nxt == 0:
            idle_since[cpu] = (t, who(prev))
        elif prev == 0 and cpu in idle_since:
            t0, by = idle_since.pop(cpu)
            idle[cpu] = idle.get(cpu, 0.0) + t - t0
            starts[by] = starts.get(by, 0.0) + t - t0
            ends[who(nxt)] = ends.get(who(nxt), 0.0) + t - t0
    span = (last - first) if first is not None else 0.0
    its = span * statistics.mean(raw["per_worker"]) / 32
    bal = _balance(out, {t for t, r in result["thread"].items() if r.startswith("worker")
                         and thread_kind(result["names"][t]) == "main"})
    return {"workers": workers, "span_s": span, "iterations": its,
            "idle_core_ms_per_iter": 1e3 * bal["idle"] / its,
            "idle_while_compute_waits_core_ms_per_iter": 1e3 * bal["idle_waiting"] / its,
            "compute_waits_ms_per_iter": 1e3 * bal["waiting"] / its / workers,
            "compute_runs_ms_per_iter": 1e3 * bal["running"] / its / workers,
            "compute_threads_runnable_hist_s": bal["hist"],
            "compute_on_cpu_s": bal["on_cpu"],
            "compute_migrations_per_iter": bal["migrations"] / its,
            "idle_core_ms_per_iter_by_runnable_compute": {
                k: 1e3 * v / its for k, v in sorted(bal["idle_by_runnable"].items())},
            "idle_ms_per_iter": {c: 1e3 * v / its for c, v in sorted(idle.items())},
            "idle_started_by_ms": {k: 1e3 * v / its for k, v in
                                   sorted(starts.items(), key=lambda kv: -kv[1])},
            "idle_ended_by_ms": {k: 1e3 * v / its for k, v in
                                 sorted(ends.items(), key=lambda kv: -kv[1])}}


def _spin_between_barriers(barrier, compute_s: float, iters: int, out) -> None:
    cpu = 0.0
    barrier.wait()
    start = time.monotonic()
    for _ in range(iters):
        barrier.wait()
        t0 = time.thread_time()
        while time.thread_time() - t0 < compute_s:
            pass
        cpu += time.thread_time() - t0
    barrier.wait()
    out.put((time.monotonic() - start, cpu))


def barrier_idle(workers: int, compute_ms: float, iters: int = 300) -> dict:
    """E10's experiment, no PSTrain in it: `workers` processes each spin `compute_ms` of CPU
    between barriers (bsp's shape without the messages). Returns the iteration time against
    the ideal max(c, W·c/C) of perfect sharing, and the cores' idle core-ms an iteration
    (C·T less the CPU spun)."""
    import multiprocessing as mp
    barrier, out = mp.Barrier(workers), mp.Queue()
    procs = [mp.Process(target=_spin_between_barriers,
                        args=(barrier, compute_ms / 1e3, iters, out)) for _ in range(workers)]
    for p in procs:
        p.start()
    try:
        res = [out.get(timeout=60 + 3 * iters * compute_ms / 1e3 * workers) for _ in procs]
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
    cores = os.cpu_count() or 1
    it = max(r[0] for r in res) / iters
    cpu = sum(r[1] for r in res) / iters
    return {"workers": workers, "cores": cores, "compute_ms": compute_ms,
            "iteration_ms": 1e3 * it, "ideal_ms": max(compute_ms, workers * compute_ms / cores),
            "idle_core_ms": 1e3 * (cores * it - cpu)}


def balance_latency(compute_ms: float = 9.0, rounds: int = 3) -> dict:
    """E10's latency: W = C + 1 spinning processes leave C - 1 cores dry after c; the idle
    core time beyond W = C's (the barrier's own wake-ups) over those C - 1 cores is the time
    the load balancer takes to fill one. compute_ms must exceed the latency (else it caps
    the idle time). Medians of `rounds`."""
    cores = os.cpu_count() or 1
    even = [barrier_idle(cores, compute_ms) for _ in range(rounds)]
    odd = [barrier_idle(cores + 1, compute_ms) for _ in range(rounds)]
    lat = (statistics.median(r["idle_core_ms"] for r in odd)
           - statistics.median(r["idle_core_ms"] for r in even)) / max(1, cores - 1)
    return {"even": even, "odd": odd, "balance_ms": max(0.0, lat)}


def _balance(script: str, mains: set) -> dict:
    """From `perf script` of sched_switch/sched_wakeup/sched_migrate_task: the CPUs' idle
    time, the part of it while a training thread (`mains`) was runnable but waiting for a
    CPU (preempted, or woken and not yet on a CPU), the training threads' waiting and running
    time, how long 0..W of them were runnable, on which CPU each ran, and their migrations.
    An idle CPU beside a waiting training thread is the load balancer's loss; with all CPUs
    busy the wait is plain sharing."""
    sw = re.compile(r"\[(\d+)\]\s+([\d.]+):\s+sched:sched_switch:.*prev_pid=(\d+).*"
                     r"prev_state=(\S+) ==> .*next_pid=(\d+)")
    wk = re.compile(r"\[(\d+)\]\s+([\d.]+):\s+sched:sched_wakeup(?:_new)?:.*pid=(\d+)")
    mg = re.compile(r"\[(\d+)\]\s+([\d.]+):\s+sched:sched_migrate_task:.*pid=(\d+)")
    running: dict = {}
    waiting: set = set()
    acc = {"idle": 0.0, "idle_waiting": 0.0, "waiting": 0.0, "running": 0.0,
           "migrations": 0, "hist": {}, "on_cpu": {}, "idle_by_runnable": {}}
    t_prev = None
    for line in script.splitlines():
        m = sw.search(line) or wk.search(line) or mg.search(line)
        if not m:
            continue
        cpu, t = int(m[1]), float(m[2])
        if t_prev is not None and len(running) >= 2:
            dt = t - t_prev
            idle = sum(1 for p in running.values() if p == 0)
            on = [p for p in running.values() if p in mains]
            acc["idle"] += dt * idle
            if idle:
                k = str(len(waiting) + len(on))
                acc["idle_by_runnable"][k] = acc["idle_by_runnable"].get(k, 0.0) + dt * idle
            acc["idle_waiting"] += dt * idle * (1 if waiting else 0)
            acc["waiting"] += dt * len(waiting)
            acc["running"] += dt * len(on)
            k = str(len(waiting) + len(on))
            acc["hist"][k] = acc["hist"].get(k, 0.0) + dt
            for c, p in running.items():
                if p in mains:
                    key = f"{p}@{c}"
                    acc["on_cpu"][key] = acc["on_cpu"].get(key, 0.0) + dt
        t_prev = t
        if "sched_switch" in line:
            prev, state, nxt = int(m[3]), m[4], int(m[5])
            running[cpu] = nxt
            waiting.discard(nxt)
            if prev in mains and state.startswith("R"):
                waiting.add(prev)
        elif "sched_wakeup" in line:
            if int(m[3]) in mains and int(m[3]) not in running.values():
                waiting.add(int(m[3]))
        elif int(m[3]) in mains:
            acc["migrations"] += 1
    return acc



# ---------------------------------------------------------------- E8-E10 calibration
# (bench/scaling_validate.py and bench/host_layout.py call these)

def e8_inputs(cpu: dict, calib: dict) -> dict:
    """The Cluster inputs of E8-E10 from E8's constants `cpu` (e8_constants) and a run's
    calibration: the job's communication CPU against ps-bench's for the same bytes (f, a
    W = 1 job measured thread by thread; 1 for runs without it), E9's refill, E10's λ."""
    f = calib.get("job_comm_factor", 1.0)
    return dict(worker_cpu_exchange_s=f * cpu["worker_exchange_us"] * 1e-6,
                worker_cpu_byte_s=f * cpu["worker_ns_per_byte"] * 1e-9,
                server_cpu_exchange_s=f * cpu["server_exchange_us"] * 1e-6,
                server_cpu_byte_s=f * cpu["server_ns_per_byte"] * 1e-9,
                refill_per_share=calib.get("refill_per_share", 0.0),
                balance_s=calib.get("balance_ms", 0.0) * 1e-3)


def e8_constants(build: pathlib.Path, mode: str, workers: int, **where) -> dict:
    """E8's constants of one mode: ps-bench (tcp, 1 server) at 4K and 16M in 4 parameters,
    every thread of its process and of the server sampled (bench/py): per worker
    and push+pull exchange, the CPU of the 4K run; per byte, the slope to 16M. `where`:
    bench_breakdown's namespaces and address (default: loopback)."""
    small = bench_breakdown(build, "4K", 4, workers, mode, **where)
    big = bench_breakdown(build, "16M", 4, workers, mode, **where)
    res = {"round_trip_4k_us": small["round_trip_us"], "round_trip_16m_us": big["round_trip_us"]}
    for who in ("worker", "server"):
        tag = "client" if who == "worker" else "server"
        res[f"{who}_exchange_us"] = sum(v for k, v in small["cpu_us_per_round_trip"].items()
                                        if k.startswith(tag)) / workers
        res[f"{who}_ns_per_byte"] = cpu_slope_ns_per_byte(small, big, tag) / workers
    # the whole machine's busy CPU per byte (softirq work in idle time included)
    res["machine_ns_per_byte"] = cpu_slope_ns_per_byte(small, big, "machine") / workers
    return res


def cpu_calibration(build: pathlib.Path) -> dict:
    """E8's constants over loopback: bsp with 2 worker threads, asp with 1."""
    return {f"cpu_{mode}": e8_constants(build, mode, workers)
            for mode, workers in (("bsp", 2), ("asp", 1))}


def job_calibration(build: pathlib.Path, solver: pathlib.Path, calib: dict,
                    grad_bytes: float) -> dict:
    """E8's factor and E9's constant, measured apart from the validation points:
    * a LeNet W = 1 bsp job (240 iterations), every thread's CPU over its steady middle:
      what the job's communication costs (all threads less the compute, `ps-net time`'s CPU
      per iteration) against what ps-bench's threads spend on the same bytes (E8);
    * `ps-net time` alone and pinned to one core beside another `ps-net time` and beside a
      ps-bench loop: the training thread's extra CPU per unit of the core's share the
      neighbour takes (E9);
    * C and C + 1 processes spinning 9 ms of CPU between barriers, no PSTrain in them: the
      load balancer's latency to fill a core that ran dry (E10)."""
    net = re.search(r'net: "([^"]+)"', solver.read_text()).group(1)
    compute, _ = net_cpu_per_iter(build, net, 220)
    job = job_breakdown(build, solver, 1, 240)
    total = sum(job["cpu_ms_per_iter"].values()) / 1e3
    cpu = calib["cpu_bsp"]
    bench = ((cpu["worker_exchange_us"] + cpu["server_exchange_us"]) * 1e-6
             + grad_bytes * (cpu["worker_ns_per_byte"] + cpu["server_ns_per_byte"]) * 1e-9)
    refills = []
    for neighbour in ("net", "bench"):
        r = interference(build, net, f"{round(grad_bytes / 1e3)}K", 8,
                                     ("taskset", "-c", "0"), neighbour)
        refills.append((r["beside_cpu_ms"] / r["alone_cpu_ms"] - 1) / r["bench_cores"])
    balance = balance_latency()
    return {"streamed_pulls": True, "balance_ms": balance["balance_ms"],
            "balance_idle_core_ms": [[r["idle_core_ms"] for r in balance[k]]
                                     for k in ("even", "odd")],
            "job_compute_ms": 1e3 * compute, "job_cpu_ms": 1e3 * total,
            "job_threads_ms": job["cpu_ms_per_iter"], "bench_comm_ms": 1e3 * bench,
            "job_comm_factor": max(1.0, (total - compute) / bench),
            "refills_per_share": refills, "refill_per_share": max(0.0, statistics.mean(refills))}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--jobs", default="", help="comma-separated worker counts (LeNet bsp)")
    ap.add_argument("--mode", default="bsp", help="mode of the --jobs")
    ap.add_argument("--ipc", action="store_true",
                    help="the --jobs over ipc with shared memory instead of loopback tcp")
    ap.add_argument("--bench", action="store_true", help="ps-bench 4K/1M/16M breakdown")
    ap.add_argument("--iters", type=int, default=400)
    ap.add_argument("--interference", action="store_true",
                    help="LeNet's compute alone and beside a ps-bench loop")
    ap.add_argument("--sched", default="", help="comma-separated worker counts: perf sched "
                    "trace of a LeNet bsp job, who leaves the CPUs idle")
    ap.add_argument("--barrier", default="", help="comma-separated process counts: spin "
                    "--barrier-ms of CPU between barriers, idle core time (E10)")
    ap.add_argument("--barrier-ms", default="4,9", help="comma-separated compute times (ms)")
    ap.add_argument("--balance", action="store_true", help="E10's latency (W = C vs C + 1)")
    ap.add_argument("--json-out", type=pathlib.Path)
    a = ap.parse_args()
    build = (ROOT / a.build).resolve()
    out = {"loadavg_before": sv.loadavg(), "bench": [], "jobs": []}
    if a.bench:
        for size, params, w, mode in (("4K", 4, 1, "asp"), ("16M", 4, 1, "asp"),
                                      ("4K", 4, 2, "bsp"), ("16M", 4, 2, "bsp"),
                                      ("1720K", 8, 1, "asp"), ("1720K", 8, 2, "bsp")):
            r = bench_breakdown(build, size, params, w, mode)
            out["bench"].append(r)
            print(json.dumps(r), flush=True)
    for w in (int(x) for x in a.barrier.split(",") if x):
        for c in (float(x) for x in a.barrier_ms.split(",") if x):
            r = barrier_idle(w, c)
            out.setdefault("barrier", []).append(r)
            print(json.dumps(r), flush=True)
    if a.balance:
        out["balance"] = balance_latency()
        print(json.dumps({"balance_ms": out["balance"]["balance_ms"]}), flush=True)
    with tempfile.TemporaryDirectory(prefix="cpu-") as tmp:
        solver = write_solver(pathlib.Path(tmp) / "lenet", 32, a.iters, a.iters // 8)
        if a.interference:
            net = str(pathlib.Path(tmp) / "lenet/net.prototxt")
            for pin, neighbour in (((), "bench"), (("taskset", "-c", "0"), "bench"),
                                   (("taskset", "-c", "0"), "net")) * 2:
                r = interference(build, net, "1724K", 8, pin, neighbour)
                out.setdefault("interference", []).append(r)
                print(json.dumps(r), flush=True)
        for w in (int(x) for x in a.sched.split(",") if x):
            r = sched_trace(build, solver, w)
            out.setdefault("sched", []).append(r)
            print(json.dumps(r), flush=True)
        for w in (int(x) for x in a.jobs.split(",") if x):
            r = job_breakdown(build, solver, w, a.iters, a.mode, a.ipc)
            out["jobs"].append(r)
            print(json.dumps(r), flush=True)
    out["loadavg_after"] = sv.loadavg()
    print("load average", out["loadavg_before"], "->", out["loadavg_after"])
    if a.json_out:
        a.json_out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
