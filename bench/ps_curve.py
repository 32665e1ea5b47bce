#!/usr/bin/env python3
"""The cost of CURVE on push+pull throughput: ps-bench with and without
--curve, alternating (off, on, off, on, ...) so that both see the same load,
for each size; prints the median of the per-invocation medians as a markdown
table (docs/benchmarks.md, "CURVE on vs off").

    python3 bench/ps_curve.py [--sizes 16M,64M] [--rounds 5] [--bench build/bin/ps-bench]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]


def one(bench: str, size: str, curve: bool, runs: int) -> float:
    cmd = [bench, "--size", size, "--runs", str(runs), "--run-seconds", "1.0", "--json"]
    if curve:
        cmd.append("--curve")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    line = [l for l in out.splitlines() if l.startswith("{")][-1]
    return json.loads(line)["gbps_per_worker"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="16M,64M")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=3, help="timed runs per ps-bench invocation")
    p.add_argument("--bench", default=str(ROOT / "build" / "bin" / "ps-bench"))
    args = p.parse_args()
    print("| size | CURVE off GB/s | CURVE on GB/s | on / off | rounds (off; on) |")
    print("| --- | ---: | ---: | ---: | --- |")
    for size in args.sizes.split(","):
        off, on = [], []
        for _ in range(args.rounds):
            off.append(one(args.bench, size, False, args.runs))
            on.append(one(args.bench, size, True, args.runs))
        m_off, m_on = statistics.median(off), statistics.median(on)
        rounds = f"{', '.join(f'{x:.3f}' for x in off)}; {', '.join(f'{x:.3f}' for x in on)}"
        print(f"| {size} | {m_off:.3f} | {m_on:.3f} | {m_on / m_off:.2f} | {rounds} |",
              flush=True)


if __name__ == "__main__":
    main()
