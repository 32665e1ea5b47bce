#!/usr/bin/env python3
"""Caffe's own nets on the CPU: `ps-net time` beside PyTorch and BVLC Caffe
(issue 32), forward+backward of one batch on one thread.

Nets (configs/nets/, Caffe's prototxts): AlexNet b10 (deploy), LeNet b64 and
CIFAR-10 quick b100 (the DummyData bench nets). Programs, alternating within
each round (the order rotates every round, so a burst of load from elsewhere
hits each alike), --rounds rounds, medians:

  PSTrain  `ps-net time --threads 1` (engine auto; --engine-cache as given,
           by default a fresh file in a temporary folder, so every run times
           its own choices);
  PyTorch  the same net built layer for layer (bench/caffe_torch.py) by
           bench/torch_worker.py under --torch-python (Debian's python3-torch);
  Caffe    `caffe time -model M -iterations N` of a BVLC Caffe build given
           with --caffe PATH (no Caffe is built here: build it outside the
           repository, CPU_ONLY, OpenBLAS), OPENBLAS_NUM_THREADS=1. A net
           without a loss layer (AlexNet deploy) gets `force_backward: true`,
           without which Caffe runs no backward at all; Caffe then also
           computes conv1's input gradient, which PSTrain and PyTorch skip.

Every figure leaves out the data layer (Input, DummyData): Caffe and PSTrain
draw new DummyData input at every forward, PyTorch makes its input once.
Every figure is printed with the CPU's model name and the instruction set each
program ran: PSTrain's own kernels (PSTRAIN_CPU_ISA or the CPU's best) and
oneDNN's (ONEDNN_VERBOSE's isa line), PyTorch's ATen capability (its oneDNN
runs under the same cap as PSTrain's), and the OpenBLAS core each program's
BLAS picks (native: OpenBLAS's own choice; an OPENBLAS_CORETYPE in the
caller's environment is removed). --isa avx2 emulates an AVX2-only machine as
bench/torch_peer.py does (ONEDNN_MAX_CPU_ISA=AVX2, OPENBLAS_CORETYPE=Haswell,
PSTRAIN_CPU_ISA=avx2; DNNL_MAX_CPU_ISA and ATEN_CPU_CAPABILITY for PyTorch).

--layers adds each net's per-layer medians (forward / backward ms) of the
three programs side by side (PyTorch's backward split by tensor hooks:
torch_worker.py layers). The load average is printed before and after.

usage: python3 bench/caffe_peers.py [--caffe PATH] [--build build] [--rounds 3]
                                    [--nets alexnet,lenet,cifar10] [--isa native|avx2]
                                    [--layers] [--markdown] [--json FILE]
"""
from __future__ import annotations

import argparse
import ctypes.util
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORKER = ROOT / "bench/torch_worker.py"
# key, name, prototxt, batch, timed iterations a process
NETS = {"alexnet": ("AlexNet", "configs/nets/alexnet_deploy.prototxt", 10, 5),
        "lenet": ("LeNet", "configs/nets/lenet_bench.prototxt", 64, 20),
        "cifar10": ("CIFAR-10 quick", "configs/nets/cifar10_quick_bench.prototxt", 100, 10)}
