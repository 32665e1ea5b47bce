"""The PyTorch side of bench/torch_peer.py: run by an interpreter with torch
(Debian's python3-torch: /usr/bin/python3); prints one JSON object a line.

  time   --model M.prototxt --batch B --iterations N
         forward+backward of the net (loss blob, or the sum of the last top),
         median of N timed iterations after 3 warm-up ones.
  train  --batch B --iters N [--rank R --world W --port P]
         LeNet (configs/nets/lenet_train_test.prototxt) on Fashion-MNIST with
         Caffe's SGD (configs/nets/lenet_solver.prototxt); with --world 2,
         DistributedDataParallel over gloo on 127.0.0.1:P, batch B per process.
         Reports steady images/s over the iterations after the first 20.
  tta    --target 0.89 --test-interval K --max-iter N
         trains as `train` (1 process) and tests on the 10,000 test images
         every K iterations; reports each test with the seconds since training
         began (tests included) and stops at the first accuracy >= target.
  layers --model M.prototxt --batch B --iterations N
         as time, with each layer's forward and backward (medians; how
         backward is split among layers: cmd_layers).
  shapes --model M.prototxt [--batch B]   each layer's top shape.
  check  --weights-dir D --iterations N
         LeNet's TEST net with given weights on the first N x 100 test images:
         mean loss and accuracy (compared with `ps-net test` by torch_peer.py).

--threads T sets torch.set_num_threads (default 1). The data: Debian's
dataset-fashion-mnist IDX files (/usr/share/datasets/fashion-mnist), in file
order, scaled by 1/256 as the prototxt's transform_param, loaded into memory
before any timing starts.
"""
import argparse
import gzip
import json
import os
import pathlib
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import caffe_torch  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
LENET = ROOT / "configs/nets/lenet_train_test.prototxt"
SOLVER = ROOT / "configs/nets/lenet_solver.prototxt"
IDX_DIR = pathlib.Path(os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def read_idx(name: str) -> np.ndarray:
    path = IDX_DIR / name
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def fashion_mnist(split: str) -> tuple:
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(f"{prefix}-images-idx3-ubyte.gz")
    labels = read_idx(f"{prefix}-labels-idx1-ubyte.gz")
    x = torch.from_numpy(images.astype(np.float32) * 0.00390625).unsqueeze(1)
    return x.contiguous(), torch.from_numpy(labels.astype(np.int64))


def solver_params() -> dict:
    with open(SOLVER) as f:
        s = caffe_torch.parse_prototxt(f.read(), str(SOLVER))
    return {k: caffe_torch.one(s, k) for k in ("base_lr", "momentum", "weight_decay", "gamma",
                                               "power", "lr_policy")}


class CaffeSgd:
    """Caffe's SGDSolver update: g += wd * decay_mult * w; v = momentum * v +
    lr * lr_mult * g; w -= v; lr from the inv policy base_lr * (1 + gamma *
    iter)^-power."""

    def __init__(self, net, solver: dict, base_lr: float | None = None) -> None:
        self.mults = caffe_torch.lr_mults(net)
        self.history = {p: torch.zeros_like(p) for p in self.mults}
        self.s = dict(solver)
        if base_lr is not None:
            self.s["base_lr"] = base_lr
        assert self.s["lr_policy"] == "inv", "only the inv policy is implemented"

    def step(self, it: int) -> None:
        s = self.s
        lr = s["base_lr"] * (1 + s["gamma"] * it) ** (-s["power"])
        with torch.no_grad():
            for p, (lr_mult, decay_mult) in self.mults.items():
                g = p.grad
                if s["weight_decay"] and decay_mult:
                    g = g.add(p, alpha=s["weight_decay"] * decay_mult)
                v = self.history[p]
                v.mul_(s["momentum"]).add_(g, alpha=lr * lr_mult)
                p.sub_(v)


def lenet(batch: int):
    net = caffe_torch.build_net(str(LENET), "TRAIN", {"data": [batch, 1, 28, 28],
                                                      "label": [batch]})
    caffe_torch.apply_caffe_fillers(net, seed=1)
    return net


def cmd_time(args) -> None:
    net = caffe_torch.build_net(args.model)
    net.train()
    inputs = net.caffe_inputs(args.batch)
    last = [l for l in net.layers if l.tops][-1].tops[0]

    def step():
        net.zero_grad(set_to_none=False)
        blobs = net(inputs)
        out = blobs["loss"] if "loss" in blobs else blobs[last].sum()
        out.backward()

    for _ in range(3):
        step()
    times = []
    for _ in range(args.iterations):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    emit(event="time", model=args.model, batch=next(iter(inputs.values())).shape[0],
         threads=torch.get_num_threads(), median_ms=statistics.median(times) * 1e3,
         isa=torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") else "",
         torch=torch.__version__)


def cmd_layers(args) -> None:
    """Per-layer forward and backward times of `time`'s step, medians over
    --iterations after 3 warm-up steps. Forward: each layer's call. Backward:
    from the moment the gradient of a layer's top is ready (a tensor hook) to
    the moment the next such gradient is (the one of the layer below), or the
    end of backward() for the lowest; exact for a chain of layers (AlexNet,
    LeNet, CIFAR-10 quick), approximate where branches interleave."""
    net = caffe_torch.build_net(args.model)
    net.train()
    inputs = net.caffe_inputs(args.batch)
    layers = [l for l in net.layers if l.type not in caffe_torch.INPUT_TYPES]
    last = [l for l in net.layers if l.tops][-1].tops[0]
    fwd: dict[str, list] = {l.name: [] for l in layers}
    bwd: dict[str, list] = {l.name: [] for l in layers}

    def step(record: bool) -> None:
        net.zero_grad(set_to_none=False)
        blobs = dict(inputs)
        stamps: list = []
        for l in layers:
            start = time.perf_counter()
            net._run(l, blobs)
            if record:
                fwd[l.name].append(time.perf_counter() - start)
            top = blobs[l.tops[0]]
            if top.requires_grad:
                top.register_hook(lambda g, name=l.name: stamps.append((name, time.perf_counter())))
        out = blobs["loss"] if "loss" in blobs else blobs[last].sum()
        out.backward()
        end = time.perf_counter()
        if record:
            for i, (name, at) in enumerate(stamps):
                bwd[name].append((stamps[i + 1][1] if i + 1 < len(stamps) else end) - at)

    for _ in range(3):
        step(False)
    for _ in range(args.iterations):
        step(True)
    for l in layers:
        emit(event="layer_time", layer=l.name, type=l.type,
             forward_ms=statistics.median(fwd[l.name]) * 1e3,
             backward_ms=statistics.median(bwd[l.name]) * 1e3 if bwd[l.name] else 0.0)


def cmd_shapes(args) -> None:
    net = caffe_torch.build_net(args.model)
    with torch.no_grad():
        emit(event="shapes", shapes=net.shapes(net.caffe_inputs(args.batch)))


def cmd_train(args) -> None:
    ddp = args.world > 1
    if ddp:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}",
                                rank=args.rank, world_size=args.world)
    x, y = fashion_mnist("train")
    net = lenet(args.batch)
    model = torch.nn.parallel.DistributedDataParallel(net) if ddp else net
    sgd = CaffeSgd(net, solver_params())
    n = x.shape[0] // (args.batch * args.world)
    warm = 20
    start = None
    for it in range(args.iters):
        if it == warm:
            start = time.perf_counter()
        k = (it % n) * args.world + args.rank
        xb, yb = x[k * args.batch:(k + 1) * args.batch], y[k * args.batch:(k + 1) * args.batch]
        net.zero_grad(set_to_none=False)
        loss = model({"data": xb, "label": yb})["loss"]
        loss.backward()
        sgd.step(it)
    seconds = time.perf_counter() - start
    emit(event="train", rank=args.rank, world=args.world, batch=args.batch,
         threads=torch.get_num_threads(), iters=args.iters - warm,
         images_per_s=(args.iters - warm) * args.batch / seconds, loss=float(loss))
    if ddp:
        dist.destroy_process_group()


