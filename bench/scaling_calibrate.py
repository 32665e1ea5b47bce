#!/usr/bin/env python3
"""The server-side constants of the cost model (python/pstrain/costmodel.py) for the GPU
predictions (bench/scaling_predict.py), measured on this machine (docs/scaling.md,
"Predictions: the calibration"):

  * c_s, the shard's apply (finite check, decode, rank-ordered sum, SGD with momentum) in
    CPU ns per float32 gradient byte: `shard-apply-bench --threads 1` (fp32 and fp16
    pushes), the median of --rounds runs;
  * the shard's I/O: ps-bench (1 worker thread, 1 server, tcp, asp, 4 parameters) at 4K
    and 16M with every thread sampled (bench/scaling_cpu.py): the server's ZeroMQ I/O
    thread's CPU per byte on the wire and direction (the slope from 4K to 16M over the
    32 MB a round trip moves), and its other threads' (the apply, which c_s measures apart);
  * the factor rebuild's GEMM (E1b): `ps-net time --engine reference --threads 1` of one
    InnerProduct layer 9216 -> 4096 at batch 128 (AlexNet's fc6; forward and the weight
    gradient are each the rebuild's 2 x 128 x 9216 x 4096 flops through CpuGemm): CPU ns
    per flop from the CPU of 30 iterations less that of 5.

Rates are per CPU second, so a shared machine still gives comparable figures. Writes one
JSON object (--json-out, default stdout).

usage: python3 bench/scaling_calibrate.py [--build build] [--rounds 3] [--json-out FILE]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

FC_NET = """name: "fc6"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 128 dim: 9216 } } }
layer { name: "fc6" type: "InnerProduct" bottom: "data" top: "fc6"
        inner_product_param { num_output: 4096 weight_filler { type: "gaussian" std: 0.005 } } }
"""
FC_FLOPS = 2 * 128 * 9216 * 4096     # one GEMM: forward, or the weight gradient


def shard_apply(build: pathlib.Path) -> dict:
    """{"cpu", "isa", "fp32", "fp16"}: shard-apply-bench's c_s lines, ns per gradient byte."""
    out = subprocess.run([str(build / "bin/shard-apply-bench"), "--threads", "1", "--dtype",
                          "fp32,fp16"], capture_output=True, text=True, timeout=300, check=True)
    res = {}
    for line in out.stdout.splitlines():
        if line.startswith(("cpu:", "isa:")):
            res[line.split(":")[0]] = line.split(":", 1)[1].strip()
        m = re.match(r"shard bsp (fp32|fp16) W=1 threads=1: c_s ([0-9.]+) ns/byte", line)
        if m:
            res[m.group(1)] = float(m.group(2))
    if "fp32" not in res or "fp16" not in res:
        raise RuntimeError(f"shard-apply-bench: no c_s lines in {out.stdout[-400:]!r}")
    return res


def server_io(build: pathlib.Path) -> dict:
    """The server's threads' CPU per byte of one worker's gradient (push and pull: two
    wire bytes a gradient byte), from ps-bench's 4K and 16M round trips."""
    import scaling_cpu
    small = scaling_cpu.bench_breakdown(build, "4K", 4, 1, "asp")
    big = scaling_cpu.bench_breakdown(build, "16M", 4, 1, "asp")

    def slope(prefix: str) -> float:
        a = sum(v for k, v in small["cpu_us_per_round_trip"].items() if k.startswith(prefix))
        b = sum(v for k, v in big["cpu_us_per_round_trip"].items() if k.startswith(prefix))
        return max(0.0, (b - a) / (16e6 - 4e3) * 1e3)   # ns per gradient byte
    io = slope("server:zmq")
    return {"server_io_ns_per_wire_byte": io / 2, "server_other_ns_per_byte":
            slope("server:") - io, "server_total_ns_per_byte": slope("server:"),
            "round_trip_16m_ms": big["round_trip_us"] / 1e3}


def gemm(build: pathlib.Path) -> float:
    """CPU ns per flop of CpuGemm (one thread) in the rebuild's shape."""
    with tempfile.TemporaryDirectory(prefix="calib-fc-") as tmp:
        net = pathlib.Path(tmp) / "fc.prototxt"
        net.write_text(FC_NET)
        cpu = []
        for n in (5, 30):
            p = subprocess.Popen([str(build / "bin/ps-net"), "time", "--model", str(net),
                                  "--threads", "1", "--engine", "reference", "--engine-cache",
                                  "none", "--iterations", str(n)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(p.pid, 0)
            if status != 0:
                raise RuntimeError("ps-net time failed")
            cpu.append(usage.ru_utime + usage.ru_stime)
    return (cpu[1] - cpu[0]) / 25 / (2 * FC_FLOPS) * 1e9


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json-out", type=pathlib.Path)
    args = ap.parse_args()
    build = (ROOT / args.build).resolve()
    load_before = " ".join(open("/proc/loadavg").read().split()[:3])
    applies = [shard_apply(build) for _ in range(args.rounds)]
    ios = [server_io(build) for _ in range(args.rounds)]
    gemms = [gemm(build) for _ in range(args.rounds)]
    res = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
           "cpu": applies[0].get("cpu"), "isa": applies[0].get("isa"),
           "cores": os.cpu_count(), "load_before": load_before,
           "load_after": " ".join(open("/proc/loadavg").read().split()[:3]),
           "server_ns_per_byte_fp32": statistics.median(a["fp32"] for a in applies),
           "server_ns_per_byte_fp16": statistics.median(a["fp16"] for a in applies),
           "server_io_ns_per_byte": statistics.median(i["server_io_ns_per_wire_byte"]
                                                      for i in ios),
           "server_ns_per_flop": statistics.median(gemms),
           "rounds": {"apply": applies, "io": ios, "gemm_ns_per_flop": gemms}}
    text = json.dumps(res, indent=1)
    if args.json_out:
        args.json_out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
