#!/usr/bin/env python3
"""The PyTorch peer of bench/torch_peer.py builds the nets as PSTrain does
(these checks were tests/python/test_torch_peer.py; CI installs no PyTorch,
so they run here, by hand, where Debian's python3-torch is installed:
`bash scripts/setup.sh bench` installs it):

  1. every layer's top shape of the PyTorch net (bench/caffe_torch.py, run
     under /usr/bin/python3) equals ps-net's, for LeNet and CIFAR-10 quick;
  2. Caffe's ResNet-50 built by caffe_torch has the stage shapes of the
     paper's Table 1 and torchvision's 25,557,032 parameters, which it reaches
     only with every Scale folded into the BatchNorm2d before it (53 pairs).

ps-net prints no shapes, so they are read back from what it trains: for each
layer's top, InnerProduct probes with num_output 1 folding from axis 1, 2 and
3 are appended to the net; a probe's weight has prod(shape[axis:]) columns,
which `ps-net train` (one iteration, lr 0) writes into its final .caffemodel.
Consecutive products give every dimension but the batch, which the prototxt
fixes.

usage: python3 bench/torch_shapes.py [--build build]
Prints one line per check (ok or FAILED and why); exit 0 when all passed, 1
when one failed, 2 when PyTorch or ps-net is missing.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))
import caffe_torch  # noqa: E402  (parses prototxt without torch)

BUILD = ROOT / "build"   # --build


class CheckFailed(Exception):
    pass


def check(condition: bool, message) -> None:
    if not condition:
        raise CheckFailed(str(message))


TORCH_PYTHON = "/usr/bin/python3"


def torch_missing() -> str | None:
    try:
        out = subprocess.run([TORCH_PYTHON, "-c", "import torch"], capture_output=True,
                             text=True, timeout=60)
    except OSError as e:
        return f"{TORCH_PYTHON}: {e}"
    return None if out.returncode == 0 else (
        f"{TORCH_PYTHON} cannot import torch (bash scripts/setup.sh bench installs "
        f"python3-torch): {out.stderr.strip().splitlines()[-1] if out.stderr else ''}")


BATCH = 2  # both nets at this batch: the shapes, not the speed, are checked


def torch_shapes(model: pathlib.Path) -> dict[str, list[int]]:
    out = subprocess.run([TORCH_PYTHON, str(ROOT / "bench/torch_worker.py"), "shapes", "--model",
                          str(model), "--batch", str(BATCH)], capture_output=True, text=True,
                         timeout=120)
    check(out.returncode == 0, f"bench/torch_worker.py shapes {model.name}: {out.stderr[-1500:]}")
    return json.loads(out.stdout.splitlines()[-1])["shapes"]


def probe_layer(name: str, bottom: str, axis: int) -> str:
    return (f'layer {{ name: "{name}" type: "InnerProduct" bottom: "{bottom}" top: "{name}" '
            f'inner_product_param {{ num_output: 1 axis: {axis} bias_term: false '
            f'weight_filler {{ type: "constant" }} }} }}\n')


def pstrain_shapes(model: pathlib.Path, tmp: pathlib.Path,
                   ranks: dict[str, int]) -> dict[str, list[int]]:
    """Each layer's top shape after the batch axis, as ps-net builds the net."""
    # DummyData's shapes at batch BATCH (as ps-net time --batch does).
    text = re.sub(r"shape \{ dim: \d+", f"shape {{ dim: {BATCH}", model.read_text())
    layers = caffe_torch.net_layers(caffe_torch.parse_prototxt(text, str(model)))
    tops = {l.name: l.tops[0] for l in layers if l.tops and ranks.get(l.name, 0) >= 2}
    probes = "".join(probe_layer(f"probe_{name}_{axis}", top, axis)
                     for name, top in tops.items() for axis in range(1, ranks[name]))
    (tmp / "net.prototxt").write_text(text + probes)
    (tmp / "solver.prototxt").write_text(
        f'net: "{tmp}/net.prototxt"\nbase_lr: 0\nlr_policy: "fixed"\nmax_iter: 1\n'
        f'snapshot: 0\nsnapshot_prefix: "{tmp}/probe"\ndisplay: 0\n')
    ps_net = BUILD / "bin/ps-net"
    out = subprocess.run([str(ps_net), "train", "--solver", str(tmp / "solver.prototxt"),
                          "--threads", "1", "--json"], capture_output=True, text=True,
                         timeout=120)
    check(out.returncode == 0, out.stderr)
    from pstrain import caffe_schema
    caffe = caffe_schema.messages()
    check(caffe is not None, "protoc and proto/caffe.proto are needed to read a .caffemodel")
    net = caffe.cls("NetParameter").FromString((tmp / "probe_iter_1.caffemodel").read_bytes())
    columns = {l.name: l.blobs[0].shape.dim[1] for l in net.layer if l.name.startswith("probe_")}
    shapes = {}
    for name in tops:
        prods = [columns[f"probe_{name}_{axis}"] for axis in range(1, ranks[name])] + [1]
        shapes[name] = [prods[i] // prods[i + 1] for i in range(len(prods) - 1)]
        check(all(prods[i] % prods[i + 1] == 0 for i in range(len(prods) - 1)), (name, prods))
    return shapes


def check_net_shapes(net: str, tmp_path: pathlib.Path) -> None:
    model = ROOT / "configs/nets" / f"{net}.prototxt"
    theirs = torch_shapes(model)
    ranks = {name: len(shape) for name, shape in theirs.items()}
    ours = pstrain_shapes(model, tmp_path, ranks)
    check(set(ours) == {n for n, r in ranks.items() if r >= 2} and len(ours) >= 6,
          f"probed tops {sorted(ours)}, PyTorch's of rank >= 2 "
          f"{sorted(n for n, r in ranks.items() if r >= 2)}")
    for name, dims in ours.items():
        check(theirs[name][1:] == dims, f"{net} layer {name}: PyTorch {theirs[name]}, "
                                        f"ps-net [N, {', '.join(map(str, dims))}]")
    check(all(shape[0] == BATCH for shape in theirs.values() if shape),
          f"PyTorch's batch is not {BATCH} everywhere: {theirs}")
    if net == "cifar10_quick_bench":
        # Caffe's ceil-mode pooling: 32 -> 16 (floor mode would give 15).
        check(theirs["pool1"][2:] == [16, 16], f"pool1 is {theirs['pool1']}, Caffe's 16 x 16")


def check_resnet50() -> None:
    """Caffe's ResNet-50 built by caffe_torch: the stage shapes of the paper's
    Table 1 and torchvision's 25,557,032 parameters, which it reaches only
    with every Scale folded into the BatchNorm2d before it (53 pairs)."""
    model = ROOT / "configs/nets/resnet50_deploy.prototxt"
    shapes = torch_shapes(model)
    expected = {"conv1": [2, 64, 112, 112], "pool1": [2, 64, 56, 56], "res2c": [2, 256, 56, 56],
                "res3d": [2, 512, 28, 28], "res4f": [2, 1024, 14, 14], "res5c": [2, 2048, 7, 7],
                "pool5": [2, 2048, 1, 1], "fc1000": [2, 1000]}
    got = {name: shapes.get(name) for name in expected}
    check(got == expected, f"stage shapes {got}, expected {expected}")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import caffe_torch as c; "
            "n = c.build_net(sys.argv[2]); "
            "print(sum(p.numel() for p in n.parameters()), len(n.affine_of), len(c.lr_mults(n)))")
    out = subprocess.run([TORCH_PYTHON, "-c", code, str(ROOT / "bench"), str(model)],
                         capture_output=True, text=True, timeout=120)
    check(out.returncode == 0, out.stderr[-1500:])
    check(out.stdout.split() == ["25557032", "53", "161"],
          f"parameters, Scale-BatchNorm pairs, lr_mults: {out.stdout.split()}, expected "
          f"25557032 53 161")


def main() -> int:
    global BUILD
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--build", default=str(BUILD), help="the build folder holding bin/ps-net")
    args = parser.parse_args()
    BUILD = pathlib.Path(args.build).resolve()
    missing = torch_missing()
    if missing:
        print(f"torch_shapes: {missing}", file=sys.stderr)
        return 2
    if not (BUILD / "bin/ps-net").exists():
        print(f"torch_shapes: {BUILD}/bin/ps-net not found: build first (bash scripts/setup.sh)",
              file=sys.stderr)
        return 2
    checks = [(f"{net}: every top shape as ps-net's", lambda net=net: check_in_tmp(net))
              for net in ("lenet_bench", "cifar10_quick_bench")]
    checks.append(("resnet50_deploy: torchvision's shapes and parameters", check_resnet50))
    failed = 0
    for name, run in checks:
        try:
            run()
            print(f"ok      {name}")
        except (CheckFailed, AssertionError) as e:
            failed += 1
            print(f"FAILED  {name}: {e}")
    return 1 if failed else 0


def check_in_tmp(net: str) -> None:
    with tempfile.TemporaryDirectory(prefix="torch-shapes-") as d:
        check_net_shapes(net, pathlib.Path(d))


if __name__ == "__main__":
    sys.exit(main())
