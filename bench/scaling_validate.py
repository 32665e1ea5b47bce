#!/usr/bin/env python3
"""Checks the cost model (python/pstrain/costmodel.py) against measured PSTrain jobs on
this machine, and prints measured against predicted images/s with the relative error.

Calibration, in the same run (docs/scaling.md, "Parameters and how to measure them"):
  * the loopback round trip: `ps-bench` (1 worker, 1 server, tcp, asp) at 4K and 16M, the
    server under /usr/bin/time: the 4K round trip gives the per-message cost, the slope the
    per-byte cost, the server's CPU share its part of it;
  * loopback TCP bandwidth: iperf3 single stream (if installed); what is left of the slope
    beyond the wire and the server is the worker's CPU per byte.
  * E8 and E9 (bench/scaling_cpu.py): ps-bench at 4K and 16M with every thread of its
    process and of the server sampled (CPU per exchange and per byte; bsp with 2 worker
    threads, asp with 1); a LeNet W = 1 job thread by thread against ps-bench's figure
    (the factor f); `ps-net time` pinned to one core alone and beside a neighbour (ι).
    None of these is a validation point.

Measured points (each a short job; images/s summed over workers, steady state: the mean of
the workers' display intervals after the first), each --rounds times (median):
  * loopback (127.0.0.1): LeNet b32, W = 1..4, S = 1..2, bsp / ssp (s=2) / asp;
    CIFAR-10 quick b50 (DummyData), W = 1, 2, bsp;
  * two network namespaces joined by a veth pair whose both ends are shaped with tbf
    (`tc qdisc ... tbf rate R`), servers in one, workers in the other: LeNet b32 at
    100 Mbit/s and 1 Gbit/s, W = 1, 2, bsp and asp (needs root; skipped otherwise).
    This kernel has no netem, so latency is not emulated.

Right before each job: `ps-net time --threads 1` of its net (one process), and, for W > 1,
W copies at once. The 2 cores are shared with whatever else runs: a sampler counts the
other programs' busy scheduling groups (autogroups) during the timings and the job; the
job's servers' and workers' CPU seconds (/proc/PID/stat) and the workers' waits for pulls
are recorded too. Three predictions per point: "E6" from the one-process times with the
model's contention term, "W timed at once" from the times of the W copies (contention
measured, E6 only for the servers and the other programs' change between timing and
job), and "compute in the job" (the workers' time outside their pull waits: a check of
the communication terms alone).

--recompute FILE predicts again, with the current model, for the rounds stored in an
earlier --json-out (bench/data/scaling_validation_run14.json is the run docs/scaling.md quotes).

usage: python3 bench/scaling_validate.py [--build build] [--quick] [--rounds 3] [--markdown]
                                         [--json-out FILE] [--no-netns] [--recompute FILE]
                                         [--switches | --overlap-factors] [--measure-links]
                                         [--only-switches TEXT]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))
from pstrain import costmodel  # noqa: E402
from ps_lenet import steady, write_solver  # noqa: E402

CIFAR_NET = ROOT / "configs/nets/cifar10_quick_bench.prototxt"
CIFAR_SOLVER = ROOT / "configs/nets/cifar10_quick_solver.prototxt"


def loadavg() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def write_cifar_solver(folder: pathlib.Path, batch: int, iters: int, display: int) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    net = CIFAR_NET.read_text()
    net, n = re.subn(r"dim: 100 ", f"dim: {batch} ", net)
    assert n == 2, n
    (folder / "net.prototxt").write_text(net)
    keep = [l for l in CIFAR_SOLVER.read_text().splitlines()
            if l.split(":")[0].strip() not in ("net", "test_iter", "test_interval", "max_iter",
                                                "snapshot", "snapshot_prefix", "display")]
    keep += [f'net: "{folder}/net.prototxt"', f"max_iter: {iters}", "snapshot: 0",
             f'snapshot_prefix: "{folder}/snap"', f"display: {display}"]
    solver = folder / "solver.prototxt"
    solver.write_text("\n".join(keep) + "\n")
    return solver


class Background:
    """Samples, every 0.2 s, how many scheduling groups of other programs want the CPU. The
    kernel here shares CPU time fairly between autogroups (one per session:
    /proc/sys/kernel/sched_autogroup_enabled), not threads, so the count that matters is
    the autogroups with a runnable thread, less this script's own and those of `pids`."""

    def __init__(self):
        self.pids: list[int] = []
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def _group(pid: int | str) -> str | None:
        try:
            with open(f"/proc/{pid}/autogroup") as f:
                fields = f.read().split()
            return fields[0] if fields else None
        except OSError:
            return None

    @staticmethod
    def _runnable(pid: str) -> bool:
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/stat") as f:
                    if f.read().rsplit(")", 1)[-1].split()[:1] == ["R"]:
                        return True
        except OSError:
            pass
        return False

    def _run(self) -> None:
        me = self._group(os.getpid())
        while not self._stop.wait(0.2):
            ours = {me} | {self._group(p) for p in list(self.pids)}
            groups = {self._group(p) for p in os.listdir("/proc")
                      if p.isdigit() and self._runnable(p)}
            self.samples.append(len(groups - ours - {None}))

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return statistics.mean(self.samples) if self.samples else 0.0


