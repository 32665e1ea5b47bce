#!/usr/bin/env python3
"""Benchmark of `ps-net time`: forward+backward per iteration of LeNet (batch 64)
and the CIFAR-10 quick net (batch 100), 1 and 2 threads, reference path against
the oneDNN (fast) path.

Each configuration runs `--runs` separate processes of `--iterations` timed
iterations; a process reports its median iteration, and the table shows the
median of those (this machine is shared and noisy: medians, and ratios taken
within one run of this script).

usage: python3 bench/net_time.py [--build build] [--runs 5] [--iterations 20] [--markdown]
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
NETS = [("LeNet", "configs/nets/lenet_bench.prototxt", 64),
        ("CIFAR-10 quick", "configs/nets/cifar10_quick_bench.prototxt", 100)]


def time_once(ps_net: pathlib.Path, model: str, batch: int, threads: int, engine: str,
              iterations: int) -> float:
    out = subprocess.run([str(ps_net), "time", "--model", model, "--batch", str(batch),
                          "--threads", str(threads), "--engine", engine, "--iterations",
                          str(iterations), "--json"], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=600).stdout
    summary = [json.loads(l) for l in out.splitlines() if '"event":"time"' in l]
    return summary[0]["median_total_ms"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    ps_net = ROOT / args.build / "bin" / "ps-net"
    rows = []
    for name, model, batch in NETS:
        for threads in (1, 2):
            medians = {}
            for engine in ("reference", "fast"):
                runs = [time_once(ps_net, model, batch, threads, engine, args.iterations)
                        for _ in range(args.runs)]
                medians[engine] = statistics.median(runs)
            rows.append((name, batch, threads, medians["reference"], medians["fast"]))
            print(f"{name} b{batch} {threads} thread(s): reference {medians['reference']:.2f} ms,"
                  f" oneDNN {medians['fast']:.2f} ms", file=sys.stderr)
    if args.markdown:
        print("| net | batch | threads | reference ms | oneDNN ms | speed-up |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for name, batch, threads, ref, fast in rows:
            print(f"| {name} | {batch} | {threads} | {ref:.2f} | {fast:.2f} | {ref / fast:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
