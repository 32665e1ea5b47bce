#!/usr/bin/env python3
"""LeNet on Fashion-MNIST: single-process training against parameter-server
training, from the built programs.

  (a) `ps-net train`, 1 thread, batch 64;
  (b) PS, 1 worker (1 thread, batch 64) + 1 server, bsp — and the ratio b/a;
  (c) PS, 2 workers (1 thread each, batch 32 each = global 64) + 1 server,
      bsp, ssp (staleness 2) and asp — images/s over both workers.

Solver: configs/nets/lenet_solver.prototxt with max_iter --iters (300), no
test, no snapshot but the final one, display every --display iterations.
Each round runs every configuration once, in turn (so a round's ratios are
taken under the same machine load); --rounds rounds; medians are reported.

Two figures per run:
  * steady: from the "train" events — ps-net's iters_per_second, the PS
    workers' images_per_second (summed over workers) — over every display
    interval but the first (start-up, first pulls);
  * wall: iterations x global batch / wall time of the whole job, from the
    first process started to the last one ended (start-up, net construction,
    LMDB open, final snapshot included).
Beside them, per iteration: the CPU time of all the run's processes (user +
system, every thread: the PS job's server and ZeroMQ I/O threads included),
and for PS runs the time the workers waited for pulls (PsClient::WaitPull);
and of the training thread (the main thread of ps-net / each ps-worker, from
/proc/PID/schedstat and /proc/PID/status): its CPU time, the time it was
runnable but waiting for a CPU (run queue), and how often it was preempted
(whole run, start-up included, divided by the iterations).

usage: python3 bench/ps_lenet.py [--build build] [--rounds 5] [--iters 300] [--markdown]
"""
import argparse
import json
import os
import pathlib
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from ps_job import run_job  # noqa: E402

SOLVER = ROOT / "configs/nets/lenet_solver.prototxt"
NET = ROOT / "configs/nets/lenet_train_test.prototxt"


def write_solver(folder: pathlib.Path, batch: int, iters: int, display: int) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    net = NET.read_text()
    net, n = re.subn(r"batch_size: 64", f"batch_size: {batch}", net)
    assert n == 1
    net = net.replace('"data/fashion-mnist', f'"{ROOT}/data/fashion-mnist')
    (folder / "net.prototxt").write_text(net)
    lines = []
    for line in SOLVER.read_text().splitlines():
        key = line.split(":")[0].strip()
        if key in ("net", "test_iter", "test_interval", "max_iter", "snapshot",
                   "snapshot_prefix", "display"):
            continue
        lines.append(line)
    lines += [f'net: "{folder}/net.prototxt"', f"max_iter: {iters}", "snapshot: 0",
              f'snapshot_prefix: "{folder}/snap"', f"display: {display}"]
    solver = folder / "solver.prototxt"
    solver.write_text("\n".join(lines) + "\n")
    return solver


