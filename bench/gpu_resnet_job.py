"""ResNet-50 (batch 32 per worker, DummyData) as a bsp job on one GPU: a GPU server
shard and 1, then 2 GPU workers sharing the device, over loopback tcp, over ipc with
shared-memory rings (docs/wire-protocol.md; rings of --ring-mb, so that one
iteration's 102 MB fit), both with --gpu-ipc false, and with GPU IPC pushes
(transport gpuipc: ipc sockets, --gpu-ipc true; docs/wire-protocol.md, "GPU IPC
pushes"). Prints one RESULT line per run (the job's images/s: the median per-worker
rate of the second half of the run times the number of workers; gpu_ipc_pushes, the
shard's count of pushes read through GPU IPC, which must be > 0 for gpuipc and 0
otherwise) and the 2-over-1 ratio of each transport, and, as the issue's yardstick,
`ps-net train --gpu` of the same solver alone and each 1-worker rate over it
(issue 28 asks >= 0.8 for gpuipc: reported, not enforced); a run counts only if
every loss it reported is finite and the servers refused no push. Before them, a job that must fail: the
net with the deploy net's global statistics of zero pushes NaN at iteration 0, and
the server must refuse it and stop (RESULT nan_check=refused). Called by
bench/gpu_check.sh.

usage: python3 bench/gpu_resnet_job.py ROOT BUILD_DIR OUT_DIR [--gpu N] [--iterations N]
           [--transports tcp,ipc,gpuipc] [--ring-mb 512] [--cpu] [--batch 32]
--cpu runs the same jobs on the CPU (a check of this script where no GPU is lent;
use --iterations 4: an iteration takes 10-20 s there). A CPU worker of batch 32
peaks at about 12 GB (activations and their diffs on the host; measured with
ipc rings of 512 MiB), so 2 of them and the shard need about 25 GB: before each
CPU job the script compares the workers times the largest process it has run
so far with MemAvailable and reports the job as skipped when they do not fit
(use --batch 8). On a 23 GB machine without swap the kernel's OOM killer
otherwise takes a worker mid-job (which is how the 2-worker job "hung" in
earlier dry runs: its peers waited for the dead worker). A job that fails
(tests/e2e/ps_job.py: JobFailed, TimeoutError) is one failed RESULT line; the
script goes on with the next.
"""
import argparse
import math
import pathlib
import re
import sys
import tempfile
import time

DUMMY_DATA = """layer {
  name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param {
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 3 }
    shape { dim: BATCH dim: 3 dim: 224 dim: 224 } shape { dim: BATCH }
  }
}
"""
LOSS = """layer {
  name: "loss" type: "SoftmaxWithLoss" bottom: "fc1000" bottom: "label" top: "loss"
}
"""


