#!/usr/bin/env python3
"""Load-robust companion of net_time.py: CPU time per forward+backward
iteration of `ps-net time`, 1 thread.

On a shared, overloaded machine a single-threaded process waits for a core,
so wall time per iteration overstates what the code costs. Its CPU time
(user + sys, from wait4's rusage) does not count the waiting. Start-up (net
construction, warm-up) is cancelled by running the same configuration with
two iteration counts and dividing the difference in CPU time by the
difference in iterations. Remaining bias: cache and TLB pollution from the
other processes sharing the core still inflate the figure somewhat, so it is
an upper-leaning estimate of the idle-machine time.

usage: python3 bench/net_cputime.py [--build build] [--runs 3] [--markdown]
"""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
NETS = [("LeNet", "configs/nets/lenet_bench.prototxt", 64, 20, 120),
        ("CIFAR-10 quick", "configs/nets/cifar10_quick_bench.prototxt", 100, 10, 60)]


def cpu_seconds(ps_net: pathlib.Path, model: str, batch: int, engine: str, iterations: int):
    proc = subprocess.Popen([str(ps_net), "time", "--model", model, "--batch", str(batch),
                             "--threads", "1", "--engine", engine, "--iterations",
                             str(iterations), "--json"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"ps-net time failed ({model}, {engine})")
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    ps_net = ROOT / args.build / "bin" / "ps-net"
    load_before = open("/proc/loadavg").read().split()[:3]
    rows = []
    for name, model, batch, few, many in NETS:
        for engine in ("reference", "fast"):
            per_iter = []
            for _ in range(args.runs):
                a = cpu_seconds(ps_net, model, batch, engine, few)
                b = cpu_seconds(ps_net, model, batch, engine, many)
                per_iter.append(1000 * (b - a) / (many - few))
            rows.append((name, batch, engine, statistics.median(per_iter), per_iter))
            print(f"{name} b{batch} {engine}: {', '.join(f'{x:.2f}' for x in per_iter)} ms CPU",
                  file=sys.stderr)
    load_after = open("/proc/loadavg").read().split()[:3]
    if args.markdown:
        print(f"load average before {' '.join(load_before)}, after {' '.join(load_after)}\n")
        print("| net | batch | engine | CPU ms / iteration (median) | runs |")
        print("| --- | ---: | --- | ---: | --- |")
        for name, batch, engine, med, runs in rows:
            print(f"| {name} | {batch} | {'oneDNN' if engine == 'fast' else engine} | {med:.2f} | "
                  f"{', '.join(f'{x:.2f}' for x in runs)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