DATA_TYPES = ("Input", "DummyData", "Data", "MemoryData")
LOSS = re.compile(r'type:\s*"\w*Loss"')


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def environments(isa: str) -> dict[str, dict]:
    """Per program, its environment: one thread, and the ISA cap for --isa avx2."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "PSTRAIN_CPU_ISA",
                         "ATEN_CPU_CAPABILITY", "OPENBLAS_CORETYPE")}
    base.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    envs = {"pstrain": dict(base), "pytorch": dict(base), "caffe": dict(base)}
    if isa == "avx2":
        envs["pstrain"].update(ONEDNN_MAX_CPU_ISA="AVX2", OPENBLAS_CORETYPE="Haswell",
                               PSTRAIN_CPU_ISA="avx2")
        envs["pytorch"].update(ONEDNN_MAX_CPU_ISA="AVX2", DNNL_MAX_CPU_ISA="AVX2",
                               OPENBLAS_CORETYPE="Haswell", ATEN_CPU_CAPABILITY="avx2")
        envs["caffe"].update(OPENBLAS_CORETYPE="Haswell")
    return envs


def run(cmd: list, env: dict, timeout: float = 1800) -> subprocess.CompletedProcess:
    out = subprocess.run([str(c) for c in cmd], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({out.returncode}): "
                           f"{(out.stderr or out.stdout)[-800:]}")
    return out


def json_lines(text: str) -> list:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


# --- the machine and the instruction sets ------------------------------------------------

def cpu_model() -> str:
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def cpu_isa() -> str:
    flags = pathlib.Path("/proc/cpuinfo").read_text()
    return "AVX-512" if " avx512f" in flags else "AVX2" if " avx2" in flags else "SSE"


def openblas_core(binary: str, env: dict) -> str:
    """The OpenBLAS core (kernel set) the BLAS library `binary` links would pick
    under `env` (OPENBLAS_CORETYPE overrides OpenBLAS's own choice)."""
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    libs = [l.split("=>")[1].split()[0] for l in ldd.splitlines()
            if "=>" in l and re.search(r"lib(open)?blas", l)]
    lib = libs[0] if libs else ctypes.util.find_library("openblas")
    if not lib:
        return "BLAS ?"
    code = (f"import ctypes; b = ctypes.CDLL({lib!r}); "
            "f = getattr(b, 'openblas_get_corename', None); "
            "f and setattr(f, 'restype', ctypes.c_char_p); "
            "print(f().decode() if f else 'not OpenBLAS')")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return f"OpenBLAS {out.stdout.strip() or '?'}"


def pstrain_isa(ps_net: pathlib.Path, env: dict) -> str:
    """Our kernels' variant, oneDNN's ISA (ONEDNN_VERBOSE) and the BLAS core."""
    out = run([ps_net, "time", "--model", "configs/nets/lenet_bench.prototxt", "--threads", "1",
               "--iterations", "1", "--engine", "fast"], dict(env, ONEDNN_VERBOSE="1"))
    onednn = next((line.split("isa:", 1)[1].strip() for line in out.stdout.splitlines()
                   if "isa:" in line), "?")
    kernels = env.get("PSTRAIN_CPU_ISA") or ("avx512" if cpu_isa() == "AVX-512" else "avx2")
    return f"kernels {kernels}, oneDNN {onednn}, {openblas_core(str(ps_net), env)}"


def torch_isa(python: str, env: dict) -> str:
    code = ("import glob, os, torch; print(torch.__version__); print(torch.__config__.show()); "
            "print('lib=' + (glob.glob(os.path.join(os.path.dirname(torch.__file__), "
            "'lib', 'libtorch_cpu.so*')) or [''])[0])")
    lines = run([python, "-c", code], env, timeout=300).stdout.splitlines()
    aten = next((l.split(":", 1)[1].strip() for l in lines if "CPU capability usage" in l), "?")
    lib = next((l[4:] for l in lines if l.startswith("lib=")), "")
    blas = openblas_core(lib, env) if lib else "BLAS ?"
    return f"PyTorch {lines[0]}, ATen {aten}, {blas}"


def caffe_isa(caffe: str, env: dict) -> str:
    return openblas_core(caffe, env)


# --- one timed process of each program ----------------------------------------------------

def time_pstrain(args, env, model: str, batch: int, iters: int) -> dict:
    out = run([args.build / "bin/ps-net", "time", "--model", model, "--batch", batch,
               "--threads", "1", "--iterations", iters, "--json", "--engine-cache",
               args.engine_cache], env)
    events = json_lines(out.stdout)
    layers = {e["layer"]: (e["forward_ms"], e["backward_ms"], e["type"]) for e in events
              if e.get("event") == "layer_time"}
    total = [e for e in events if e.get("event") == "time"][0]["median_total_ms"]
    data = sum(f + b for f, b, t in layers.values() if t in DATA_TYPES)
    return {"ms": total - data, "layers": layers}


def time_pytorch(args, env, model: str, batch: int, iters: int) -> dict:
    out = run([args.torch_python, WORKER, "time", "--model", model, "--batch", batch,
               "--threads", "1", "--iterations", iters], env)
    result = {"ms": json_lines(out.stdout)[-1]["median_ms"], "layers": {}}
    if args.layers:
        out = run([args.torch_python, WORKER, "layers", "--model", model, "--batch", batch,
                   "--threads", "1", "--iterations", iters], env)
        result["layers"] = {e["layer"]: (e["forward_ms"], e["backward_ms"], e["type"])
                            for e in json_lines(out.stdout)}
    return result


CAFFE_LAYER = re.compile(r"\]\s+(\S+)\s+(forward|backward): ([0-9.]+) ms")
CAFFE_TOTAL = re.compile(r"Average Forward-Backward: ([0-9.]+) ms")


def caffe_model(model: str, batch: int, tmp: pathlib.Path) -> pathlib.Path:
    """The prototxt for Caffe: the batch set, force_backward where no loss."""
    text = (ROOT / model).read_text()
    text = re.sub(r"(shape\s*\{\s*dim:\s*)\d+", lambda m: m.group(1) + str(batch), text)
    if not LOSS.search(text):
        text = "force_backward: true\n" + text
    path = tmp / pathlib.Path(model).name
    path.write_text(text)
    return path


def time_caffe(args, env, model: pathlib.Path, data_layers: list, iters: int) -> dict:
    out = run([args.caffe, "time", "-model", model, "-iterations", iters], env)
    text = out.stdout + out.stderr
    layers: dict = {}
    for name, direction, ms in CAFFE_LAYER.findall(text):
        f, b = layers.get(name, (0.0, 0.0))
        layers[name] = (float(ms), b) if direction == "forward" else (f, float(ms))
    total = CAFFE_TOTAL.search(text)
    if total is None:
        raise RuntimeError(f"caffe time printed no average: {text[-800:]}")
    data = sum(sum(layers.get(n, (0.0, 0.0))) for n in data_layers)
    return {"ms": float(total.group(1)) - data,
            "layers": {n: (f, b, "") for n, (f, b) in layers.items()}}


# --- rounds, medians, tables ----------------------------------------------------------------

def data_layer_names(model: str) -> list:
    text = (ROOT / model).read_text()
    names = []
    for block in re.findall(r"layer\s*\{(.*?)\n\}", text, re.S):
        name = re.search(r'name:\s*"([^"]+)"', block)
        kind = re.search(r'type:\s*"([^"]+)"', block)
        if name and kind and kind.group(1) in DATA_TYPES:
            names.append(name.group(1))
    return names


def median_layers(runs: list) -> dict:
    names = list(runs[0]["layers"]) if runs else []
    return {n: (statistics.median(r["layers"][n][0] for r in runs if n in r["layers"]),
                statistics.median(r["layers"][n][1] for r in runs if n in r["layers"]))
            for n in names}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    parser.add_argument("--caffe", help="a BVLC Caffe `caffe` binary (tools/caffe)")
    parser.add_argument("--torch-python", default="/usr/bin/python3")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--nets", default="alexnet,lenet,cifar10")
    parser.add_argument("--isa", choices=["native", "avx2"], default="native")
    parser.add_argument("--engine-cache", default="",
                        help="ps-net's --engine-cache (default: a new file per run)")
    parser.add_argument("--layers", action="store_true", help="per-layer medians too")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args()
    args.build = args.build if args.build.is_absolute() else ROOT / args.build
    keys = [k for k in args.nets.split(",") if k]
    unknown = [k for k in keys if k not in NETS]
    if unknown or args.rounds < 1:
        parser.error(f"--nets takes {', '.join(NETS)} (got {', '.join(unknown)})" if unknown
                     else "--rounds must be at least 1")
    envs = environments(args.isa)
    programs = ["pstrain", "pytorch"] + (["caffe"] if args.caffe else [])
    load_before = pathlib.Path("/proc/loadavg").read_text().split()[:3]
    with tempfile.TemporaryDirectory(prefix="caffe-peers-") as tmp:
        tmp = pathlib.Path(tmp)
        if not args.engine_cache:
            args.engine_cache = str(tmp / "engine-cache.tsv")
        isa = {"pstrain": pstrain_isa(args.build / "bin/ps-net", envs["pstrain"]),
               "pytorch": torch_isa(args.torch_python, envs["pytorch"])}
        if args.caffe:
            isa["caffe"] = caffe_isa(args.caffe, envs["caffe"])
        machine = {"cpu": cpu_model(), "cpu_isa": cpu_isa(), "cores": os.cpu_count(),
                   "emulated": args.isa, "isa": isa}
        log(f"{machine['cpu']} ({machine['cpu_isa']}, {args.isa}): " +
            "; ".join(f"{p}: {i}" for p, i in isa.items()))
        rows = []
        for key in keys:
            name, model, batch, iters = NETS[key]
            caffe_net = caffe_model(model, batch, tmp) if args.caffe else None
            data_layers = data_layer_names(model)
            runs: dict[str, list] = {p: [] for p in programs}
            for r in range(args.rounds):
                order = programs[r % len(programs):] + programs[:r % len(programs)]
                for who in order:
                    if who == "pstrain":
                        runs[who].append(time_pstrain(args, envs[who], model, batch, iters))
                    elif who == "pytorch":
                        runs[who].append(time_pytorch(args, envs[who], model, batch, iters))
                    else:
                        runs[who].append(time_caffe(args, envs[who], caffe_net, data_layers,
                                                    iters))
                log(f"{name} b{batch} round {r}: " +
                    ", ".join(f"{p} {runs[p][-1]['ms']:.1f} ms" for p in programs))
            ms = {p: statistics.median(x["ms"] for x in runs[p]) for p in programs}
            peers = [p for p in programs if p != "pstrain"]
            faster = min(peers, key=lambda p: ms[p])
            rows.append({"net": name, "batch": batch, "cpu": machine["cpu"],
                         "cpu_isa": machine["cpu_isa"], "emulated": args.isa, "isa": isa,
                         "ms": ms, "runs": {p: [x["ms"] for x in runs[p]] for p in programs},
                         "faster_peer": faster, "ratio_to_faster_peer": ms["pstrain"] / ms[faster],
                         "layers": ({p: median_layers(runs[p]) for p in programs}
                                    if args.layers else {})})
    load_after = pathlib.Path("/proc/loadavg").read_text().split()[:3]
    report(rows, programs, machine, load_before, load_after, args)
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "load_before": load_before,
                                         "load_after": load_after, "rows": rows}, indent=1))
    return 0