def children_cpu_s() -> float:
    """User + system CPU seconds of every ended child process so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class TrainThreadWatch:
    """Samples, every 50 ms, the main (training) thread of each child process
    named ps-net or ps-worker: /proc/PID/schedstat (CPU time, time spent
    runnable but waiting for a CPU) and /proc/PID/status (context switches).
    The last sample of each process counts (taken < 50 ms before it ended)."""

    NAMES = ("ps-net", "ps-worker")

    def __init__(self):
        self.last: dict[int, tuple] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self):
        me = os.getpid()
        while not self._stop.wait(0.05):
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    stat = open(f"/proc/{entry}/stat").read()
                    comm = stat[stat.index("(") + 1:stat.rindex(")")]
                    ppid = int(stat[stat.rindex(")") + 2:].split()[1])
                    if ppid != me or comm not in self.NAMES:
                        continue
                    cpu_ns, wait_ns, _ = (int(x) for x in
                                          open(f"/proc/{entry}/schedstat").read().split())
                    status = open(f"/proc/{entry}/status").read()
                except (OSError, ValueError):
                    continue
                switches = {k: int(v) for k, v in re.findall(
                    r"^(voluntary_ctxt_switches|nonvoluntary_ctxt_switches):\s+(\d+)", status,
                    re.M)}
                self.last[int(entry)] = (cpu_ns, wait_ns, switches.get("nonvoluntary_ctxt_switches", 0))

    def per_iter(self, iters: int) -> dict:
        """Summed over the watched processes, per iteration of each."""
        n = max(1, len(self.last))
        cpu = sum(v[0] for v in self.last.values()) / n
        wait = sum(v[1] for v in self.last.values()) / n
        preempted = sum(v[2] for v in self.last.values()) / n
        return {"train_thread_cpu_ms_per_iter": cpu / iters / 1e6,
                "train_thread_runqueue_ms_per_iter": wait / iters / 1e6,
                "train_thread_preemptions_per_iter": preempted / iters}


def steady(values: list) -> float:
    """Mean of the display intervals after the first."""
    return statistics.mean(values[1:]) if len(values) > 1 else float("nan")


def run_single(build: pathlib.Path, solver: pathlib.Path, batch: int, iters: int) -> dict:
    start, cpu = time.monotonic(), children_cpu_s()
    out = subprocess.run([str(build / "bin/ps-net"), "train", "--solver", str(solver),
                          "--threads", "1", "--json"], capture_output=True, text=True,
                         timeout=900, cwd=ROOT)
    wall = time.monotonic() - start
    if out.returncode != 0:
        raise RuntimeError(f"ps-net train failed: {out.stderr[-800:]}")
    events = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    rates = [e["iters_per_second"] for e in events
             if e.get("event") == "train" and "iters_per_second" in e]
    return {"steady_images_per_s": steady(rates) * batch, "wall_images_per_s": iters * batch / wall,
            "wall_s": wall, "cpu_ms_per_iter": (children_cpu_s() - cpu) / iters * 1e3}


def run_ps(build: pathlib.Path, solver: pathlib.Path, workers: int, batch: int, iters: int,
           mode: str, staleness: int, transport: str = "tcp") -> dict:
    """A PS job with 1 server. transport "tcp" (127.0.0.1) or "ipc" (Unix sockets in a
    fresh 0700 folder; payloads of 16 KB or more through shared-memory rings, the
    default of ps-server and ps-worker)."""
    start, cpu = time.monotonic(), children_cpu_s()
    with tempfile.TemporaryDirectory(prefix="ps-lenet-ipc-") as sockets:
        bind = "tcp://127.0.0.1:0" if transport == "tcp" else f"ipc://{sockets}/server-{{k}}"
        result = run_job(build, solver, workers=workers, servers=1, mode=mode,
                         staleness=staleness, timeout=900, cwd=ROOT, bind=bind)
    wall = time.monotonic() - start
    bad = {k: v for k, v in result.returncodes.items() if v != 0}
    if bad:
        raise RuntimeError(f"PS job failed: {bad}: "
                           + " | ".join(result.stderr[k][-600:] for k in bad))
    total = 0.0
    for r in range(workers):
        rates = [e["images_per_second"] for e in result.of("train", f"worker-{r}")]
        total += steady(rates)
    pull_wait = sum(e.get("pull_wait_seconds", 0) for e in result.of("train"))
    return {"steady_images_per_s": total, "wall_images_per_s": iters * batch * workers / wall,
            "wall_s": wall, "pull_wait_s": pull_wait,
            "pull_wait_ms_per_iter": pull_wait / (iters * workers) * 1e3,
            "cpu_ms_per_iter": (children_cpu_s() - cpu) / iters * 1e3}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--display", type=int, default=50)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--ab-only", action="store_true",
                        help="only configurations a and b (the 1-worker target)")
    parser.add_argument("--baseline", metavar="BUILD",
                        help="also run b with BUILD's programs (a build of an older commit) "
                             "right after b, in the same round")
    args = parser.parse_args()
    build = (ROOT / args.build).resolve()
    baseline = (ROOT / args.baseline).resolve() if args.baseline else None
    with tempfile.TemporaryDirectory(prefix="ps-lenet-") as tmp:
        tmp = pathlib.Path(tmp)
        configs = [
            ("a: ps-net train, b64", lambda: run_single(
                build, write_solver(tmp / "a", 64, args.iters, args.display), 64, args.iters)),
            ("b: PS 1 worker b64, bsp", lambda: run_ps(
                build, write_solver(tmp / "b", 64, args.iters, args.display), 1, 64, args.iters,
                "bsp", 0)),
            ("c: PS 2 workers b32, bsp", lambda: run_ps(
                build, write_solver(tmp / "c", 32, args.iters, args.display), 2, 32, args.iters,
                "bsp", 0)),
            ("c: PS 2 workers b32, bsp, ipc + shared memory", lambda: run_ps(
                build, write_solver(tmp / "c", 32, args.iters, args.display), 2, 32, args.iters,
                "bsp", 0, transport="ipc")),
            ("c: PS 2 workers b32, ssp s=2", lambda: run_ps(
                build, write_solver(tmp / "c", 32, args.iters, args.display), 2, 32, args.iters,
                "ssp", 2)),
            ("c: PS 2 workers b32, asp", lambda: run_ps(
                build, write_solver(tmp / "c", 32, args.iters, args.display), 2, 32, args.iters,
                "asp", 0)),
        ]
        if baseline:
            configs.insert(2, ("b (baseline build): PS 1 worker b64, bsp", lambda: run_ps(
                baseline, write_solver(tmp / "b0", 64, args.iters, args.display), 1, 64,
                args.iters, "bsp", 0)))
        if args.ab_only:
            configs = [c for c in configs if c[0].startswith(("a:", "b:", "b (baseline"))]
        load_before = open("/proc/loadavg").read().split()[:3]
        results = {name: [] for name, _ in configs}
        ratios_steady, ratios_wall = [], []
        for round_ in range(args.rounds):
            for name, fn in configs:
                with TrainThreadWatch() as watch:
                    r = fn()
                r.update(watch.per_iter(args.iters))
                results[name].append(r)
                extra = (f", pull wait {r['pull_wait_ms_per_iter']:.2f} ms/it"
                         if "pull_wait_ms_per_iter" in r else "")
                print(f"round {round_}: {name}: steady {r['steady_images_per_s']:.0f} img/s, "
                      f"wall {r['wall_images_per_s']:.0f} img/s ({r['wall_s']:.2f} s), "
                      f"cpu {r['cpu_ms_per_iter']:.1f} ms/it{extra}; training thread: cpu "
                      f"{r['train_thread_cpu_ms_per_iter']:.1f} ms/it, run queue "
                      f"{r['train_thread_runqueue_ms_per_iter']:.2f} ms/it, preempted "
                      f"{r['train_thread_preemptions_per_iter']:.1f} /it", file=sys.stderr)
            a, b = results[configs[0][0]][-1], results[configs[1][0]][-1]
            ratios_steady.append(b["steady_images_per_s"] / a["steady_images_per_s"])
            ratios_wall.append(b["wall_images_per_s"] / a["wall_images_per_s"])
        load_after = open("/proc/loadavg").read().split()[:3]
    print(f"load average before: {' '.join(load_before)}, after: {' '.join(load_after)}",
          file=sys.stderr)
    med = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
    if args.markdown:
        print(f"{args.iters} iterations, global batch 64, medians of {args.rounds} rounds "
              f"(load average before {' '.join(load_before)}, after {' '.join(load_after)})\n")
        print("| configuration | steady images/s | steady it/s | wall images/s | wall s "
              "| CPU ms/it | pull wait ms/it | train thread CPU ms/it | run queue ms/it "
              "| preempted /it |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for name, _ in configs:
            rs = results[name]
            s = med(rs, "steady_images_per_s")
            wait = (f"{med(rs, 'pull_wait_ms_per_iter'):.2f}" if "pull_wait_ms_per_iter" in rs[0]
                    else "-")
            print(f"| {name} | {s:.0f} | {s / 64:.1f} | {med(rs, 'wall_images_per_s'):.0f} | "
                  f"{med(rs, 'wall_s'):.2f} | {med(rs, 'cpu_ms_per_iter'):.1f} | {wait} | "
                  f"{med(rs, 'train_thread_cpu_ms_per_iter'):.2f} | "
                  f"{med(rs, 'train_thread_runqueue_ms_per_iter'):.2f} | "
                  f"{med(rs, 'train_thread_preemptions_per_iter'):.1f} |")
        print(f"\nb / a (median of per-round ratios): steady {statistics.median(ratios_steady):.3f}"
              f" ({', '.join(f'{x:.3f}' for x in ratios_steady)}); wall "
              f"{statistics.median(ratios_wall):.3f} ({', '.join(f'{x:.3f}' for x in ratios_wall)})")
    else:
        for name, _ in configs:
            print(name, json.dumps(results[name]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