def train_net(deploy: str, global_stats: bool = False, batch: int = 32) -> str:
    """The deploy net with DummyData in place of Input, a loss in place of prob, and
    BatchNorm on batch statistics as in training. With global_stats the deploy net's
    use_global_stats: true stays: with statistics of zero each BatchNorm scales its
    output by 1/sqrt(eps), the activations overflow and the loss is NaN at iteration
    0, which the server must refuse (the NaN check of main)."""
    if not global_stats:
        deploy, k = re.subn(r"batch_norm_param\s*\{\s*use_global_stats:\s*true\s*\}", "",
                            deploy)
        if k == 0:
            raise SystemExit("gpu_resnet_job.py: resnet50_deploy.prototxt has no BatchNorm layer")
    net, n = re.subn(r'layer \{\s*name: "data"\s*type: "Input".*?\n\}\n',
                     DUMMY_DATA.replace("BATCH", str(batch)), deploy,
                     count=1, flags=re.S)
    net, m = re.subn(r'layer \{\s*name: "prob"\s*type: "Softmax".*?\n\}\n?', LOSS, net,
                     count=1, flags=re.S)
    if n != 1 or m != 1:
        raise SystemExit("gpu_resnet_job.py: resnet50_deploy.prototxt has no Input or prob layer")
    return net


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=pathlib.Path)
    parser.add_argument("build", type=pathlib.Path)
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--gpu", default="0")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--transports", default="tcp,ipc,gpuipc")
    parser.add_argument("--ring-mb", type=int, default=512)
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    sys.path.insert(0, str(args.root / "tests" / "e2e"))
    from ps_job import run_job

    out = args.out / "resnet"
    out.mkdir(parents=True, exist_ok=True)
    (out / "train.prototxt").write_text(
        train_net((args.root / "configs/nets/resnet50_deploy.prototxt").read_text(),
                  batch=args.batch))
    solver = out / "solver.prototxt"
    solver.write_text(f'net: "{out}/train.prototxt"\nbase_lr: 0.01\nmomentum: 0.9\n'
                      f'lr_policy: "fixed"\nmax_iter: {args.iterations}\n'
                      f'display: {max(1, args.iterations // 6)}\n'
                      f'snapshot: 0\nsnapshot_prefix: "{out}/resnet"\n')
    # First, a job that must fail: the net with global statistics of zero pushes NaN
    # at iteration 0, which the server refuses and stops on (security.nonfinite:
    # stop, exit 3). An earlier GPU run of that net ended "ok" with NaN weights.
    (out / "nan.prototxt").write_text(
        train_net((args.root / "configs/nets/resnet50_deploy.prototxt").read_text(), True,
                  args.batch))
    nan_solver = out / "nan_solver.prototxt"
    nan_solver.write_text(solver.read_text().replace(f"{out}/train.prototxt",
                                                     f"{out}/nan.prototxt")
                          .replace(f"max_iter: {args.iterations}", "max_iter: 2"))
    nan_refused = nan_check(args, run_job, nan_solver)
    alone = single_process_rate(args, solver)
    rates = {}
    for transport in args.transports.split(","):
        for workers in (1, 2):
            rates[transport, workers] = run(args, run_job, solver, transport, workers)
        if rates[transport, 1]:
            print(f"RESULT transport={transport} "
                  f"scaling_2_over_1={rates[transport, 2] / rates[transport, 1]:.2f}"
                  + (f" one_worker_over_ps_net_train={rates[transport, 1] / alone:.2f}"
                     if alone else ""), flush=True)
    return 0 if all(rates.values()) and nan_refused else 1


