#!/usr/bin/env python3
"""PyTorch as PSTrain's peer, in one run, on this machine (issue 13):

  1. time: forward+backward at 1 thread of LeNet b64, CIFAR-10 quick b100,
     AlexNet b10 and ResNet-50 b8 (configs/nets/*), `ps-net time --threads 1`
     alternating with the same net built layer for layer in PyTorch
     (bench/caffe_torch.py; its ResNet folds each Scale into the BatchNorm2d
     before it, as torchvision's does);
     medians over --rounds alternating rounds (the order flips every round);
     PSTrain's figure leaves out its data layer (Caffe's DummyData draws new
     random input at every forward; PyTorch's input is made once);
  2. train: LeNet on Fashion-MNIST, steady images/s: `ps-net train` b64,
     PS 1 worker b64 + 1 server bsp, PS 2 workers b32 + 1 server bsp
     (bench/ps_lenet.py), PyTorch 1 process (1 and 2 threads) b64 and DDP
     over gloo 2 processes x 1 thread x b32 (same global batch 64);
  3. tta: seconds to 89% test accuracy (the 10,000 test images, testing
     included in the time): PyTorch 1 process, 1 thread, with Caffe's LeNet
     solver (configs/nets/lenet_solver.prototxt, test every 500 iterations)
     against PSTrain's fastest configuration found, configs/lenet_fast.yaml
     (run by ps-train; time from its start to the test record that reaches
     the target, from the run folder's metrics.jsonl; stopped there).

PyTorch runs under --torch-python (default /usr/bin/python3, Debian's
python3-torch); this driver needs only the standard library.
--isa avx2 emulates an AVX2-only machine on an AVX-512 one:
ONEDNN_MAX_CPU_ISA=AVX2 and OPENBLAS_CORETYPE=Haswell for both,
PSTRAIN_CPU_ISA=avx2 for PSTrain's own kernels, and DNNL_MAX_CPU_ISA=AVX2 and
ATEN_CPU_CAPABILITY=avx2 for PyTorch. Ratios are PSTrain / PyTorch times
(below 1: PSTrain faster) or PSTrain / PyTorch images/s (above 1: faster).

  0. check (first): the PyTorch LeNet and `ps-net test` give the same loss and
     accuracy with the same weights (a `ps-net train` snapshot) on the same
     1,000 test images.

usage: python3 bench/torch_peer.py [--build build] [--quick] [--isa native|avx2]
                                   [--parts check,time,train,tta] [--json FILE]
"""
import argparse
import array
import json
import os
import pathlib
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import ps_lenet  # noqa: E402  (PSTrain's side of part 2)

WORKER = ROOT / "bench/torch_worker.py"
NETS = [("LeNet", "configs/nets/lenet_bench.prototxt", 64),
        ("CIFAR-10 quick", "configs/nets/cifar10_quick_bench.prototxt", 100),
        ("AlexNet (deploy)", "configs/nets/alexnet_deploy.prototxt", 10),
        ("ResNet-50 (deploy)", "configs/nets/resnet50_deploy.prototxt", 8)]
FAST_JOB = ROOT / "configs/lenet_fast.yaml"


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def environments(isa: str) -> tuple[dict, dict]:
    """(env for PSTrain's programs, env for PyTorch)."""
    ps, pt = dict(os.environ), dict(os.environ)
    for env in (ps, pt):
        env.pop("ONEDNN_MAX_CPU_ISA", None)
    if isa == "avx2":
        ps.update(ONEDNN_MAX_CPU_ISA="AVX2", OPENBLAS_CORETYPE="Haswell", PSTRAIN_CPU_ISA="avx2")
        pt.update(ONEDNN_MAX_CPU_ISA="AVX2", OPENBLAS_CORETYPE="Haswell", DNNL_MAX_CPU_ISA="AVX2",
                  ATEN_CPU_CAPABILITY="avx2")
    for env in (ps, pt):
        env["OMP_NUM_THREADS"] = "1"
    return ps, pt


