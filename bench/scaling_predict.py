#!/usr/bin/env python3
"""Predictions of the cost model (python/pstrain/costmodel.py) for GPU clusters: ResNet-50
(batch 32 per worker) and AlexNet (batch 128 per worker) on 8-64 GPU workers with 1-16
servers over 10, 25 and 100 GbE, from the per-layer times measured on an NVIDIA H200
(bench/data/h200_*_time.json, `ps-net time --gpu 0 --json`, docs/benchmarks.md "GPU").

Writes docs/img/scaling_resnet50.png and docs/img/scaling_alexnet.png (images/s and scaling
efficiency against workers, one panel per link, one line per server count, ideal linear
scaling, and the anchors' published efficiencies) and prints the markdown tables of
docs/scaling.md.

Assumptions (docs/scaling.md, "Predictions"): one GPU worker per host and one server per
host, each with its own NIC; TCP goodput 94 % of the line rate; 25 us one-way latency;
per-message cost and server CPU cost per byte as measured here by bench/scaling_validate.py
(--message-us, --server-ns-per-byte, --worker-ns-per-byte); bsp GPU workers pull after
their pushes (no early pull: built for GPU workers 2026-12-07, not yet run on a GPU)
except in the switch table's row that adds it. The switch
table of issue 32's configuration adds one switch a row (`STEPS`, `switches()`), E12 and
E13 included, each row saying whether it is in main or not built.

usage: python3 bench/scaling_predict.py [--message-us 20] [--server-ns-per-byte 1.25]
                                        [--worker-ns-per-byte 0.3] [--out docs/img] [--markdown]
                                        [--exchange-efficiency 1]

The defaults are the calibration of validation run 1, which docs/scaling.md's predictions
use (bench/data/scaling_validation_run1.json: message_us, server_ns_per_byte,
worker_ns_per_byte).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
from pstrain import costmodel  # noqa: E402

NETS = {
    "resnet50": ("ResNet-50", ROOT / "bench/data/h200_resnet50_time.json",
                 ROOT / "configs/nets/resnet50_deploy.prototxt", 32),
    "alexnet": ("AlexNet", ROOT / "bench/data/h200_alexnet_time.json",
                ROOT / "configs/nets/alexnet_deploy.prototxt", 128),
}
LINKS_GBIT = (10, 25, 100)
WORKERS = (8, 16, 32, 64)
SERVERS = (1, 2, 4, 8, 16)
TABLE_SERVERS = (1, 4, 16)  # the tables; the plots have every count of SERVERS
GOODPUT = 0.94

# Published scaling efficiencies (speed-up / GPUs), as each source states them; see
# docs/scaling.md "Anchors" for what each one measured. BytePS (OSDI'20) reports gains
# over all-reduce and PS, not an efficiency against one GPU: not quoted.
ANCHORS = [
    ("Caffe multi-GPU, 2 GPUs one host (docs/multigpu.md: ~1.8x)", 2, 1.8 / 2),
    ("Caffe multi-GPU, 4 GPUs weak scaling (docs/multigpu.md: ~3.5x)", 4, 3.5 / 4),
    ("GeePS, 16 machines (EuroSys'16 abstract: 13x)", 16, 13 / 16),
    ("Poseidon, 16 machines VGG19-22K 10GbE (ATC'17: 15.5x)", 16, 15.5 / 16),
    ("Poseidon, 32 machines Inception-V3 (ATC'17: 31.5x)", 32, 31.5 / 32),
]


CALIBRATION = ROOT / "bench/data/scaling_calibration_gpu.json"
# issue 32's configuration: 8 H200 workers on 8 hosts, one GPU each, a shard on every host,
# 25 GbE; the shard's apply threads when they are on (an H200 host has dozens of cores)
ISSUE = dict(workers=8, servers=8, gbit=25)
THREADS_ON = 8
IO_THREADS_ON = 8     # E2d, E14: ZeroMQ I/O threads of a worker and a shard (io_threads):
#                       one a connection of the 8 (a GPU host has dozens of cores)
THREADS_MANY = 16     # a shard's apply threads on a many-core GPU host
# E12: what a shard lets ZeroMQ hold a worker ahead of the wire (ps-server
# --pull-window-kb, 2048 by default)
PULL_WINDOW = 2 << 20
# E13 on a GPU worker (not built: the broadcast path is CPU only): the rebuild GEMM at the
# rate of AlexNet's fc6 forward on the H200 (bench/data/h200_alexnet_time.json: 2 x 128 x
# 9216 x 4096 flops), and the replica's step at HBM speed: an SGD step with momentum moves
# about 5 bytes of memory (weight, history, gradient; 3 read, 2 written) a float32 byte, at
# the H200's 4.8 TB/s
HBM_BYTES_PER_S = 4.8e12
STEP_BYTES_PER_BYTE = 5.0


def gpu_flop_s() -> float:
    """E13: seconds a flop of an H200's GEMM, from fc6's measured forward."""
    layers = costmodel.load_layer_times(NETS["alexnet"][1])
    fc6 = next(l for l in layers if l.name == "fc6")
    return fc6.forward_ms / 1e3 / (2.0 * 128 * 9216 * 4096)


# The switch table, one row a step, each adding its switch to the rows above. The first
# rows are in main (the I/O threads among them: with CURVE on every connection, E14, they
# matter as much as the bytes); the next two are E12 and E13 (in main, E13 for CPU
# workers); then early pulls on GPU workers (in main since 2026-12-07, automatic in bsp,
# not yet run on a GPU: a row of its own until one has) and E2c (an assumption about the
# hardware); factors in 16 bits are in main for CPU workers (a factor push takes
# transport.compression's fp16/bf16, the relay forwards those bytes). In main the factors
# follow the compression at once: the rows before it keep them float32 only to show
# each switch's share. R pushed once (issue 32's push side, costmodel.Cluster.factor_right)
# is built for CPU workers, as E13 is. Every row has CURVE (security: curve), which
# ps-train requires between hosts (E14).
STEPS = [("today", "the baseline: 8 shards on hosts of their own, float32, 1 apply thread, "
          "1 I/O thread a process, CURVE"),
         ("per_host", "+ a shard on every worker host (`cluster.server_placement: per_host`)"),
         ("threads", f"+ {THREADS_ON} apply threads a shard (`cluster.server_threads: "
          f"{THREADS_ON}`)"),
         ("fp16", "+ 16-bit both ways (`transport.compression` and `pull_compression: fp16`)"),
         ("io", f"+ {IO_THREADS_ON} ZeroMQ I/O threads a worker and a shard: a worker's "
          "connection to each shard on one, a shard's connections spread over its own "
          f"(E2d, E14; `transport.io_threads: auto`, the default over hosts: one a "
          f"connection, {IO_THREADS_ON} at most)"),
         ("factors", "+ sufficient factors for fc weights (push side): every switch in main"),
         ("overlap", "+ pulls overlapping the next forward, in forward order (E12, "
          "`transport.pull_overlap`: in main, CPU and GPU workers)"),
         ("broadcast", "+ sufficient-factor broadcasting (E13, `transport.sufficient_factors: "
          "broadcast`: in main, CPU workers; the rebuild on the GPU: not built)"),
         ("early", "+ the pull request before the last backward on GPU workers too, as on CPU "
          "workers (early pull: in main for GPU workers, automatic in bsp; not yet run "
          "on a GPU)"),
         ("dma", "+ the worker's CPU per byte beside its NIC's DMA, not in series (E2c, not "
          "validated)"),
         ("factor16", "+ factors in 16 bits both ways (E13: in main for CPU workers, following "
          "`transport.compression: fp16`; the rebuild on the GPU: not built)"),
         ("holder", "+ each worker's R factor pushed once, to its holder shard, the other "
          "shards taking it from a worker on their host (E13, `transport.factor_right: "
          "holder`: built for CPU workers, as E13 is)"),
         ("many", f"+ {THREADS_MANY} apply threads a shard (`cluster.server_threads: "
          f"{THREADS_MANY}`: the rebuild of factor pushes runs on them too)")]
STEP = {key: i for i, (key, _) in enumerate(STEPS, 1)}
MAIN_STEP = STEP["factors"]      # every switch in main
BUILDING_STEP = STEP["broadcast"]  # and the two added since (E12, E13)
ALL_STEP = STEP["dma"]           # and early pulls on GPU workers and E2c


def switches(step: int, calib: dict) -> dict:
    """The Cluster inputs of step `step` of the switch table: each step adds one switch to
    the one before (docs/scaling.md, "Predictions")."""
    on = {key for key, n in STEP.items() if n <= step}
    # E14: CURVE on every row: ps-train requires it between hosts (security: curve)
    out = {"server_byte_s": calib["server_ns_per_byte_fp16" if "fp16" in on else
                                  "server_ns_per_byte_fp32"] * 1e-9,
           "server_io_byte_s": calib["server_io_ns_per_byte"] * 1e-9,
           "server_flop_s": calib["server_ns_per_flop"] * 1e-9,
           "curve_byte_s": calib["curve_ns_per_wire_byte"] * 1e-9}
    if "per_host" in on:
        out["servers_beside_workers"] = True
    if "threads" in on:
        out["server_threads"] = THREADS_ON
    if "fp16" in on:
        out.update(push_value_bytes=2.0, pull_value_bytes=2.0)
    if "io" in on:
        out.update(worker_io_threads=IO_THREADS_ON, server_io_threads=IO_THREADS_ON)
    if "factors" in on:
        out["sufficient_factors"] = True
    if "overlap" in on:
        out.update(pull_overlap=True, pull_window_bytes=float(PULL_WINDOW))
    if "broadcast" in on:
        out.update(factor_broadcast=True, worker_flop_s=gpu_flop_s(),
                   worker_apply_byte_s=STEP_BYTES_PER_BYTE / HBM_BYTES_PER_S)
    if "early" in on:
        out["early_pull"] = True
    if "dma" in on:
        out["pipelined_nic"] = True
    if "factor16" in on:
        out["factor_value_bytes"] = 2.0
    if "holder" in on:
        out["factor_right"] = "holder"
    if "many" in on:
        out["server_threads"] = THREADS_MANY
    return out


def predict_grid(key: str, mode: str, message_s: float, server_byte_s: float,
                 worker_byte_s: float, extra: dict | None = None,
                 servers=SERVERS) -> dict:
    _, time_file, net_file, batch = NETS[key]
    layers = costmodel.load_layer_times(time_file)
    params = costmodel.net_params(net_file)
    out = {}
    for gbit in LINKS_GBIT:
        bw = gbit * 1e9 / 8 * GOODPUT
        for s in servers:
            for w in (1,) + WORKERS:
                kw = dict(workers=w, servers=w if s == "W" else s, mode=mode, worker_bw=bw,
                          server_bw=bw, latency_s=25e-6, message_s=message_s,
                          server_byte_s=server_byte_s, worker_byte_s=worker_byte_s)
                cl = costmodel.Cluster(**dict(kw, **(extra or {})))
                out[gbit, s, w] = costmodel.predict(layers, params, batch, cl)
    single = batch / (sum(l.forward_ms + l.backward_ms for l in layers) / 1e3)
    return {"pred": out, "single": single, "batch": batch,
            "mbytes": 4 * sum(p.values for p in params) / 1e6}


def issue_table(key: str, args, calib: dict) -> list[tuple]:
    """(step, iteration ms, images/s, efficiency, bottleneck) for issue 32's configuration,
    switch by switch, bsp; step 0 is the model and constants of the published tables."""
    _, time_file, net_file, batch = NETS[key]
    layers = costmodel.load_layer_times(time_file)
    params = costmodel.net_params(net_file)
    single = batch / (sum(l.forward_ms + l.backward_ms for l in layers) / 1e3)
    bw = ISSUE["gbit"] * 1e9 / 8 * GOODPUT
    base = dict(workers=ISSUE["workers"], servers=ISSUE["servers"], worker_bw=bw, server_bw=bw,
                latency_s=25e-6, message_s=args.message_us * 1e-6,
                worker_byte_s=args.worker_ns_per_byte * 1e-9,
                exchange_efficiency=args.exchange_efficiency)
    rows = []
    old = costmodel.predict(layers, params, batch, costmodel.Cluster(
        **dict(base, server_byte_s=args.server_ns_per_byte * 1e-9)))
    rows.append(("the published model (c_s 1.25 ns/B, no I/O term), servers apart", old))
    for step, (_, label) in enumerate(STEPS, 1):
        rows.append((label, costmodel.predict(layers, params, batch, costmodel.Cluster(
            **dict(base, **switches(step, calib))))))
    # R pushed once is a choice: with a shard on every host the holders' relays of R wait
    # for the host's uplink behind its pushes (E2e), so every row but it is shown too
    every = switches(len(STEPS), calib)
    rows.append(("every row but R pushed once (`transport.factor_right: every_shard`)",
                 costmodel.predict(layers, params, batch, costmodel.Cluster(
                     **dict(base, **{k: v for k, v in every.items() if k != "factor_right"})))))
    plain = costmodel.predict(layers, params, batch, costmodel.Cluster(
        **dict(base, **dict(every, curve_byte_s=0.0))))
    rows.append(("every row, no CURVE (`security: none`: refused between hosts, E14)",
                 plain))
    free = costmodel.predict(layers, params, batch, costmodel.Cluster(
        **dict(base, **dict(every, server_byte_s=0.0,
                            server_io_byte_s=0.0, server_flop_s=0.0, worker_byte_s=0.0,
                            curve_byte_s=0.0))))
    rows.append(("every row above, no CPU cost per byte (the NICs alone)", free))
    return [(label, r.iteration_s * 1e3, r.images_per_s,
             r.images_per_s / (ISSUE["workers"] * single), r.bottleneck) for label, r in rows]


def plot(key: str, grid: dict, free: dict, out: pathlib.Path, args, on: dict | None = None,
         in_main: dict | None = None) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    title, _, _, batch = NETS[key]
    fig, axes = plt.subplots(2, len(LINKS_GBIT), figsize=(15, 8.5), sharex=True)
    xs = [1] + list(WORKERS)
    colors = plt.get_cmap("viridis")
    for col, gbit in enumerate(LINKS_GBIT):
        top, bottom = axes[0][col], axes[1][col]
        top.plot(xs, [w * grid["single"] for w in xs], "k--", label="ideal (linear)")
        bottom.axhline(1.0, color="k", linestyle="--", label="ideal")
        for i, s in enumerate(SERVERS):
            c = colors(i / (len(SERVERS) - 1))
            ips = [grid["pred"][gbit, s, w].images_per_s for w in xs]
            top.plot(xs, ips, "o-", color=c, label=f"S = {s}")
            bottom.plot(xs, [v / (w * grid["single"]) for v, w in zip(ips, xs)], "o-", color=c,
                        label=f"S = {s}")
            nic = [free["pred"][gbit, s, w].images_per_s for w in xs]
            top.plot(xs, nic, ":", color=c, linewidth=1)
            bottom.plot(xs, [v / (w * grid["single"]) for v, w in zip(nic, xs)], ":", color=c,
                        linewidth=1)
        for overlay, marker, color, label in ((in_main, "^-", "C1", "every switch in main"),
                                              (on, "s-", "C3", "+ E12, E13, GPU early pull, "
                                               "E2c")):
            if overlay is None:
                continue
            ips = [overlay["pred"][gbit, "W", w].images_per_s for w in xs]
            top.plot(xs, ips, marker, color=color, label=f"{label}, a shard per host")
            bottom.plot(xs, [v / (w * grid["single"]) for v, w in zip(ips, xs)], marker,
                        color=color, label=f"{label} (S = W, one per host)")
        for j, (name, n, eff) in enumerate(ANCHORS):
            bottom.plot([n], [eff], marker="*^vsD"[j], markersize=11, linestyle="none",
                        color=f"C{j + 1}", label=name)
        top.set_title(f"{title} b{batch}/worker, {gbit} GbE (bsp)")
        top.set_xscale("log", base=2)
        top.set_yscale("log")
        top.set_ylabel("images/s (predicted)")
        bottom.set_xlabel("GPU workers W")
        bottom.set_ylabel("scaling efficiency")
        bottom.set_ylim(0, 1.1)
        top.grid(True, which="both", alpha=0.3)
        bottom.grid(True, alpha=0.3)
        bottom.set_xticks(xs)
        bottom.set_xticklabels([str(x) for x in xs])
    axes[0][0].plot([], [], "k:", linewidth=1, label="dotted: no CPU cost per byte (NIC-bound)")
    axes[0][0].legend(fontsize=7, loc="upper left")
    handles, labels = axes[1][0].get_legend_handles_labels()
    keep = [i for i, l in enumerate(labels) if not l.startswith("S =") and l != "ideal"
            and not l.startswith("every switch") and not l.startswith("+ E12")]
    fig.legend([handles[i] for i in keep], [labels[i] for i in keep], loc="lower center",
               ncol=3, fontsize=8, title="published scaling efficiencies (other GPUs, nets, "
               "networks; see docs/scaling.md)", title_fontsize=8)
    fig.suptitle(f"PSTrain cost model: {title}, per-layer times of an NVIDIA H200, "
                 f"{grid['mbytes']:.0f} MB of gradients per worker and iteration\ncircles: "
                 f"the baseline, servers apart (apply {args.calib['server_ns_per_byte_fp32']:.3g}"
                 f" ns/B, I/O {args.calib['server_io_ns_per_byte']:.2g} ns/B, worker "
                 f"{args.worker_ns_per_byte:g} ns/B), dotted: no CPU cost;\na shard on every "
                 f"host: orange triangles every switch in main, red squares + pulls under the "
                 f"next forward (E12), factor broadcasting (E13), early pulls, NIC DMA (E2c)",
                 fontsize=9)
    fig.tight_layout(rect=(0, 0.09, 1, 0.95))
    fig.savefig(out / f"scaling_{key}.png", dpi=80)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--message-us", type=float, default=20.0)
    ap.add_argument("--server-ns-per-byte", type=float, default=1.25,
                    help="c_s of the published model (validation run 1): the first row of "
                         "the switch table")
    ap.add_argument("--worker-ns-per-byte", type=float, default=0.3)
    ap.add_argument("--calibration", type=pathlib.Path, default=CALIBRATION,
                    help="bench/scaling_calibrate.py's JSON: c_s, the shard's I/O, GEMM")
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "docs/img")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--exchange-efficiency", type=float, default=1.0,
                    help="E15 in the switch tables: each link at this share of its rate in "
                         "bsp (bench/exchange_probe.py); 1: links kept busy")
    args = ap.parse_args()
    calib = args.calib = json.loads(args.calibration.read_text())
    today = switches(1, calib)
    for key, (title, _, _, batch) in NETS.items():
        rows = issue_table(key, args, calib)
        print(f"\n{title}, batch {batch} per worker, issue 32's configuration: "
              f"{ISSUE['workers']} H200 workers on {ISSUE['workers']} hosts, "
              f"{ISSUE['servers']} shards, {ISSUE['gbit']} GbE, bsp\n")
        print("| configuration | ms an iteration | images/s | of linear | bottleneck |")
        print("| --- | ---: | ---: | ---: | --- |")
        for label, ms, ips, eff, neck in rows:
            print(f"| {label} | {ms:.1f} | {ips:.0f} | {100 * eff:.0f} % | {neck} |")
    for key, (title, _, _, batch) in NETS.items():
        grids = {}
        for mode, cpu in (("bsp", 1), ("asp", 1), ("bsp-free", 0)):
            extra = today if cpu else dict(today, server_byte_s=0.0, server_io_byte_s=0.0,
                                           curve_byte_s=0.0)
            grids[mode] = predict_grid(key, mode.split("-")[0], args.message_us * 1e-6,
                                       0.0, cpu * args.worker_ns_per_byte * 1e-9, extra)
        on = predict_grid(key, "bsp", args.message_us * 1e-6, 0.0,
                          args.worker_ns_per_byte * 1e-9, switches(ALL_STEP, calib), servers=("W",))
        in_main = predict_grid(key, "bsp", args.message_us * 1e-6, 0.0,
                               args.worker_ns_per_byte * 1e-9, switches(MAIN_STEP, calib),
                               servers=("W",))
        plot(key, grids["bsp"], grids["bsp-free"], args.out, args, on, in_main)
        g = grids["bsp"]
        print(f"\n{title}, batch {batch} per worker: one H200 {g['single']:.0f} images/s, "
              f"{g['mbytes']:.1f} MB of gradients a worker pushes (and pulls) per iteration; "
              f"the baseline, servers on hosts of their own\n")
        print("| link | S | " + " | ".join(f"W={w} bsp" for w in WORKERS) + " | " +
              " | ".join(f"W={w} asp" for w in WORKERS) + " | bottleneck (W=64 bsp) |"
              " W=64 bsp, no CPU cost per byte | W=64 bsp, S = W per host, every switch in"
              " main | W=64 bsp, S = W per host, every row of the switch table |")
        print("| --- | ---: |" + " ---: |" * (2 * len(WORKERS)) + " --- | ---: | ---: | ---: |")
        for gbit in LINKS_GBIT:
            for s in TABLE_SERVERS:
                def cell(grid, w, s=s):
                    p = grid["pred"][gbit, s, w]
                    return f"{p.images_per_s:.0f} ({100 * p.images_per_s / (w * g['single']):.0f}%)"
                print(f"| {gbit} GbE | {s} | " +
                      " | ".join(cell(grids["bsp"], w) for w in WORKERS) + " | " +
                      " | ".join(cell(grids["asp"], w) for w in WORKERS) + " | " +
                      g["pred"][gbit, s, 64].bottleneck + " | " + cell(grids["bsp-free"], 64) +
                      " | " + (cell(in_main, 64, "W") if s == TABLE_SERVERS[-1] else "") +
                      " | " + (cell(on, 64, "W") if s == TABLE_SERVERS[-1] else "") + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