def single_process_rate(args, solver: pathlib.Path) -> float:
    """`ps-net train --gpu N` of the solver, no parameter server: its images/s (the
    median of the second half, as for the jobs); 0 when it failed."""
    import json
    import subprocess
    cmd = [str(args.build / "bin" / "ps-net"), "train", "--solver", str(solver), "--json"]
    if not args.cpu:
        cmd += ["--gpu", args.gpu]
    try:
        done = subprocess.run(cmd, cwd=args.root, capture_output=True, text=True,
                              timeout=600 if args.cpu else 120)
    except subprocess.TimeoutExpired:
        print("RESULT ps_net_train=timeout", flush=True)
        return 0.0
    rates = []
    for line in done.stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if (event.get("event") == "train" and event.get("iter", 0) >= args.iterations // 2
                and "images_per_second" in event):
            rates.append(event["images_per_second"])
    rate = sorted(rates)[len(rates) // 2] if rates else 0.0
    print(f"RESULT ps_net_train images_per_s={rate:.1f} exit={done.returncode}", flush=True)
    if done.returncode != 0:
        print(done.stderr[-1500:], flush=True)
    return rate if done.returncode == 0 else 0.0


def device_args(args) -> tuple[list, list]:
    """The server's and each worker's device flags (none with --cpu)."""
    if args.cpu:
        return [], []
    return ["--device", f"gpu:{args.gpu}"], ["--gpu", args.gpu]


def nan_check(args, run_job, solver: pathlib.Path) -> bool:
    """True when the server stopped the NaN job at its first push (exit 3, naming it)."""
    server_args, worker_args = device_args(args)
    try:
        result = run_job(args.build, solver, workers=1, mode="bsp",
                         timeout=600 if args.cpu else 100, cwd=args.root,
                         server_args=server_args, worker_args={0: worker_args},
                         chunk_bytes=4 << 20)
    except (RuntimeError, TimeoutError) as e:  # ps_job.JobFailed, a timeout
        print(f"RESULT nan_check=NOT-REFUSED failed: {e}"[:3000], flush=True)
        return False
    server = result.returncodes.get("server-0")
    named = "the job stops (security.nonfinite: stop)" in result.stderr.get("server-0", "")
    refused = server == 3 and named
    print(f"RESULT nan_check={'refused' if refused else 'NOT-REFUSED'} server_exit={server} "
          f"worker_exit={result.returncodes.get('worker-0')}", flush=True)
    if not refused:
        print(result.stderr.get("server-0", "")[-1500:], flush=True)
    return refused


def memory_shortfall(workers: int) -> str:
    """Why `workers` CPU workers may not fit in memory now ("" when they do): each is
    taken to need as much as the largest process this script has run so far
    (the nan check's worker, ps-net train: the same net and batch)."""
    import resource
    largest = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB
    with open("/proc/meminfo") as f:
        meminfo = dict(line.split(":", 1) for line in f)
    available = int(meminfo["MemAvailable"].split()[0]) * 1024
    need = workers * largest
    if need <= available:
        return ""
    return (f"{workers} workers need about {need / 1e9:.1f} GB ({largest / 1e9:.1f} GB each, "
            f"the largest process so far), {available / 1e9:.1f} GB is available: the kernel's "
            f"OOM killer would take one mid-job (try --batch 8)")


def run(args, run_job, solver: pathlib.Path, transport: str, workers: int) -> float:
    """One job; its images/s (0 when it failed or was skipped)."""
    if args.cpu and (short := memory_shortfall(workers)):
        print(f"RESULT transport={transport} workers={workers} skipped: {short}", flush=True)
        return 0.0
    server_args, worker_args = device_args(args)
    if transport in ("ipc", "gpuipc"):
        server_args = server_args + ["--shared-memory-mb", str(args.ring_mb)]
        worker_args = worker_args + ["--shared-memory-mb", str(args.ring_mb)]
    gpu_ipc = transport == "gpuipc"
    # true makes a refusal an error (the path must run); a CPU worker cannot offer at all.
    worker_args = worker_args + ["--gpu-ipc",
                                 "false" if not gpu_ipc else "auto" if args.cpu else "true"]
    with tempfile.TemporaryDirectory(prefix="resnet-ipc-") as sockets:
        bind = "tcp://127.0.0.1:0" if transport == "tcp" else f"ipc://{sockets}/server-{{k}}"
        start = time.monotonic()
        try:
            result = run_job(args.build, solver, workers=workers, mode="bsp",
                             timeout=600 if args.cpu else 100,
                             cwd=args.root, server_args=server_args,
                             worker_args={r: worker_args for r in range(workers)},
                             chunk_bytes=4 << 20, bind=bind)
        except (RuntimeError, TimeoutError) as e:  # ps_job.JobFailed, a timeout
            print(f"RESULT transport={transport} workers={workers} failed after "
                  f"{time.monotonic() - start:.0f} s: {e}"[:4000], flush=True)
            return 0.0
        wall = time.monotonic() - start
    bad = {n: c for n, c in result.returncodes.items() if c != 0}
    for name, code in bad.items():
        print(f"{name}: exit {code}\n{result.stderr[name][-2000:]}")
    # The second half only: the first iterations include cuDNN's algorithm search.
    per_worker = sorted(e.get("images_per_second", 0) for e in result.of("train")
                        if e.get("iter", 0) >= args.iterations // 2)
    rate = per_worker[len(per_worker) // 2] * workers if per_worker else 0.0
    shared = sum(e.get("shared_memory_bytes_received", 0) for e in result.of("done"))
    # A rate is worth nothing if the net did not train: every reported loss must
    # be finite (an earlier GPU run of this job timed a net whose weights had
    # turned NaN), and the servers must have refused no push.
    losses = [e.get("loss") for e in result.of("train") if "loss" in e]
    finite = bool(losses) and all(isinstance(v, (int, float)) and math.isfinite(v)
                                  for v in losses)
    rejected = sum(e.get("nonfinite_rejected", 0) for e in result.of("done"))
    # The path that ran: worker 0's server_stats event carries the shards' count of
    # pushes read through GPU IPC (ShardStats.gpu_ipc_pushes).
    ipc_pushes = sum(e.get("gpu_ipc_pushes", 0) for e in result.of("server_stats"))
    path_ok = (ipc_pushes > 0) == gpu_ipc or args.cpu
    loss_text = f"{losses[0]}->{losses[-1]}" if losses else "none"
    print(f"RESULT transport={transport} workers={workers} images_per_s={rate:.1f} "
          f"wall_s={wall:.1f} server_bytes_through_shared_memory={shared} "
          f"gpu_ipc_pushes={ipc_pushes}{'' if path_ok else ' (WRONG PATH)'} "
          f"loss={loss_text} finite={finite} nonfinite_rejected={rejected} "
          f"exits={'ok' if not bad else bad}", flush=True)
    return rate if finite and rejected == 0 and not bad and path_ok else 0.0

if __name__ == "__main__":
    sys.exit(main())