def machine(torch_python: str, pt_env: dict) -> dict:
    cpuinfo = pathlib.Path("/proc/cpuinfo").read_text()
    model = next((l.split(":", 1)[1].strip() for l in cpuinfo.splitlines()
                  if l.startswith("model name")), "unknown CPU")
    out = subprocess.run([torch_python, "-c", "import torch; print(torch.__version__); "
                          "print(torch.__config__.show())"], env=pt_env, capture_output=True,
                         text=True, timeout=120)
    lines = out.stdout.splitlines()
    aten = next((l.split(":", 1)[1].strip() for l in lines if "CPU capability usage" in l), "?")
    return {"cpu": model, "cores": os.cpu_count(), "avx512": " avx512f" in cpuinfo,
            "torch": lines[0] if lines else f"not importable: {out.stderr[-300:]}",
            "aten_isa": aten}


def json_lines(text: str) -> list:
    return [json.loads(l) for l in text.splitlines() if l.startswith("{")]


def run_json(cmd: list, env: dict, timeout: float = 900) -> list:
    out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({out.returncode}): "
                           f"{out.stderr[-800:]}")
    return json_lines(out.stdout)


# --- 1. forward+backward ------------------------------------------------------------------

def part_time(args, ps_env, pt_env) -> list:
    rows = []
    for name, model, batch in NETS:
        big = "AlexNet" in name or "ResNet" in name
        if args.quick and big:
            iters = 2 if "ResNet" in name else 3
        else:
            iters = (3 if "ResNet" in name else 5) if big else args.iterations
        ps, pt = [], []
        for r in range(args.rounds):
            order = ["ps", "pt"] if r % 2 == 0 else ["pt", "ps"]
            for who in order:
                if who == "ps":
                    e = run_json([str(args.build / "bin/ps-net"), "time", "--model", model,
                                  "--batch", str(batch), "--threads", "1", "--iterations",
                                  str(iters), "--json"], ps_env)
                    total = [x for x in e if x.get("event") == "time"][0]["median_total_ms"]
                    # Like for like: PyTorch's inputs are made once, while Caffe's
                    # DummyData draws fresh random input at every forward.
                    data = sum(x["forward_ms"] + x["backward_ms"] for x in e
                               if x.get("event") == "layer_time"
                               and x.get("type") in ("DummyData", "Input"))
                    ps.append(total - data)
                else:
                    e = run_json([args.torch_python, str(WORKER), "time", "--model", model,
                                  "--batch", str(batch), "--threads", "1", "--iterations",
                                  str(iters)], pt_env)
                    pt.append(e[-1]["median_ms"])
            log(f"time {name} round {r}: PSTrain {ps[-1]:.1f} ms, PyTorch {pt[-1]:.1f} ms")
        rows.append({"net": name, "batch": batch, "pstrain_ms": statistics.median(ps),
                     "pytorch_ms": statistics.median(pt), "pstrain_runs": ps, "pytorch_runs": pt,
                     "ratio": statistics.median(a / b for a, b in zip(ps, pt))})
    return rows


