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
  * c_g, the factor rebuild (E1b, E13): FactorProduct, the product the shard and every
    worker's replica rebuild a chunk with (common/ps/factor_rebuild.hpp, the variant this
    CPU runs), at the shape of one 1 MiB chunk of AlexNet's fc6 (29 rows of 9216, batch
    128): `shard-apply-bench --factor-product 29x128x9216`, CPU ns per flop. (Until
    2026-12-07 this was OpenBLAS's GEMM at fc6's whole shape, 0.0097 ns/flop, while the
    rebuild then ran 3.7 times slower than that; FactorProduct is now tiled per ISA.)
  * CURVE (E14; security: curve, which ps-train requires between hosts): the same ps-bench
    pair at 4K and 16M with --curve and without, in turns; CPU per byte on the wire, at each
    end (the sender encrypts, the receiver decrypts), of the server's I/O thread and of the
    client's threads: half the difference of the two runs' slopes per gradient byte.

Rates are per CPU second, so a shared machine still gives comparable figures. Writes one
JSON object (--json-out, default stdout).

usage: python3 bench/scaling_calibrate.py [--build build] [--rounds 3] [--json-out FILE]
       python3 bench/scaling_calibrate.py --only curve --update FILE   (CURVE's constants
                                          measured and written into an earlier FILE)
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

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))
import scaling_validate  # noqa: E402

# One 1 MiB chunk of AlexNet's fc6 (9216 columns: 28.4 rows, 29 touched), batch 128.
FC6_CHUNK = "29x128x9216"


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


def server_io(build: pathlib.Path, curve: bool = False) -> dict:
    """The server's threads' CPU per byte of one worker's gradient (push and pull: two
    wire bytes a gradient byte), from ps-bench's 4K and 16M round trips; and the client's."""
    import scaling_cpu
    small = scaling_cpu.bench_breakdown(build, "4K", 4, 1, "asp", curve=curve)
    big = scaling_cpu.bench_breakdown(build, "16M", 4, 1, "asp", curve=curve)

    def slope(prefix: str) -> float:
        return scaling_cpu.cpu_slope_ns_per_byte(small, big, prefix)
    io = slope("server:zmq")
    return {"server_io_ns_per_wire_byte": io / 2, "server_other_ns_per_byte":
            slope("server:") - io, "server_total_ns_per_byte": slope("server:"),
            "client_total_ns_per_byte": slope("client:"),
            "round_trip_16m_ms": big["round_trip_us"] / 1e3}


def curve_cost(build: pathlib.Path, rounds: int) -> dict:
    """E14: CURVE's CPU per wire byte at each end, the median of `rounds` pairs of runs
    (without and with CURVE, in turns): the server's I/O thread's and the client's."""
    pairs = [(server_io(build), server_io(build, curve=True)) for _ in range(rounds)]
    server = [(on["server_io_ns_per_wire_byte"] - off["server_io_ns_per_wire_byte"])
              for off, on in pairs]
    client = [(on["client_total_ns_per_byte"] - off["client_total_ns_per_byte"]) / 2
              for off, on in pairs]
    return {"curve_ns_per_wire_byte": statistics.median(server),
            "curve_client_ns_per_wire_byte": statistics.median(client),
            "curve_rounds": [{"off": off, "on": on} for off, on in pairs],
            "curve_date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "curve_load": scaling_validate.loadavg()}


def factor_flop_ns(build: pathlib.Path, shape: str = FC6_CHUNK) -> float:
    """c_g: CPU ns per flop of FactorProduct (the variant the programs use) at `shape`,
    ROWSxSAMPLESxCOLS, from `shard-apply-bench --factor-product` (median of 5 runs)."""
    out = subprocess.run([str(build / "bin/shard-apply-bench"), "--factor-product", shape,
                          "--runs", "5"], capture_output=True, text=True, timeout=300, check=True)
    m = re.search(r"^factor product \S+ chosen:\S+: ([0-9.]+) ns/flop", out.stdout, re.M)
    if m is None:
        raise RuntimeError(f"shard-apply-bench: no chosen factor product line in "
                           f"{out.stdout[-400:]!r}")
    return float(m.group(1))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json-out", type=pathlib.Path)
    ap.add_argument("--only", choices=("curve",), help="measure these constants only")
    ap.add_argument("--update", type=pathlib.Path, metavar="FILE",
                    help="with --only: write them into this earlier output")
    args = ap.parse_args()
    build = (ROOT / args.build).resolve()
    if args.only:
        if args.update is None:
            ap.error("--only needs --update FILE")
        res = json.loads(args.update.read_text())
        res.update(curve_cost(build, args.rounds))
        args.update.write_text(json.dumps(res, indent=1) + "\n")
        print(json.dumps({k: v for k, v in res.items() if k.startswith("curve_ns")
                          or k.startswith("curve_client")}, indent=1))
        return 0
    load_before = scaling_validate.loadavg()
    applies = [shard_apply(build) for _ in range(args.rounds)]
    ios = [server_io(build) for _ in range(args.rounds)]
    flops = [factor_flop_ns(build) for _ in range(args.rounds)]
    res = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
           "cpu": applies[0].get("cpu"), "isa": applies[0].get("isa"),
           "cores": os.cpu_count(), "load_before": load_before,
           "load_after": scaling_validate.loadavg(),
           "server_ns_per_byte_fp32": statistics.median(a["fp32"] for a in applies),
           "server_ns_per_byte_fp16": statistics.median(a["fp16"] for a in applies),
           "server_io_ns_per_byte": statistics.median(i["server_io_ns_per_wire_byte"]
                                                      for i in ios),
           "server_ns_per_flop": statistics.median(flops), "factor_shape": FC6_CHUNK,
           **curve_cost(build, args.rounds),
           "rounds": {"apply": applies, "io": ios, "factor_ns_per_flop": flops}}
    text = json.dumps(res, indent=1)
    if args.json_out:
        args.json_out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
