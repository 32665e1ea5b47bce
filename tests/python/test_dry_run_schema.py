"""--dry-run reads the user's solver and net with Caffe's message classes (built from
proto/caffe.proto) and protobuf's text_format: unknown fields, misspelt enum values,
unknown lr policies, absent mean files, folders that are not LMDBs and LevelDB
sources stop the job before anything starts, named by the user's own file and line."""
from __future__ import annotations

import pathlib
import subprocess

import pytest

from ps_train_util import base_job, write_job
from pstrain import caffe_schema
from pstrain.cli import main

cv2 = pytest.importorskip("cv2")
np = pytest.importorskip("numpy")

SOLVER = """# a user's solver
net: "net.prototxt"
test_iter: 2
test_interval: 10
base_lr: 0.01
lr_policy: "{policy}"
max_iter: 20
"""

NET = """name: "tiny"
layer {{ name: "data" type: "Data" top: "data" top: "label"
  transform_param {{ scale: 0.00390625 {transform} }}
  data_param {{ source: "{source}" batch_size: 4 backend: {backend} }} }}
layer {{ name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param {{ num_output: 2 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "pool" type: "Pooling" bottom: "data" top: "p" pooling_param {{ pool: {pool} kernel_size: 2 }} }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }}
"""


@pytest.fixture
def user_files(tmp_path, build_dir):
    """A solver and one-line-layer net beside a real 4-image LMDB (made with ps-data)."""
    for i in range(4):
        cv2.imwrite(str(tmp_path / f"{i}.png"), np.full((4, 4), 60 * i, np.uint8))
    (tmp_path / "list.txt").write_text("".join(f"{i}.png {i % 2}\n" for i in range(4)))
    subprocess.run([str(build_dir / "bin" / "ps-data"), "images", "-gray",
                    str(tmp_path), str(tmp_path / "list.txt"), str(tmp_path / "lmdb")],
                   check=True, capture_output=True, timeout=60)

    def write(policy="inv", source="lmdb", backend="LMDB", pool="MAX", transform=""):
        (tmp_path / "solver.prototxt").write_text(SOLVER.format(policy=policy))
        (tmp_path / "net.prototxt").write_text(
            NET.format(source=source, backend=backend, pool=pool, transform=transform))
        job = base_job(tmp_path, solver=str(tmp_path / "solver.prototxt"), solver_overrides={})
        return write_job(tmp_path, job)

    return write


def dry_run(capsys, job: pathlib.Path) -> tuple[int, str]:
    code = main([str(job), "--dry-run"])
    return code, capsys.readouterr().err.strip()


def test_the_schema_is_built_from_caffe_proto():
    caffe = caffe_schema.messages()
    assert caffe is not None, "protoc (protobuf-compiler) and proto/caffe.proto are needed"
    net = caffe.cls("NetParameter")()
    assert net.DESCRIPTOR.fields_by_name["layer"].number == 100   # Caffe's field number
    assert caffe.cls("DataParameter").LMDB == 1


def test_a_valid_one_line_net_passes(capsys, user_files):
    code, err = dry_run(capsys, user_files())
    assert code == 0, err


def test_errors_name_the_users_file_and_line(capsys, user_files, tmp_path):
    net, solver = tmp_path / "net.prototxt", tmp_path / "solver.prototxt"
    cases = [
        (dict(pool="MAXX"), f"{net}:7:COLUMN: Enum type \"caffe.PoolingParameter.PoolMethod\" "
                            f"has no value named MAXX."),
        (dict(transform="mirorr: true"), f"{net}:3:COLUMN: Message type "
                                         f"\"caffe.TransformationParameter\" has no field named "
                                         f"\"mirorr\"."),
        (dict(policy="steps"), f"{solver}:6: lr_policy 'steps' is not one of fixed, step, exp, "
                               f"inv, multistep, poly, sigmoid"),
        (dict(transform='mean_file: "mean.binaryproto"'),
         f"{net}:3: layer 'data': transform_param.mean_file 'mean.binaryproto' not found (make "
         f"one with: ps-data mean LMDB mean.binaryproto)"),
        (dict(source=str(tmp_path)), f"{net}:2: layer 'data': data_param.source '{tmp_path}' is "
                                     f"a folder without data.mdb (not an LMDB)"),
        (dict(backend="LEVELDB", source=str(tmp_path)),
         f"{net}:2: layer 'data': data_param.source '{tmp_path}' is a folder without CURRENT "
         f"(not a LevelDB)"),
    ]
    for change, expected in cases:
        job = user_files(**change)
        code, err = dry_run(capsys, job)
        assert code == 2, (change, err)
        if "COLUMN" in expected:   # the column protobuf reports differs between its versions
            head, tail = expected.split("COLUMN")
            assert head in err and err.endswith(tail), (change, err)
        else:
            assert err.endswith(expected), (change, err)
        assert not (tmp_path / "runs").exists()