# --- 2. LeNet training throughput ---------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_train(args, pt_env, threads: int, world: int, batch: int, iters: int) -> float:
    """Steady images/s of PyTorch LeNet training (summed over DDP processes)."""
    port = free_port()
    procs = []
    try:
        for rank in range(world):
            cmd = [args.torch_python, str(WORKER), "train", "--batch", str(batch), "--iters",
                   str(iters), "--threads", str(threads), "--rank", str(rank), "--world",
                   str(world), "--port", str(port)]
            procs.append(subprocess.Popen(cmd, env=pt_env, cwd=ROOT, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        total = 0.0
        for p in procs:
            out, err = p.communicate(timeout=600)
            if p.returncode != 0:
                raise RuntimeError(f"PyTorch training failed: {err[-800:]}")
            total += json_lines(out)[-1]["images_per_s"]
        return total
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def part_train(args, ps_env, pt_env) -> dict:
    iters = args.train_iters
    display = max(10, iters // 6)
    build = args.build
    with tempfile.TemporaryDirectory(prefix="torch-peer-") as tmp:
        tmp = pathlib.Path(tmp)
        solver64 = ps_lenet.write_solver(tmp / "b64", 64, iters, display)
        solver32 = ps_lenet.write_solver(tmp / "b32", 32, iters, display)
        configs = [
            ("PSTrain ps-net train, b64", lambda: ps_lenet.run_single(
                build, solver64, 64, iters)["steady_images_per_s"]),
            ("PSTrain 1 worker b64 + 1 server, bsp", lambda: ps_lenet.run_ps(
                build, solver64, 1, 64, iters, "bsp", 0)["steady_images_per_s"]),
            ("PSTrain 2 workers b32 + 1 server, bsp", lambda: ps_lenet.run_ps(
                build, solver32, 2, 32, iters, "bsp", 0)["steady_images_per_s"]),
            ("PSTrain 2 workers b32 + 1 server, bsp, ipc + shared memory",
             lambda: ps_lenet.run_ps(build, solver32, 2, 32, iters, "bsp", 0,
                                     transport="ipc")["steady_images_per_s"]),
            ("PyTorch 1 process, 1 thread, b64", lambda: torch_train(
                args, pt_env, 1, 1, 64, iters)),
            ("PyTorch 1 process, 2 threads, b64", lambda: torch_train(
                args, pt_env, 2, 1, 64, iters)),
            ("PyTorch DDP gloo, 2 processes x 1 thread x b32", lambda: torch_train(
                args, pt_env, 1, 2, 32, iters)),
        ]
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(ps_env)  # ps_lenet starts PSTrain's programs with os.environ
        try:
            results = {name: [] for name, _ in configs}
            for r in range(args.train_rounds):
                for name, fn in (configs if r % 2 == 0 else configs[::-1]):
                    results[name].append(fn())
                    log(f"train round {r}: {name}: {results[name][-1]:.0f} images/s")
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return {name: statistics.median(v) for name, v in results.items()} | {"_runs": results}


# --- 3. time to accuracy ------------------------------------------------------------------

def torch_tta(args, pt_env) -> dict:
    start = time.time()
    events = run_json([args.torch_python, str(WORKER), "tta", "--target", str(args.target),
                       "--test-interval", "500", "--max-iter", "10000", "--threads", "1"],
                      pt_env, timeout=1200)
    wall = time.time() - start
    reached = [e for e in events if e["event"] == "reached"]
    return {"seconds": reached[0]["seconds"] if reached else float("nan"),
            "iter": reached[0]["iter"] if reached else None, "process_wall_s": wall,
            "tests": [(e["iter"], round(e["accuracy"], 4)) for e in events
                      if e["event"] == "test"]}


def pstrain_tta(args, ps_env, job: pathlib.Path) -> dict:
    """Runs the job with ps-train; seconds from the orchestrator's start to the
    first test record at or above the target (testing, start-up included), read
    from the run folder's metrics.jsonl as it grows. Once the target is reached
    the job is stopped (SIGINT: ps-train stops every process it started)."""
    with tempfile.TemporaryDirectory(prefix="torch-peer-tta-") as tmp:
        out_dir = pathlib.Path(tmp)
        env = ps_env | {"PYTHONPATH": str(ROOT / "python"), "PSTRAIN_BUILD_DIR": str(args.build)}
        start = time.time()
        proc = subprocess.Popen([sys.executable, "-m", "pstrain", str(job), "--quiet", "--set",
                                 f"output={out_dir}"], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        records, hit = [], []
        try:
            while proc.poll() is None and time.time() - start < 1200:
                time.sleep(0.5)
                metrics = next(out_dir.glob("*/metrics.jsonl"), None)
                if metrics is None:
                    continue
                records = [json.loads(l) for l in metrics.read_text().splitlines()
                           if l.endswith("}")]
                hit = [r for r in records if r.get("event") == "test" and
                       r.get("accuracy", 0) >= args.target]
                if hit:
                    break
            wall = time.time() - start
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        output = proc.stdout.read()
        if not hit and proc.returncode not in (0, None):
            raise RuntimeError(f"ps-train {job} failed ({proc.returncode}): {output[-800:]}")
    tests = [r for r in records if r.get("event") == "test"]
    return {"seconds": hit[0]["time"] - start if hit else float("nan"),
            "iter": hit[0]["iter"] if hit else None, "process_wall_s": wall,
            "tests": [(r["iter"], round(r["accuracy"], 4)) for r in tests]}


def part_tta(args, ps_env, pt_env) -> dict:
    pt = torch_tta(args, pt_env)
    log(f"tta PyTorch: {pt}")
    ps = pstrain_tta(args, ps_env, args.job)
    log(f"tta PSTrain: {ps}")
    return {"pytorch": pt, "pstrain": ps, "ratio": ps["seconds"] / pt["seconds"]}


# --- 0. the same arithmetic --------------------------------------------------------------

def part_check(args, ps_env, pt_env) -> dict:
    """Trains LeNet 100 iterations with `ps-net train`, then evaluates its
    .caffemodel on the first 1,000 test images with `ps-net test` and with the
    PyTorch net holding the same weights (read with the repository's Caffe
    message classes, python/pstrain/caffe_schema.py)."""
    sys.path.insert(0, str(ROOT / "python"))
    from pstrain import caffe_schema
    caffe = caffe_schema.messages()
    if caffe is None:
        return {"skipped": "protoc or proto/caffe.proto missing: cannot read a .caffemodel"}
    with tempfile.TemporaryDirectory(prefix="torch-peer-check-") as tmp:
        tmp = pathlib.Path(tmp)
        solver = ps_lenet.write_solver(tmp, 64, 100, 50)
        run_json([str(args.build / "bin/ps-net"), "train", "--solver", str(solver), "--threads",
                  "1", "--json"], ps_env)
        weights = tmp / "snap_iter_100.caffemodel"
        ours = [e for e in run_json([str(args.build / "bin/ps-net"), "test", "--model",
                                     str(tmp / "net.prototxt"), "--weights", str(weights),
                                     "--iterations", "10", "--json"], ps_env)
                if e.get("event") == "test"][0]
        net = caffe.cls("NetParameter").FromString(weights.read_bytes())
        manifest = {}
        for layer in net.layer:
            files = []
            for k, blob in enumerate(layer.blobs):
                name = f"{layer.name}.{k}.f32"
                array.array("f", blob.data).tofile(open(tmp / name, "wb"))
                files.append(name)
            if files:
                manifest[layer.name] = files
        (tmp / "manifest.json").write_text(json.dumps(manifest))
        theirs = run_json([args.torch_python, str(WORKER), "check", "--weights-dir", str(tmp),
                           "--iterations", "10"], pt_env)[-1]
    return {"pstrain_loss": ours["loss"], "pytorch_loss": theirs["loss"],
            "pstrain_accuracy": ours["accuracy"], "pytorch_accuracy": theirs["accuracy"]}


# --- report -------------------------------------------------------------------------------

def report(args, info, load, res) -> None:
    print(f"CPU: {info['cpu']} ({info['cores']} cores, AVX-512 "
          f"{'present' if info['avx512'] else 'absent'}); --isa {args.isa}: oneDNN max ISA "
          f"{'AVX2' if args.isa == 'avx2' else 'native'}, PyTorch ATen {info['aten_isa']}; "
          f"torch {info['torch']}; load average before {load[0]}, after {load[1]}\n")
    if "check" in res:
        c = res["check"]
        if "skipped" in c:
            print(f"same weights, same images: {c['skipped']}\n")
        else:
            print("LeNet after 100 iterations of `ps-net train`, its .caffemodel on the first "
                  f"1,000 test images: loss PSTrain {c['pstrain_loss']:.6f}, PyTorch "
                  f"{c['pytorch_loss']:.6f} (relative difference "
                  f"{abs(c['pstrain_loss'] - c['pytorch_loss']) / abs(c['pytorch_loss']):.1e}); "
                  f"accuracy {c['pstrain_accuracy']:.4f} and {c['pytorch_accuracy']:.4f}\n")
    if "time" in res:
        print(f"forward+backward, 1 thread, medians of {args.rounds} alternating rounds\n")
        print("| net | batch | PSTrain ms | PyTorch ms | PSTrain / PyTorch (median of rounds) |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for r in res["time"]:
            print(f"| {r['net']} | {r['batch']} | {r['pstrain_ms']:.1f} | {r['pytorch_ms']:.1f} | "
                  f"{r['ratio']:.2f} |")
        print()
    if "train" in res:
        t = res["train"]
        print(f"LeNet on Fashion-MNIST, {args.train_iters} iterations, global batch 64, steady "
              f"images/s, medians of {args.train_rounds} rounds\n")
        print("| configuration | images/s |")
        print("| --- | ---: |")
        for name, v in t.items():
            if not name.startswith("_"):
                print(f"| {name} | {v:.0f} |")
        ddp = t["PyTorch DDP gloo, 2 processes x 1 thread x b32"]
        one = t["PyTorch 1 process, 1 thread, b64"]
        ddp_name = "PyTorch DDP gloo, 2 processes x 1 thread x b32"
        for name in ("PSTrain 2 workers b32 + 1 server, bsp",
                     "PSTrain 2 workers b32 + 1 server, bsp, ipc + shared memory"):
            rounds = ", ".join(f"{a / b:.2f}" for a, b in zip(t["_runs"][name],
                                                              t["_runs"][ddp_name]))
            print(f"\n{name[8:]} / PyTorch DDP: {t[name] / ddp:.2f} (goal >= 1.25; rounds "
                  f"{rounds})")
        print(f"\nPSTrain 1 worker + 1 server / ps-net train: "
              f"{t['PSTrain 1 worker b64 + 1 server, bsp'] / t['PSTrain ps-net train, b64']:.2f}; "
              f"ps-net train / PyTorch 1 thread: {t['PSTrain ps-net train, b64'] / one:.2f}\n")
    if "tta" in res:
        t = res["tta"]
        print(f"time to {args.target:.0%} test accuracy (10,000 test images, testing included)\n")
        print("| run | seconds | iteration | tests (iteration, accuracy) |")
        print("| --- | ---: | ---: | --- |")
        for name, key in (("PyTorch, Caffe's LeNet solver, 1 thread", "pytorch"),
                          (f"PSTrain {args.job.relative_to(ROOT)}", "pstrain")):
            r = t[key]
            tests = ", ".join(f"({i}, {a})" for i, a in r["tests"][:12])
            print(f"| {name} | {r['seconds']:.1f} | {r['iter']} | {tests} |")
        print(f"\nPSTrain / PyTorch time to {args.target:.0%}: {t['ratio']:.2f} (goal <= 0.5)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--torch-python", default="/usr/bin/python3")
    parser.add_argument("--isa", choices=["native", "avx2"], default="native")
    parser.add_argument("--parts", default="check,time,train,tta")
    parser.add_argument("--quick", action="store_true",
                        help="fewer iterations and rounds, time to 85%% instead of 89%% "
                        "(a smoke run of a few minutes)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--train-iters", type=int, default=300)
    parser.add_argument("--train-rounds", type=int, default=3)
    parser.add_argument("--target", type=float, default=0.89)
    parser.add_argument("--job", default=str(FAST_JOB))
    parser.add_argument("--json", help="also write every figure to this file")
    args = parser.parse_args()
    args.build = (ROOT / args.build).resolve()
    args.job = pathlib.Path(args.job).resolve()
    if args.quick:
        args.iterations, args.train_iters, args.train_rounds = 5, 120, 1
        args.target = min(args.target, 0.85)
    parts = args.parts.split(",")
    ps_env, pt_env = environments(args.isa)
    if not (args.build / "bin/ps-net").exists():
        log(f"torch_peer: {args.build}/bin/ps-net not found: build first (bash scripts/setup.sh)")
        return 2
    try:
        info = machine(args.torch_python, pt_env)
    except OSError as e:
        log(f"torch_peer: --torch-python {args.torch_python}: {e}")
        return 2
    if info["torch"].startswith("not importable"):
        log(f"torch_peer: {args.torch_python} cannot import torch (bash scripts/setup.sh bench "
            f"installs python3-torch): {info['torch']}")
        return 2
    log(f"machine: {info}")
    load_before = open("/proc/loadavg").read().split()[:3]
    res = {}
    if "check" in parts:
        res["check"] = part_check(args, ps_env, pt_env)
        log(f"check: {res['check']}")
    if "time" in parts:
        res["time"] = part_time(args, ps_env, pt_env)
    if "train" in parts:
        res["train"] = part_train(args, ps_env, pt_env)
    if "tta" in parts:
        res["tta"] = part_tta(args, ps_env, pt_env)
    load_after = open("/proc/loadavg").read().split()[:3]
    load = (" ".join(load_before), " ".join(load_after))
    report(args, info, load, res)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"machine": info, "load": load,
                                                       "results": res}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