def evaluate(net, x, y) -> float:
    net.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], 100):
            blobs = net({"data": x[i:i + 100], "label": y[i:i + 100]})
            correct += int((blobs["ip2"].argmax(1) == y[i:i + 100]).sum())
    net.train()
    return correct / x.shape[0]


def cmd_tta(args) -> None:
    x, y = fashion_mnist("train")
    tx, ty = fashion_mnist("test")
    net = lenet(args.batch)
    sgd = CaffeSgd(net, solver_params(), args.lr)
    n = x.shape[0] // args.batch
    start = time.perf_counter()
    for it in range(args.max_iter + 1):
        if it % args.test_interval == 0 and it > 0:
            acc = evaluate(net, tx, ty)
            emit(event="test", iter=it, accuracy=acc, seconds=time.perf_counter() - start)
            if acc >= args.target:
                emit(event="reached", iter=it, accuracy=acc, seconds=time.perf_counter() - start)
                return
        k = it % n
        net.zero_grad(set_to_none=False)
        loss = net({"data": x[k * args.batch:(k + 1) * args.batch],
                    "label": y[k * args.batch:(k + 1) * args.batch]})["loss"]
        loss.backward()
        sgd.step(it)
    emit(event="not_reached", iter=args.max_iter, seconds=time.perf_counter() - start)


def cmd_check(args) -> None:
    """LeNet's TEST net on the first --iterations x 100 test images with the
    weights of --weights-dir (manifest.json + raw float32 files, written by
    torch_peer.py from a .caffemodel): mean loss and accuracy, as ps-net test."""
    tx, ty = fashion_mnist("test")
    net = caffe_torch.build_net(str(LENET), "TEST", {"data": [100, 1, 28, 28], "label": [100]})
    folder = pathlib.Path(args.weights_dir)
    manifest = json.loads((folder / "manifest.json").read_text())
    params = {name: [np.fromfile(folder / f, np.float32) for f in files]
              for name, files in manifest.items()}
    caffe_torch.load_caffe_params(net, params)
    net.eval()
    loss, acc = 0.0, 0.0
    with torch.no_grad():
        for i in range(args.iterations):
            blobs = net({"data": tx[i * 100:(i + 1) * 100], "label": ty[i * 100:(i + 1) * 100]})
            loss += float(blobs["loss"])
            acc += float(blobs["accuracy"])
    emit(event="check", iterations=args.iterations, loss=loss / args.iterations,
         accuracy=acc / args.iterations)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["time", "layers", "train", "tta", "shapes", "check"])
    parser.add_argument("--model")
    parser.add_argument("--batch", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--world", type=int, default=1)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--target", type=float, default=0.89)
    parser.add_argument("--test-interval", type=int, default=500)
    parser.add_argument("--max-iter", type=int, default=10000)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--weights-dir")
    args = parser.parse_args()
    if args.command in ("train", "tta") and args.batch == 0:
        args.batch = 64
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    {"time": cmd_time, "layers": cmd_layers, "train": cmd_train, "tta": cmd_tta, "shapes": cmd_shapes,
     "check": cmd_check}[args.command](
        args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
