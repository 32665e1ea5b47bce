"""Scaling on paper: a cost model of one PSTrain iteration for W workers and S servers.

Inputs: per-layer compute (the JSON lines of `ps-net time --json`), the net's learnable
parameters and the server placement of their chunks (both the engine's own answers,
through pstrain._core: engine.py), link bandwidth and latency,
the server's cost per byte and per message. Output: predicted iteration time and
images/s under bsp, ssp and asp, with the bottleneck named. docs/scaling.md derives
and documents every equation. This module is the command line; the model is in
costmodel_iteration.py, the link stations (E2e) in costmodel_links.py, the inputs in
costmodel_inputs.py, and their names are re-exported here (bench/ and the tests read them
from here).

    python3 -m pstrain.costmodel --time TIME.jsonl --net NET.prototxt --batch 32 \
        --workers 8 --servers 2 --bandwidth-gbit 10 --latency-us 50 --mode bsp
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

# The model and its inputs (re-exported: bench/ and the tests read them from here).
from .costmodel_inputs import (CostModelError, LayerTime, Param, load_layer_times,  # noqa: F401
                               net_params)
from .costmodel_iteration import (FACTOR_RIGHTS, Chunk, Cluster, Piece,  # noqa: F401
                                  Prediction, _balance_idle, _share, pieces, place,
                                  predict, value_bytes)


# ---------------------------------------------------------------- command line

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m pstrain.costmodel",
                                description="Predict PSTrain iteration time and images/s.")
    p.add_argument("--time", required=True, type=pathlib.Path,
                   help="`ps-net time --json` output (layer_time lines)")
    p.add_argument("--net", required=True, type=pathlib.Path,
                   help="the net prototxt (Input or DummyData shapes)")
    p.add_argument("--batch", required=True, type=int, help="batch per worker of the timing")
    p.add_argument("--workers", default="1", help="comma-separated worker counts")
    p.add_argument("--servers", default="1", help="comma-separated server counts")
    p.add_argument("--mode", default="bsp", choices=("bsp", "ssp", "asp"))
    p.add_argument("--staleness", type=int, default=0)
    p.add_argument("--bandwidth-gbit", type=float, default=10.0,
                   help="link bandwidth per direction, Gbit/s (workers and servers)")
    p.add_argument("--server-bandwidth-gbit", type=float, help="servers' links if different")
    p.add_argument("--latency-us", type=float, default=50.0, help="one-way latency")
    p.add_argument("--message-us", type=float, default=20.0, help="per-message cost at each end")
    p.add_argument("--server-ns-per-byte", type=float, default=0.0,
                   help="server CPU per byte of one worker's gradient (receive, apply, send)")
    p.add_argument("--server-threads", type=int, default=1,
                   help="threads each shard applies a push on (ps-server --threads): the "
                        "shard's wall time per byte is c_s divided by them")
    p.add_argument("--worker-ns-per-byte", type=float, default=0.0,
                   help="worker CPU per byte and direction (staging and copies)")
    p.add_argument("--worker-io-threads", type=int, default=1,
                   help="E2d: a worker's ZeroMQ I/O threads (transport.io_threads)")
    p.add_argument("--worker-io-share", type=float, default=0.77,
                   help="E2d: the part of --worker-ns-per-byte on the I/O threads")
    p.add_argument("--chunk-bytes", type=int, default=1 << 20)
    p.add_argument("--cores", type=float, help="cores shared by all processes (CPU runs)")
    p.add_argument("--cpu-exchange-us", type=float, nargs=2, default=(0.0, 0.0),
                   metavar=("WORKER", "SERVER"),
                   help="E8: CPU of one push+pull exchange, worker's and server's threads")
    p.add_argument("--cpu-ns-per-byte", type=float, nargs=2, default=(0.0, 0.0),
                   metavar=("WORKER", "SERVER"),
                   help="E8: CPU per byte of one worker's gradient, worker's and server's "
                        "threads (with --cores)")
    p.add_argument("--refill-per-share", type=float, default=0.0,
                   help="E9: the compute's extra CPU per unit of its core's share others take")
    p.add_argument("--balance-ms", type=float, default=0.0,
                   help="E10: the load balancer's latency to fill a core that ran dry (bsp, "
                        "W not a multiple of the cores)")
    # issue 32's switches (docs/scaling.md E1, E1b, E3, E11, E12, E13)
    p.add_argument("--compression", default="none",
                   choices=("none", "fp16", "bf16", "topk", "sign"),
                   help="E1: the pushes' encoding (transport.compression)")
    p.add_argument("--topk-ratio", type=float, default=0.01, help="E1: topk's share of values")
    p.add_argument("--pull-compression", default="none", choices=("none", "fp16", "bf16"),
                   help="E1: the pulls' encoding (transport.pull_compression): 2 bytes a value")
    p.add_argument("--workers-per-host", type=int, default=1,
                   help="E11: workers sharing one host's link (--bandwidth-gbit is the host's)")
    p.add_argument("--servers-per-host", action="store_true",
                   help="E11: cluster.server_placement per_host: shard k beside the workers of "
                        "host k, its traffic on that host's link (use --servers = the hosts)")
    p.add_argument("--host-aggregation", action="store_true",
                   help="E11: transport.host_aggregation, bsp: one push and one pull per host")
    p.add_argument("--host-sum-ns-per-byte", type=float, default=0.0,
                   help="E11: the host leader's sum, per byte of a member's gradient")
    p.add_argument("--sufficient-factors", action="store_true",
                   help="E1b: push InnerProduct weights as sufficient factors where fewer bytes")
    p.add_argument("--factor-broadcast", action="store_true",
                   help="E13: transport.sufficient_factors: broadcast (bsp): the factored "
                        "weights' pulls are every pusher's factors, the worker rebuilds them")
    p.add_argument("--factor-right", default="every_shard", choices=FACTOR_RIGHTS,
                   help="E13 (with --factor-broadcast; transport.factor_right): every_shard: a "
                        "worker pushes its R factor to every shard of the weight (as built); "
                        "holder: to its holder shard only, the others get it forwarded by a "
                        "worker on their host (through the NIC with servers apart)")
    p.add_argument("--factor-bytes", type=float, default=None,
                   help="E1b, E13: bytes a factor value on the wire, both ways (default: 2 "
                        "with --compression fp16 or bf16, whose pushes and relay carry the "
                        "factors in 16 bits, as CPU workers do; else 4, float32)")
    p.add_argument("--worker-ns-per-flop", type=float, default=0.0,
                   help="E13: the worker's time per flop of its rebuild of the broadcast step")
    p.add_argument("--worker-apply-ns-per-byte", type=float, default=0.0,
                   help="E13: the worker's time per float32 byte of its replica's step")
    p.add_argument("--pull-overlap", action="store_true",
                   help="E12: transport.pull_overlap: the pull overlaps the next forward, "
                        "replies in forward order")
    p.add_argument("--pull-window-kb", type=float, default=2048,
                   help="E12: KiB of replies a shard lets ZeroMQ hold a worker ahead of the "
                        "wire (ps-server --pull-window-kb)")
    p.add_argument("--server-ns-per-flop", type=float, default=0.0,
                   help="E1b: the shard's CPU per flop of the factor rebuild GEMM")
    p.add_argument("--server-io-ns-per-byte", type=float, default=0.0,
                   help="E3: the shard's I/O thread and stack per wire byte and direction")
    p.add_argument("--server-io-threads", type=int, default=1,
                   help="E3, E14: a shard's ZeroMQ I/O threads (transport.io_threads)")
    p.add_argument("--curve-ns-per-byte", type=float, default=0.0,
                   help="E14: CURVE's CPU per wire byte at each end (security: curve, "
                        "required between hosts; bench/scaling_calibrate.py measures it)")
    p.add_argument("--exchange-efficiency", type=float, default=1.0,
                   help="E15: the share of each link's rate a bsp exchange among hosts gets "
                        "over TCP (bench/exchange_probe.py); 1: links kept busy")
    p.add_argument("--pipelined-nic", action="store_true",
                   help="E2c: the worker's CPU per byte overlaps its NIC's wire (DMA)")
    p.add_argument("--json", action="store_true", help="one JSON line per prediction")
    return p


def factor_bytes(args: argparse.Namespace) -> float:
    """E1b, E13: a factor value's bytes on the wire: --factor-bytes, else as the built
    path sends them (FactorDtype, common/ps/sufficient_factors.hpp): 16 bits with fp16 or
    bf16 pushes, float32 with none, topk or sign (those encode a gradient, not factors)."""
    if args.factor_bytes is not None:
        return args.factor_bytes
    return 2.0 if args.compression in ("fp16", "bf16") else 4.0


def cluster_from_args(args: argparse.Namespace, w: int, s: int) -> Cluster:
    """The Cluster of one (workers, servers) point of the command line."""
    gbit = args.server_bandwidth_gbit or args.bandwidth_gbit
    return Cluster(workers=w, servers=s, mode=args.mode, staleness=args.staleness,
                   worker_bw=args.bandwidth_gbit * 1.25e8, server_bw=gbit * 1.25e8,
                   latency_s=args.latency_us * 1e-6, message_s=args.message_us * 1e-6,
                   server_byte_s=args.server_ns_per_byte * 1e-9,
                   server_threads=args.server_threads,
                   worker_byte_s=args.worker_ns_per_byte * 1e-9,
                   worker_io_threads=args.worker_io_threads,
                   worker_io_share=args.worker_io_share,
                   chunk_bytes=args.chunk_bytes, cores=args.cores,
                   worker_cpu_exchange_s=args.cpu_exchange_us[0] * 1e-6,
                   server_cpu_exchange_s=args.cpu_exchange_us[1] * 1e-6,
                   worker_cpu_byte_s=args.cpu_ns_per_byte[0] * 1e-9,
                   server_cpu_byte_s=args.cpu_ns_per_byte[1] * 1e-9,
                   refill_per_share=args.refill_per_share,
                   balance_s=args.balance_ms * 1e-3,
                   push_value_bytes=value_bytes(args.compression, args.topk_ratio),
                   pull_value_bytes=value_bytes(args.pull_compression),
                   workers_per_host=args.workers_per_host,
                   servers_beside_workers=args.servers_per_host,
                   host_aggregation=args.host_aggregation,
                   host_sum_byte_s=args.host_sum_ns_per_byte * 1e-9,
                   sufficient_factors=args.sufficient_factors,
                   factor_broadcast=args.factor_broadcast,
                   factor_value_bytes=factor_bytes(args),
                   factor_right=args.factor_right,
                   worker_flop_s=args.worker_ns_per_flop * 1e-9,
                   worker_apply_byte_s=args.worker_apply_ns_per_byte * 1e-9,
                   pull_overlap=args.pull_overlap,
                   pull_window_bytes=args.pull_window_kb * 1024,
                   server_flop_s=args.server_ns_per_flop * 1e-9,
                   server_io_byte_s=args.server_io_ns_per_byte * 1e-9,
                   server_io_threads=args.server_io_threads,
                   curve_byte_s=args.curve_ns_per_byte * 1e-9,
                   pipelined_nic=args.pipelined_nic,
                   exchange_efficiency=args.exchange_efficiency)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        layers = load_layer_times(args.time)
        params = net_params(args.net)
        for w in (int(x) for x in args.workers.split(",")):
            for s in (int(x) for x in args.servers.split(",")):
                cl = cluster_from_args(args, w, s)
                r = predict(layers, params, args.batch, cl)
                if args.json:
                    print(json.dumps({"workers": w, "servers": s, "mode": args.mode,
                                      "iteration_ms": r.iteration_s * 1e3,
                                      "images_per_s": r.images_per_s,
                                      "compute_ms": r.compute_s * 1e3,
                                      "bottleneck": r.bottleneck}))
                else:
                    print(f"W={w:3d} S={s:2d} {args.mode}: {r.iteration_s * 1e3:9.2f} ms/iter "
                          f"{r.images_per_s:10.1f} images/s (compute {r.compute_s * 1e3:.2f} ms,"
                          f" bottleneck {r.bottleneck})")
    except (CostModelError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