def time_net(build: pathlib.Path, solver: pathlib.Path, out: pathlib.Path, iters: int,
             copies: int = 1) -> float:
    """Writes the layer times (per layer, the mean over `copies` ps-net time processes run at
    once, each in its own session as a job's workers are); returns the other programs' mean
    busy autogroups meanwhile."""
    net = re.search(r'net: "([^"]+)"', solver.read_text()).group(1)
    bg = Background()
    procs = [subprocess.Popen([str(build / "bin/ps-net"), "time", "--model", net, "--threads",
                               "1", "--iterations", str(iters), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=ROOT, start_new_session=True) for _ in range(copies)]
    bg.pids += [p.pid for p in procs]
    outputs = [p.communicate(timeout=600) for p in procs]
    background = bg.stop()
    for p, (_, err) in zip(procs, outputs):
        if p.returncode != 0:
            raise RuntimeError(f"ps-net time failed: {err[-800:]}")
    tables = []
    for i, (stdout, _) in enumerate(outputs):
        (out.parent / f"{out.name}.{i}").write_text(stdout)
        tables.append(costmodel.load_layer_times(out.parent / f"{out.name}.{i}"))
    medians = [json.loads(l)["median_total_ms"] for stdout, _ in outputs
               for l in stdout.splitlines() if l.startswith('{"event":"time"')]
    out.write_text(json.dumps({"event": "time", "median_total_ms": statistics.mean(medians)})
                   + "\n" + "".join(json.dumps({"event": "layer_time", "layer": rows[0].name,
                                       "forward_ms": statistics.mean(r.forward_ms for r in rows),
                                       "backward_ms": statistics.mean(r.backward_ms for r in rows)})
                           + "\n" for rows in zip(*tables)))
    return background


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (/proc/PID/stat), None once it is gone."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def ps_bench_rtt(build: pathlib.Path, size: str, folder: pathlib.Path) -> tuple[float, float]:
    """(round trip s, server CPU s per round trip): ps-bench, 1 worker, 1 server, tcp, asp; the
    server runs under /usr/bin/time, whose CPU share times the round trip is its cost."""
    stats = folder / f"server_time_{size}.txt"
    cmd = [str(build / "bin/ps-bench"), "--size", size, "--runs", "3", "--run-seconds", "0.7",
           "--warmup", "3", "--json"]
    timer = shutil.which("time", path="/usr/bin")
    if timer:
        cmd += ["--server-wrapper", f"{timer} -f %e,%U,%S -o {stats}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    line = [l for l in done.stdout.splitlines() if l.startswith("{")]
    if done.returncode != 0 or not line:
        raise RuntimeError(f"ps-bench failed: {done.stderr[-800:]}")
    rtt = 1.0 / json.loads(line[-1])["its_per_worker"]
    share = 0.0
    if timer and stats.exists():
        last = stats.read_text().strip().splitlines()[-1]
        wall, user, system = (float(x) for x in last.split(","))
        share = (user + system) / wall
    return rtt, share * rtt


def iperf3_bytes_per_s() -> float | None:
    iperf3 = shutil.which("iperf3")
    if iperf3 is None:
        return None
    port = "5317"
    server = subprocess.Popen([iperf3, "-s", "-1", "-p", port], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = subprocess.run([iperf3, "-c", "127.0.0.1", "-p", port, "-t", "3", "-J"],
                             capture_output=True, text=True, timeout=60)
        return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"] / 8
    except (subprocess.SubprocessError, ValueError, KeyError):
        return None
    finally:
        if server.poll() is None:
            server.kill()
        server.wait(timeout=10)


# ---------------------------------------------------------------- jobs

def stop_process_groups(procs) -> None:
    """Kills each process's group (ps-train style children run in their own) and reaps it."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait(timeout=10)



class Namespaces:
    """Two network namespaces joined by a veth pair: <p>s at 10.79.0.1 (servers) and <p>w
    at 10.79.0.2 (workers), both ends shaped to `rate` by tbf. close() deletes both."""

    def __init__(self, rate: str):
        self.prefix = f"psv{os.getpid() % 100000}"
        self.server, self.worker = f"{self.prefix}s", f"{self.prefix}w"
        try:
            for ns in (self.server, self.worker):
                self._ip("netns", "add", ns)
                self._ip("-n", ns, "link", "set", "lo", "up")
            self._ip("-n", self.server, "link", "add", "name", "vs", "type", "veth", "peer",
                     "name", "vw", "netns", self.worker)
            for ns, dev, addr in ((self.server, "vs", "10.79.0.1"),
                                  (self.worker, "vw", "10.79.0.2")):
                self._ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
                self._ip("-n", ns, "link", "set", dev, "up")
                # burst: at least rate x 4 ms; queue: 50 ms at the rate
                bits = {"100mbit": 100e6, "1gbit": 1e9}[rate]
                burst = max(32 * 1024, int(bits / 8 * 0.004))
                subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev,
                                "root", "tbf", "rate", rate, "burst", str(burst), "latency",
                                "50ms"], check=True, capture_output=True, timeout=30)
        except BaseException:
            self.close()
            raise

    def bandwidth(self, seconds: int = 2) -> float | None:
        """iperf3 single stream from the workers' namespace to the servers': bytes/s."""
        iperf3 = shutil.which("iperf3")
        if iperf3 is None:
            return None
        server = subprocess.Popen(["ip", "netns", "exec", self.server, iperf3, "-s", "-1",
                                   "-B", "10.79.0.1", "-p", "5318"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            out = subprocess.run(["ip", "netns", "exec", self.worker, iperf3, "-c", "10.79.0.1",
                                  "-p", "5318", "-t", str(seconds), "-J"], capture_output=True,
                                 text=True, timeout=seconds + 30)
            return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"] / 8
        except (subprocess.SubprocessError, ValueError, KeyError):
            return None
        finally:
            if server.poll() is None:
                server.kill()
            server.wait(timeout=10)

    @staticmethod
    def _ip(*args: str) -> None:
        done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")

    def close(self) -> None:
        for ns in (self.server, self.worker):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def netns_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    try:
        Namespaces("100mbit").close()
    except (RuntimeError, subprocess.SubprocessError) as e:
        return str(e).splitlines()[0]
    return None


# The programs' flags of the switches E12 and E13 (docs/scaling.md): pulls overlapping the
# next forward (transport.pull_overlap: ps-worker and ps-server --pull-overlap, the shard's
# window --pull-window-kb) and sufficient factors pushed (--sufficient-factors) or broadcast
# (transport.sufficient_factors: broadcast; the flag below is the one its branch is to give
# ps-worker: a build whose --help does not list a flag skips the point, saying so).
OVERLAP_FLAGS = {"worker": ["--pull-overlap"], "server": ["--pull-overlap"]}
FACTOR_FLAGS = {"push": ["--sufficient-factors"],
                "broadcast": ["--sufficient-factors", "--factor-broadcast"]}
# E1b, E13 on a CPU: the shard's and the worker's rebuild (FactorProduct) per flop, where a
# run's calibration has none (runs since 2026-12-07 measure it at LeNet's shape) (bench/scaling_calibrate.py on this
# machine: bench/data/scaling_calibration_gpu.json)
FACTOR_CALIBRATION = ROOT / "bench/data/scaling_calibration_gpu.json"


def switch_flags(switches: dict | None, who: str) -> list[str]:
    """The programs' flags for issue 32's switches of a point: the shard's apply threads
    (ps-server --threads; given as 1 where a point names none, the model's default, since
    ps-server's own default is `auto`), 16-bit pushes and pulls (ps-worker), E12's overlap
    (both, the shard's window) and E13's factors (ps-worker)."""
    switches = switches or {}
    flags = []
    if switches.get("pull_overlap"):
        flags += OVERLAP_FLAGS[who]
        if who == "server" and "pull_window_kb" in switches:
            flags += ["--pull-window-kb", str(switches["pull_window_kb"])]
    if who == "server":
        return ["--threads", str(switches.get("threads", 1))] + flags
    if "compression" in switches:
        flags += ["--compression", switches["compression"]]
    if "pull_compression" in switches:
        flags += ["--pull-compression", switches["pull_compression"]]
    if "sufficient_factors" in switches:
        flags += FACTOR_FLAGS[switches["sufficient_factors"]]
    if switches.get("factor_right", "every_shard") != "every_shard":
        flags += ["--factor-right", switches["factor_right"]]
    return flags


def switch_label(switches: dict | None) -> str:
    """" threads=2", " fp16/fp16" (push/pull), " overlap", " factors=push" or "" for a
    point without switches."""
    switches = switches or {}
    out = f" threads={switches['threads']}" if "threads" in switches else ""
    if "compression" in switches or "pull_compression" in switches:
        out += (f" {switches.get('compression', 'none')}/"
                f"{switches.get('pull_compression', 'none')}")
    if switches.get("pull_overlap"):
        out += " overlap"
    if "sufficient_factors" in switches:
        out += f" factors={switches['sufficient_factors']}"
    if "factor_right" in switches:
        out += f" right={switches['factor_right']}"
    return out


def missing_flags(build: pathlib.Path, switches: dict) -> list[str]:
    """The flags of a point's switches that this build's ps-worker or ps-server does not
    list in --help (a feature not built yet)."""
    missing = []
    for who in ("worker", "server"):
        wanted = [f for f in switch_flags(switches, who) if f.startswith("--")]
        text = subprocess.run([str(build / f"bin/ps-{who}"), "--help"], capture_output=True,
                              text=True).stdout
        missing += [f"ps-{who} {f}" for f in wanted if f not in text]
    return missing


def run_job(build: pathlib.Path, solver: pathlib.Path, workers: int, servers: int, mode: str,
            staleness: int, ns: Namespaces | None = None, timeout: float = 300,
            ipc_folder: pathlib.Path | None = None, switches: dict | None = None) -> dict:
    """Servers, then workers, each in its own process group; all stopped on return.
    Returns per-worker steady images/s from the workers' train events, those events
    themselves and the CPU seconds of every server and worker. With `ipc_folder` the
    servers bind Unix sockets there (payloads through shared memory, the programs'
    default over ipc) instead of loopback tcp."""
    bind = "tcp://10.79.0.1:0" if ns else "tcp://127.0.0.1:0"
    srv_pre = ["ip", "netns", "exec", ns.server] if ns else []
    wrk_pre = ["ip", "netns", "exec", ns.worker] if ns else []
    common = ["--solver", str(solver), "--mode", mode, "--staleness", str(staleness),
              "--job-key", "77", "--json"]
    if ns:
        from pstrain import keys
        folder = keys.make_keys(pathlib.Path(tempfile.mkdtemp(prefix="scaling-keys-")),
                                servers, workers)
        common += ["--keys", str(folder)]
    procs: list[subprocess.Popen] = []
    deadline = time.monotonic() + timeout
    bg = None
    cpu: dict[int, float] = {}     # CPU seconds of each process, sampled until it exits
    sampling = threading.Event()

    def sample_cpu() -> None:
        while not sampling.wait(0.05):
            for p in list(procs):
                c = cpu_seconds(p.pid)  # `ip netns exec` execs in place: the same pid
                if c is not None:
                    cpu[p.pid] = c
    threading.Thread(target=sample_cpu, daemon=True).start()
    try:
        endpoints = []
        for k in range(servers):
            address = f"ipc://{ipc_folder}/server-{k}" if ipc_folder else bind
            cmd = srv_pre + [str(build / "bin/ps-server"), "--shard", str(k), "--num-servers",
                             str(servers), "--workers", str(workers), "--bind", address] + common
            cmd += switch_flags(switches, "server")
            if k:
                cmd += ["--coordinator", endpoints[0]]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True, cwd=ROOT)
            procs.append(p)
            while True:
                line = p.stdout.readline()
                if not line:
                    raise RuntimeError(f"ps-server exited early: {p.stderr.read()[-800:]}")
                if line.startswith("{") and json.loads(line).get("event") == "listening":
                    endpoints.append(json.loads(line)["endpoint"])
                    break
        workers_p = []
        bg = Background()
        bg.pids += [p.pid for p in procs]
        for r in range(workers):
            cmd = wrk_pre + [str(build / "bin/ps-worker"), "--rank", str(r), "--workers",
                             str(workers), "--servers", ",".join(endpoints), "--threads", "1",
                             "--timeout-s", "120"] + common + switch_flags(switches, "worker")
            workers_p.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              text=True, start_new_session=True, cwd=ROOT))
            bg.pids.append(workers_p[-1].pid)
        procs += workers_p
        rates, waits, trains = [], [], []
        for r, p in enumerate(workers_p):
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            if p.returncode != 0:
                raise RuntimeError(f"worker {r} exited {p.returncode}: {err[-800:]}")
            events = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
            train = [e for e in events if e.get("event") == "train" and "images_per_second" in e]
            trains.append(train)
            rates.append(steady([e["images_per_second"] for e in train]))
            # the time this worker waited for pulls (PsClient::WaitPull), per iteration
            span = train[1]["iter"] - train[0]["iter"] if len(train) > 1 else 1
            waits.append(steady([e.get("pull_wait_seconds", 0.0) for e in train]) / span)
        background = bg.stop()
        time.sleep(0.1)
        iters = int(re.search(r"max_iter: (\d+)", solver.read_text()).group(1))
        return {"images_per_s": sum(rates), "per_worker": rates, "background": background,
                "pull_wait_s_per_iter": waits, "train_events": trains,
                "server_cpu_s": [cpu.get(p.pid) for p in procs[:servers]],
                "worker_cpu_s": [cpu.get(p.pid) for p in workers_p],
                "server_cpu_s_per_iter": sum(cpu.get(p.pid, 0.0)
                                             for p in procs[:servers]) / iters,
                "worker_cpu_s_per_iter": statistics.mean(cpu.get(p.pid, 0.0)
                                                         for p in workers_p) / iters}
    finally:
        sampling.set()
        if bg is not None:
            bg.stop()
        stop_process_groups(procs)
        if ns:
            shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------- main

def _server_stack(raw: dict, workers: int, params, calib: dict) -> float:
    """k_s of a shaped link: the servers' CPU in the job per byte of one worker's gradient
    less c_s (ps-bench's, over loopback); 2/β of loopback for rounds without it."""
    if raw.get("server_cpu_s_per_iter") is None:
        return 2 / calib["wire_bytes_per_s"]
    grad = 4.0 * sum(p.values for p in params)
    measured = raw["server_cpu_s_per_iter"] / (workers * grad)
    return max(0.0, measured - calib["server_ns_per_byte"] * 1e-9)


def predict_point(point: tuple, raw: dict, calib: dict, params, batch: int):
    """The model's two predictions for one measured round: (E6 from the one-process layer
    times and the measured load, compute measured with W ps-net time processes at once)."""
    link, net, w, s, mode, st = point[:6]
    switches = point[6] if len(point) > 6 else {}
    bw = calib["wire_bytes_per_s"] if link == "loopback" else \
        raw.get("link_bytes_per_s") or {"100mbit": 100e6, "1gbit": 1e9}[link] / 8
    base = dict(workers=w, servers=s, mode=mode, staleness=st, worker_bw=bw, server_bw=bw,
                latency_s=0.0, message_s=calib["message_us"] * 1e-6,
                server_byte_s=calib["server_ns_per_byte"] * 1e-9,
                worker_byte_s=calib["worker_ns_per_byte"] * 1e-9,
                kernel_byte_s=1 / calib["wire_bytes_per_s"], early_pull=True, cores=2,
                # ps-bench measured c_s over loopback; on the veth pair the server's own CPU
                # also carries its stack's work (k_s, docs/scaling.md E6c): measured in the
                # same job where the round has it, else two directions of loopback's k
                server_kernel_byte_s=0.0 if link == "loopback" else
                _server_stack(raw, w, params, calib),
                # the network namespaces: every shard in the server's, behind its one link
                server_hosts=0 if link == "loopback" else 1,
                # the tbf burst Namespaces sets: rate x 4 ms, at least 32 KiB
                burst_bytes=0.0 if link == "loopback" else
                max(32 * 1024, {"100mbit": 100e6, "1gbit": 1e9}[link] / 8 * 0.004),
                # the worker's stack on the veth pair, k = 1/β of loopback (E2b)
                link_kernel_byte_s=0.0 if link == "loopback" else
                1 / calib["wire_bytes_per_s"],
                background=raw["background"],
                # E14: CURVE on the shaped links (the jobs there run with --keys): its cap
                # on the I/O threads at both ends (far above these links) and its CPU in
                # E6b (runs with E8 constants take theirs instead). Runs before E14 have no
                # constant: 0, as they were predicted
                curve_byte_s=0.0 if link == "loopback" else
                calib.get("curve_ns_per_wire_byte", 0.0) * 1e-9,
                # E4''/E7b: pulls beside the pushes (runs 12 on); earlier runs measured
                # ssp/asp pulls answered whole behind the pushes (E4')
                streamed_pulls=calib.get("streamed_pulls", False))
    # E8: every thread's CPU per exchange and per byte, from ps-bench's threads (bsp with 2
    # worker threads for bsp points, asp with 1 for ssp and asp); absent in runs before it
    cpu = calib.get("cpu_bsp" if mode == "bsp" else "cpu_asp")
    if cpu:
        # c_s and c_w of the path (E2-E4) from the same threads' CPU: the server's per byte
        # of one worker's gradient, the worker's per byte and direction. (ps-bench's round
        # trip is now as fast as two iperf3 transfers, so the old split of its slope gives 0.)
        base.update(server_byte_s=cpu["server_ns_per_byte"] * 1e-9,
                    worker_byte_s=cpu["worker_ns_per_byte"] / 2 * 1e-9)
        import scaling_cpu
        base.update(scaling_cpu.e8_inputs(cpu, calib))
    # issue 32's switches the round ran with (docs/scaling.md, "Validation of the switches")
    if "threads" in switches:
        base["server_threads"] = switches["threads"]
    if "compression" in switches:
        base["push_value_bytes"] = costmodel.value_bytes(switches["compression"])
    if "pull_compression" in switches:
        base["pull_value_bytes"] = costmodel.value_bytes(switches["pull_compression"])
    if switches.get("pull_overlap"):          # E12
        base.update(pull_overlap=True,
                    pull_window_bytes=switches.get("pull_window_kb", 2048) * 1024.0)
    if "sufficient_factors" in switches:      # E1b, E13: the rebuilds at this CPU's c_g (the
        # FactorProduct of the programs: the shard's and every replica's)
        flop = calib.get("server_ns_per_flop") or \
            json.loads(FACTOR_CALIBRATION.read_text())["server_ns_per_flop"]
        base.update(sufficient_factors=True, server_flop_s=flop * 1e-9)
        # the factors travel in the pushes' 16 bits with fp16/bf16, both ways (ps-worker)
        if switches.get("compression") in ("fp16", "bf16"):
            base["factor_value_bytes"] = 2.0
        if switches["sufficient_factors"] == "broadcast":
            # each worker rebuilds the step of every pusher (the same GEMM) and applies it
            # with the shard's update code (c_s per float32 byte)
            base.update(factor_broadcast=True, worker_flop_s=flop * 1e-9,
                        worker_apply_byte_s=base["server_byte_s"],
                        factor_right=switches.get("factor_right", "every_shard"))
    formula = costmodel.predict([costmodel.LayerTime(*l) for l in raw["layers"]], params, batch,
                                costmodel.Cluster(timed_background=raw["timed_background"],
                                                  **base))
    # each of the W copies was timed beside W - 1 others and the other programs then
    together_bg = raw.get("together_background", raw["timed_background"]) + w - 1
    measured = costmodel.predict([costmodel.LayerTime(*l) for l in raw["layers_together"]],
                                 params, batch,
                                 costmodel.Cluster(timed_background=together_bg, **base))
    in_job = measured
    if raw.get("pull_wait_s_per_iter"):
        # the compute inside the job: a worker's iteration less its wait for pulls, in the
        # proportions of the one-process layer times; the model then predicts what the
        # communication adds (E2-E5, E6c, E7) and nothing about the contention (E6, E6b)
        # (bsp: the last worker to arrive at the barrier, the one that waited least; the
        # others' waits include it)
        busy = (max if mode == "bsp" else statistics.mean)(
            batch / r - pw for r, pw in zip(raw["per_worker"], raw["pull_wait_s_per_iter"]))
        total = sum(l[1] + l[2] for l in raw["layers"])
        k = busy * 1e3 / total
        in_job = costmodel.predict([costmodel.LayerTime(l[0], l[1] * k, l[2] * k)
                                    for l in raw["layers"]], params, batch,
                                   costmodel.Cluster(compute_in_job=True,
                                                     timed_background=raw["timed_background"],
                                                     **base))
    return formula, measured, in_job


def fill(row: dict, calib: dict, params, batch: int) -> dict:
    """Adds both predictions (medians over the row's rounds) and their errors to a row."""
    point = (row["link"], row["net"], row["workers"], row["servers"], row["mode"],
             row["staleness"], row.get("switches", {}))
    preds = [predict_point(point, r, calib, params, batch) for r in row["rounds"]]
    m = row["measured_images_per_s"] = statistics.median(r["measured"] for r in row["rounds"])
    row["background"] = statistics.median(r["background"] for r in row["rounds"])
    cpu = [r["server_cpu_s_per_iter"] for r in row["rounds"] if "server_cpu_s_per_iter" in r]
    if cpu:  # the servers' CPU in the job per byte of one worker's gradient (E6c check)
        grad = 4.0 * sum(p.values for p in params)
        row["server_ns_per_byte_job"] = statistics.median(cpu) / (row["workers"] * grad) * 1e9
    for i, key in enumerate(("formula", "together", "injob")):
        p = statistics.median(pr[i].images_per_s for pr in preds)
        row[f"predicted_{key}"] = p
        row[f"error_{key}"] = (p - m) / m
        row[f"bottleneck_{key}"] = preds[len(preds) // 2][i].bottleneck
    return row


def recompute(path: pathlib.Path, cpu_from: pathlib.Path | None = None,
              balance_ms: float | None = None) -> dict:
    """Predictions of the current model for the rounds measured in an earlier --json-out;
    `cpu_from`: E8's constants from another run's calibration (runs before E8 lack them)."""
    data = json.loads(path.read_text())
    if cpu_from is not None:
        other = json.loads(cpu_from.read_text())["calibration"]
        keys = ("cpu_bsp", "cpu_asp", "job_comm_factor", "refill_per_share", "balance_ms")
        data["calibration"].update({k: other[k] for k in keys if k in other})
    if balance_ms is not None:
        data["calibration"]["balance_ms"] = balance_ms
    nets = {"LeNet": (costmodel.net_params(ROOT / "configs/nets/lenet_deploy.prototxt"), 32),
            "CIFAR-10 quick": (costmodel.net_params(CIFAR_NET), 50)}
    for row in data["rows"]:
        fill(row, data["calibration"], *nets[row["net"]])
    return data


def report(rows: list[dict], load_before: str, load_after: str, elapsed: float,
           markdown: bool) -> None:
    if markdown:
        print(f"load average before {load_before}, after {load_after}; {elapsed:.0f} s\n")
        print("| link | net | W | S | mode | other load | measured images/s | predicted (E6) |"
              " error | predicted (W timed at once) | error | predicted (compute in the job) |"
              " error | server CPU ns/byte | bottleneck |")
        print("| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
              " ---: | ---: | --- |")
        for r in rows:
            mode = r["mode"] + (f" s={r['staleness']}" if r["mode"] == "ssp" else "") + \
                switch_label(r.get("switches"))
            print(f"| {r['link']} | {r['net']} b{r['batch']} | {r['workers']} | {r['servers']} |"
                  f" {mode} | {r['background']:.1f} | {r['measured_images_per_s']:.0f} | "
                  f"{r['predicted_formula']:.0f} | {100 * r['error_formula']:+.1f}% | "
                  f"{r['predicted_together']:.0f} | {100 * r['error_together']:+.1f}% | "
                  f"{r['predicted_injob']:.0f} | {100 * r['error_injob']:+.1f}% | "
                  f"{r.get('server_ns_per_byte_job', float('nan')):.2f} | "
                  f"{r['bottleneck_formula']} |")
    for key in ("formula", "together", "injob"):
        errors = [abs(r[f"error_{key}"]) for r in rows]
        print(f"{len(rows)} points, prediction {key}: mean |error| "
              f"{100 * statistics.mean(errors):.1f}%, worst {100 * max(errors):.1f}%, "
              f"{sum(e < 0.15 for e in errors)} under 15% ({elapsed:.0f} s)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--quick", action="store_true", help="fewer points, shorter runs")
    ap.add_argument("--rounds", type=int, default=3,
                    help="measure every point this many times (median)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json-out", type=pathlib.Path)
    ap.add_argument("--no-netns", action="store_true")
    ap.add_argument("--only-netns", action="store_true", help="the shaped-link points only")
    ap.add_argument("--switches", action="store_true",
                    help="issue 32's switches on the shaped links: LeNet W = 2 bsp with the "
                         "shard on 2 threads and with fp16 both ways, beside the same point "
                         "without them (needs root)")
    ap.add_argument("--overlap-factors", action="store_true",
                    help="E12 and E13 on the shaped links: LeNet W = 2 bsp with pulls "
                         "overlapping the next forward, with sufficient factors pushed and "
                         "broadcast, beside the same point without them (needs root; a point "
                         "whose flags this build lacks is skipped)")
    ap.add_argument("--factor-right", action="store_true",
                    help="R pushed once on the shaped links: LeNet W = 2 bsp on 2 shards with "
                         "factor broadcasting, R to every shard and to its holder only "
                         "(transport.factor_right); the shards share the server side of the "
                         "link, so the forwards cross it too (needs root)")
    ap.add_argument("--only-switches", metavar="TEXT",
                    help="with --switches or --overlap-factors: only the points whose switch "
                         "label (as printed, e.g. 'factors=broadcast') contains TEXT")
    ap.add_argument("--measure-links", action="store_true",
                    help="β of a shaped link from iperf3 through it (default: its tbf rate)")
    ap.add_argument("--recompute", type=pathlib.Path, metavar="JSON",
                    help="no measuring: the current model's predictions for the rounds of an "
                         "earlier --json-out")
    ap.add_argument("--cpu-from", type=pathlib.Path, metavar="JSON",
                    help="with --recompute: E8's CPU constants from this run's calibration")
    ap.add_argument("--balance-ms", type=float, metavar="MS",
                    help="with --recompute: E10's latency λ (runs before E10 measured none; "
                         "0 leaves E10 out)")
    args = ap.parse_args()
    if args.recompute:
        data = recompute(args.recompute, args.cpu_from, args.balance_ms)
        report(data["rows"], data["load_before"], data["load_after"], data.get("seconds", 0),
               args.markdown)
        return 0
    build = (ROOT / args.build).resolve()
    started = time.monotonic()
    load_before = loadavg()
    with tempfile.TemporaryDirectory(prefix="scaling-") as tmp:
        tmp = pathlib.Path(tmp)
        iters = 60 if args.quick else 120
        lenet = write_solver(tmp / "lenet", 32, iters, iters // 6)
        # at 100 Mbit/s an iteration takes ~0.3 s a worker: fewer of them
        lenet_slow = write_solver(tmp / "lenet_slow", 32, iters // 3, iters // 15)
        cifar = write_cifar_solver(tmp / "cifar", 50, 30 if args.quick else 48, 6)
        # Calibration
        time_net(build, lenet, tmp / "lenet_time.jsonl", 40)
        time_net(build, cifar, tmp / "cifar_time.jsonl", 10)
        rtt_small, srv_small = ps_bench_rtt(build, "4K", tmp)
        rtt_big, srv_big = ps_bench_rtt(build, "16M", tmp)
        per_byte = max(0.0, (rtt_big - rtt_small) / 16e6)   # push + apply + pull, per byte
        iperf = iperf3_bytes_per_s()
        wire = iperf if iperf else 2.0 / per_byte           # no iperf3: all of it is the wire
        server_byte = min(max(0.0, (srv_big - srv_small) / 16e6), max(0.0, per_byte - 2 / wire))
        worker_byte = max(0.0, (per_byte - 2.0 / wire - server_byte) / 2)
        message = rtt_small / 4                              # 4 message costs per round trip
        import scaling_cpu
        cpu_calib = scaling_cpu.cpu_calibration(build)
        # c_g at the job's shape: FactorProduct on one 1 MiB chunk of LeNet's ip1 (500 x
        # 800: 328 rows touched), batch 32, as the shard and the replicas rebuild it
        import scaling_calibrate
        cpu_calib["server_ns_per_flop"] = scaling_calibrate.factor_flop_ns(build, "328x32x800")
        calib = {"lenet_compute_ms": None, "rtt_4k_us": rtt_small * 1e6,
                 "rtt_16m_ms": rtt_big * 1e3, "per_byte_ns": per_byte * 1e9,
                 "iperf3_gbyte_s": iperf / 1e9 if iperf else None,
                 "server_ns_per_byte": server_byte * 1e9, "worker_ns_per_byte": worker_byte * 1e9,
                 "server_cpu_4k_us": srv_small * 1e6, "server_cpu_16m_ms": srv_big * 1e3,
                 "message_us": message * 1e6, "wire_bytes_per_s": wire, **cpu_calib}
        nets = {
            "LeNet": (costmodel.load_layer_times(tmp / "lenet_time.jsonl"),
                      costmodel.net_params(ROOT / "configs/nets/lenet_deploy.prototxt"), 32,
                      lenet),
            "CIFAR-10 quick": (costmodel.load_layer_times(tmp / "cifar_time.jsonl"),
                               costmodel.net_params(CIFAR_NET), 50, cifar),
        }
        calib.update(scaling_cpu.job_calibration(
            build, write_solver(tmp / "lenet_cal", 32, 240, 30), calib,
            4.0 * sum(p.values for p in nets["LeNet"][1])))
        calib["lenet_compute_ms"] = sum(l.forward_ms + l.backward_ms for l in nets["LeNet"][0])
        calib["cifar_compute_ms"] = sum(l.forward_ms + l.backward_ms
                                        for l in nets["CIFAR-10 quick"][0])
        print("calibration: " + json.dumps({k: round(v, 3) if isinstance(v, float) else v
                                            for k, v in calib.items()}), file=sys.stderr)
        points = [("loopback", "LeNet", w, s, m, st)
                  for (w, s, m, st) in [(1, 1, "bsp", 0), (2, 1, "bsp", 0), (3, 1, "bsp", 0),
                                        (4, 1, "bsp", 0), (2, 2, "bsp", 0), (4, 2, "bsp", 0),
                                        (2, 1, "ssp", 2), (4, 1, "ssp", 2), (2, 1, "asp", 0),
                                        (4, 1, "asp", 0)]]
        points += [("loopback", "CIFAR-10 quick", w, 1, "bsp", 0) for w in (1, 2)]
        why_not = "--no-netns" if args.no_netns else netns_unavailable()
        if why_not is None:
            for rate in ("100mbit", "1gbit"):
                points += [(rate, "LeNet", w, 1, m, 0) for (w, m) in
                           [(1, "bsp"), (2, "bsp"), (2, "asp")]]
        else:
            print(f"network-namespace points skipped: {why_not}", file=sys.stderr)
        if args.only_netns:
            points = [p for p in points if p[0] != "loopback"]
        if args.switches and why_not is None:
            points = [(rate, "LeNet", 2, 1, "bsp", 0, sw) for rate in ("100mbit", "1gbit")
                      for sw in ({}, {"threads": 2},
                                 {"compression": "fp16", "pull_compression": "fp16"})]
        if args.overlap_factors and why_not is None:
            points = [(rate, "LeNet", 2, 1, "bsp", 0, sw) for rate in ("100mbit", "1gbit")
                      for sw in ({}, {"pull_overlap": True, "pull_window_kb": 2048},
                                 {"sufficient_factors": "push"},
                                 {"sufficient_factors": "broadcast"},
                                 {"pull_overlap": True, "pull_window_kb": 2048,
                                  "sufficient_factors": "broadcast"},
                                 # E13 in 16 bits: fp16 pushes carry fp16 factors, relayed
                                 {"sufficient_factors": "broadcast", "compression": "fp16"})]
        if args.factor_right and why_not is None:
            points = [(rate, "LeNet", 2, 2, "bsp", 0, sw) for rate in ("100mbit", "1gbit")
                      for sw in ({"sufficient_factors": "broadcast"},
                                 {"sufficient_factors": "broadcast",
                                  "factor_right": "holder"})]
        if args.switches or args.overlap_factors or args.factor_right:
            if args.only_switches:
                points = [p for p in points if args.only_switches in switch_label(p[6])]
            kept = []
            for point in points:
                lacks = missing_flags(build, point[6] if len(point) > 6 else {})
                if lacks:
                    print(f"{point[0]} LeNet{switch_label(point[6])}: skipped, this build "
                          f"has no {', '.join(lacks)}", file=sys.stderr)
                else:
                    kept.append(point)
            points = kept
        if args.quick:
            points = points[::2]
        rows = []
        for link, net, w, s, mode, st, *rest in points:
            switches = rest[0] if rest else {}
            layers, params, batch, solver = nets[net]
            if link == "100mbit":
                solver = lenet_slow
            rounds = []
            for _ in range(args.rounds):
                # the compute time is taken right before each job: the machine is shared
                iters = 15 if net == "LeNet" else 4
                timed_bg = time_net(build, solver, tmp / "now.jsonl", iters)
                layers = costmodel.load_layer_times(tmp / "now.jsonl")
                together_bg = timed_bg
                if w > 1:  # the same compute, W copies at once: contention measured
                    together_bg = time_net(build, solver, tmp / "together.jsonl", iters, copies=w)
                    together = costmodel.load_layer_times(tmp / "together.jsonl")
                else:
                    together = layers
                ns = None if link == "loopback" else Namespaces(link)
                link_bw = None
                try:
                    if ns and args.measure_links:
                        link_bw = ns.bandwidth()
                    job = run_job(build, solver, w, s, mode, st, ns, switches=switches)
                finally:
                    if ns:
                        ns.close()
                rounds.append({"measured": job["images_per_s"], "background": job["background"],
                               "timed_background": timed_bg,
                               "together_background": together_bg,
                               "link_bytes_per_s": link_bw,
                               "server_cpu_s_per_iter": job["server_cpu_s_per_iter"],
                               "per_worker": job["per_worker"],
                               "pull_wait_s_per_iter": job["pull_wait_s_per_iter"],
                               "worker_cpu_s_per_iter": job["worker_cpu_s_per_iter"],
                               "layers": [[l.name, l.forward_ms, l.backward_ms] for l in layers],
                               "layers_together": [[l.name, l.forward_ms, l.backward_ms]
                                                   for l in together]})
            row = fill({"link": link, "net": net, "workers": w, "servers": s, "mode": mode,
                        **({"switches": switches} if switches else {}),
                        "staleness": st, "batch": batch, "rounds": rounds}, calib, params, batch)
            rows.append(row)
            print(f"{link:8s} {net:14s} W={w} S={s} {mode}{st if mode == 'ssp' else ''}"
                  f"{switch_label(switches)}: "
                  f"measured {row['measured_images_per_s']:7.1f} predicted (E6) "
                  f"{row['predicted_formula']:7.1f} ({100 * row['error_formula']:+5.1f}%), "
                  f"(W timed at once) {row['predicted_together']:7.1f} "
                  f"({100 * row['error_together']:+5.1f}%), (compute in the job) "
                  f"{row['predicted_injob']:7.1f} ({100 * row['error_injob']:+5.1f}%), "
                  f"{row['bottleneck_formula']}; "
                  f"other busy autogroups {row['background']:.1f}; server CPU "
                  f"{row.get('server_ns_per_byte_job', 0):.2f} ns/byte", file=sys.stderr)
            if args.json_out:  # after every point: a stopped run keeps what it measured
                args.json_out.write_text(json.dumps({"calibration": calib, "rows": rows,
                                                     "load_before": load_before,
                                                     "load_after": loadavg(),
                                                     "seconds": time.monotonic() - started},
                                                    separators=(",", ":")))
    load_after = loadavg()
    elapsed = time.monotonic() - started
    if args.json_out:
        args.json_out.write_text(json.dumps({"calibration": calib, "rows": rows,
                                             "load_before": load_before,
                                             "load_after": load_after, "seconds": elapsed},
                                            separators=(",", ":")))
    report(rows, load_before, load_after, elapsed, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
