#!/usr/bin/env python3
"""Runs build/bin/ps-bench over a grid of configurations and measures the
machine's single-stream loopback TCP bandwidth with iperf3 for comparison.

Grid (default): parameter set 4 KB, 1 MB, 16 MB, 64 MB (4 params each);
W = 1, 2, 4 workers; S = 1, 2 servers; tcp (127.0.0.1) and ipc; chunk_bytes
1 MiB; asp. Plus, at 16 MB and 64 MB with W = 1, S = 1, tcp: chunk 4 MiB and
bsp. Each configuration: one ps-bench process, median of --runs runs.

iperf3 (installed with apt-get if missing): `iperf3 -s -D` and
`iperf3 -c 127.0.0.1 -t 5`, --iperf-runs times, before and after the grid;
the median is quoted. The machine's load average is printed before and after.

usage: python3 bench/ps_bench.py [--build build] [--runs 5] [--run-seconds 1.0]
                                 [--quick] [--markdown] [--json-out FILE]
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SIZES = ["4K", "1M", "16M", "64M"]


def loadavg() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def ensure_iperf3() -> str | None:
    path = shutil.which("iperf3")
    if path:
        return path
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    for cmd in (sudo + ["apt-get", "install", "-y", "iperf3"],
                sudo + ["apt-get", "update"], sudo + ["apt-get", "install", "-y", "iperf3"]):
        subprocess.run(cmd, env=env, capture_output=True)
        if shutil.which("iperf3"):
            break
    return shutil.which("iperf3")


def iperf3_gbps(iperf3: str, seconds: int, port: int = 5299) -> float:
    server = subprocess.Popen([iperf3, "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = subprocess.run([iperf3, "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"],
                             capture_output=True, text=True, timeout=seconds + 30, check=True)
        return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"] / 8e9
    finally:
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def ps_bench(binary: pathlib.Path, size: str, workers: int, servers: int, transport: str,
             chunk: int, mode: str, runs: int, run_seconds: float) -> dict:
    cmd = [str(binary), "--size", size, "--params", "4", "--workers", str(workers),
           "--servers", str(servers), "--transport", transport, "--chunk-bytes", str(chunk),
           "--mode", mode, "--runs", str(runs), "--run-seconds", str(run_seconds), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr[-800:]}")
    line = [l for l in out.stdout.splitlines() if l.startswith("{")][-1]
    result = json.loads(line)
    result["size"] = size
    result["command"] = " ".join(cmd[1:])
    return result


def targets(args, binary: pathlib.Path, iperf3: str | None) -> int:
    """The issue's target configurations, each round beside a fresh iperf3 figure."""
    if not iperf3:
        print("targets need iperf3", file=sys.stderr)
        return 1
    chunks = [int(c) << 20 for c in args.chunks.split(",")]
    builds = [("", binary)]
    if args.baseline:
        builds.append((" (baseline)", (ROOT / args.baseline / "bin" / "ps-bench").resolve()))
    configs = [(size, chunk, label) for size in ("16M", "64M") for chunk in chunks
               for label, _ in builds]
    rows = {c: [] for c in configs}
    iperf = []
    for round_ in range(args.targets):
        gbps = iperf3_gbps(iperf3, args.iperf_seconds)
        iperf.append(gbps)
        for size, chunk, label in configs:
            program = dict(builds)[label]
            r = ps_bench(program, size, 1, 1, "tcp", chunk, "asp", args.runs, args.run_seconds)
            rows[(size, chunk, label)].append((r["gbps_total"], r["gbps_total"] / gbps))
            print(f"round {round_}: iperf3 {gbps:.2f} GB/s; {size} chunk {chunk >> 20} MiB"
                  f"{label}: {r['gbps_total']:.3f} GB/s ({r['gbps_total'] / gbps:.2f} of iperf3)",
                  file=sys.stderr)
    print(f"load average after: {loadavg()}", file=sys.stderr)
    print(f"iperf3 per round: {', '.join(f'{g:.2f}' for g in iperf)} GB/s "
          f"(median {statistics.median(iperf):.2f})\n")
    print("| size | chunk | push+pull GB/s (median) | / iperf3 of the same round (median) | per round |")
    print("| ---: | ---: | ---: | ---: | --- |")
    for (size, chunk, label), rs in rows.items():
        print(f"| {size}B{label} | {chunk >> 20} MiB | {statistics.median(g for g, _ in rs):.3f} | "
              f"{statistics.median(x for _, x in rs):.2f} | "
              f"{', '.join(f'{x:.2f}' for _, x in rs)} |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--run-seconds", type=float, default=1.0)
    parser.add_argument("--iperf-seconds", type=int, default=5)
    parser.add_argument("--iperf-runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="W in (1, 2), S in (1, 2), tcp only")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--targets", type=int, default=0, metavar="ROUNDS",
                        help="instead of the grid: ROUNDS rounds of [iperf3, 16 MB and 64 MB with "
                             "W1 S1 tcp, chunk 1 and 4 MiB], ratios to iperf3 taken per round")
    parser.add_argument("--chunks", default="1,4",
                        help="--targets: chunk sizes in MiB, comma-separated")
    parser.add_argument("--baseline", metavar="BUILD",
                        help="--targets: also run BUILD/bin/ps-bench (e.g. a build of an older "
                             "commit) right after each configuration, in the same round")
    parser.add_argument("--json-out", help="write every result here (JSON lines)")
    args = parser.parse_args()
    binary = ROOT / args.build / "bin" / "ps-bench"

    print(f"load average before: {loadavg()}", file=sys.stderr)
    iperf3 = ensure_iperf3()
    iperf = []
    if iperf3:
        iperf = [iperf3_gbps(iperf3, args.iperf_seconds) for _ in range(args.iperf_runs)]
        print(f"iperf3 loopback: {', '.join(f'{g:.2f}' for g in iperf)} GB/s", file=sys.stderr)
    else:
        print("iperf3 is not available and could not be installed", file=sys.stderr)

    if args.targets:
        return targets(args, binary, iperf3)

    grid = []
    workers_list = (1, 2) if args.quick else (1, 2, 4)
    transports = ("tcp",) if args.quick else ("tcp", "ipc")
    for transport in transports:
        for size in SIZES:
            for servers in (1, 2):
                for workers in workers_list:
                    grid.append((size, workers, servers, transport, 1 << 20, "asp"))
    for size in ("16M", "64M"):
        grid.append((size, 1, 1, "tcp", 4 << 20, "asp"))
        grid.append((size, 1, 1, "tcp", 1 << 20, "bsp"))
        grid.append((size, 2, 1, "tcp", 1 << 20, "bsp"))

    results = []
    for size, workers, servers, transport, chunk, mode in grid:
        r = ps_bench(binary, size, workers, servers, transport, chunk, mode, args.runs,
                     args.run_seconds)
        results.append(r)
        print(f"{size:>4} W{workers} S{servers} {transport} chunk {chunk >> 20} MiB {mode}: "
              f"{r['its_per_worker']:.1f} it/s/worker, {r['gbps_per_worker']:.3f} GB/s/worker, "
              f"{r['gbps_total']:.3f} GB/s total", file=sys.stderr)

    if iperf3:
        after = [iperf3_gbps(iperf3, args.iperf_seconds) for _ in range(args.iperf_runs)]
        print(f"iperf3 loopback after: {', '.join(f'{g:.2f}' for g in after)} GB/s",
              file=sys.stderr)
        iperf += after
    print(f"load average after: {loadavg()}", file=sys.stderr)
    iperf_median = statistics.median(iperf) if iperf else float("nan")

    if args.json_out:
        with open(args.json_out, "w") as out:
            for r in results:
                out.write(json.dumps(r) + "\n")
            out.write(json.dumps({"event": "iperf3", "gbps": iperf}) + "\n")

    if args.markdown:
        print(f"iperf3 single-stream loopback TCP: median {iperf_median:.2f} GB/s "
              f"({', '.join(f'{g:.2f}' for g in iperf)})\n")
        print("| size | W | S | transport | chunk | mode | it/s per worker | GB/s per worker "
              "| GB/s total | total / iperf3 |")
        print("| ---: | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |")
        for r in results:
            print(f"| {r['size']}B | {r['workers']} | {r['servers']} | {r['transport']} | "
                  f"{r['chunk_bytes'] >> 20} MiB | {r['mode']} | {r['its_per_worker']:.1f} | "
                  f"{r['gbps_per_worker']:.3f} | {r['gbps_total']:.3f} | "
                  f"{r['gbps_total'] / iperf_median:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