def report(rows, programs, machine, load_before, load_after, args) -> None:
    titles = {"pstrain": "PSTrain", "pytorch": "PyTorch", "caffe": "Caffe"}
    print(f"CPU: {machine['cpu']}, {machine['cpu_isa']}"
          f"{' (AVX2 emulated)' if args.isa == 'avx2' else ''}; load average before "
          f"{' '.join(load_before)}, after {' '.join(load_after)}; medians of {args.rounds} "
          "rounds, one thread, data layer left out")
    for p in programs:
        print(f"  {titles[p]}: {machine['isa'][p]}")
    head = ["net", "batch", "CPU (ISA)"] + [f"{titles[p]} ms" for p in programs] + \
        ["PSTrain / faster peer"]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(
        ["---", "---:", "---"] + ["---:"] * (len(programs) + 1)) + " |"]
    for row in rows:
        cpu = f"{row['cpu']} ({row['cpu_isa']}{', AVX2 emulated' if args.isa == 'avx2' else ''})"
        lines.append("| " + " | ".join(
            [row["net"], str(row["batch"]), cpu] + [f"{row['ms'][p]:.1f}" for p in programs] +
            [f"{row['ratio_to_faster_peer']:.2f} ({titles[row['faster_peer']]})"]) + " |")
    print("\n".join(lines) if args.markdown else "\n".join(l.replace("|", " ") for l in lines))
    for row in rows:
        if not row["layers"]:
            continue
        print(f"\n{row['net']} b{row['batch']} per layer, forward / backward ms "
              f"({row['cpu']}, {row['cpu_isa']}"
              f"{', AVX2 emulated' if args.isa == 'avx2' else ''}):")
        print("| layer | " + " | ".join(titles[p] for p in programs) + " |")
        print("| --- | " + " | ".join("---:" for _ in programs) + " |")
        for name in row["layers"]["pstrain"]:
            cells = []
            for p in programs:
                f, b = row["layers"][p].get(name, (float("nan"), float("nan")))
                cells.append(f"{f:.2f} / {b:.2f}")
            print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
