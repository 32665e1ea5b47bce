"""Prototxts written in any layout protobuf accepts: a data layer on one line, the
TEST layer before the TRAIN one, paths inside comments and strings, solver fields
sharing a line. The copies keep every line of the user's file at its number."""
from __future__ import annotations

import re

from ps_train_util import ROOT, base_job, leftover_processes, write_job
from pstrain import Job
from pstrain.cli import main
from pstrain.solver import SolverText, absolute_net_text, batch_size, data_sources


def one_line_lenet(tmp_path, train_source: str | None = None):
    """The repository's LeNet with each data layer written on one line (absolute
    sources unless train_source is given); returns the net's path."""
    text = (ROOT / "configs/nets/lenet_train_test.prototxt").read_text()
    data = ROOT / "data/fashion-mnist"
    train = train_source or f"{data}/train_lmdb"
    layers = (
        f'layer {{ name: "fmnist" type: "Data" top: "data" top: "label" data_param {{ '
        f'source: "{data}/test_lmdb" batch_size: 100 backend: LMDB }} include {{ phase: TEST }} '
        f'transform_param {{ scale: 0.00390625 }} }}\n'
        f'layer {{ name: "fmnist" type: "Data" top: "data" top: "label" data_param {{ '
        f'source: "{train}" batch_size: 32 backend: LMDB }} include {{ phase: TRAIN }} '
        f'transform_param {{ scale: 0.00390625 }} }}\n')
    start = text.index("layer {")
    rest = text.index("layer {", text.index("test_lmdb"))
    net = tmp_path / "nets" / "one_line.prototxt"
    net.parent.mkdir(exist_ok=True)
    net.write_text(text[:start] + layers + text[rest:])
    return net


def solver_for(tmp_path, net) -> str:
    text = (ROOT / "configs/nets/lenet_solver.prototxt").read_text()
    text = re.sub(r'^net: .*$', f'net: "{net}"', text, flags=re.M)
    path = tmp_path / "nets" / "solver.prototxt"
    path.write_text(text)
    return str(path)


def test_train_batch_size_even_when_the_test_layer_comes_first(tmp_path):
    assert batch_size(one_line_lenet(tmp_path).read_text()) == 32
    assert batch_size("layer { type: 'Data' include { phase: TEST } data_param "
                      "{ batch_size: 100 } }\nlayer { type: 'Data' data_param "
                      "< batch_size: 7 > }") == 7
    assert batch_size("layer { type: 'Data' include { phase: TEST } data_param "
                      "{ batch_size: 100 } }") == 100   # no TRAIN layer: the first one


def test_sources_with_their_layer_and_line():
    text = ('# source: "commented"\nname: "n"\nlayer { name: "d" type: "Data"\n'
            '  data_param: { source: "a" } transform_param { mean_file: "m" } }\n')
    found = [(s.layer, s.field, s.path, s.line) for s in data_sources(text)]
    assert found == [("d", "source", "a", 4), ("d", "mean_file", "m", 4)]


def test_copy_keeps_lines_and_leaves_comments_and_strings(tmp_path):
    (tmp_path / "rel_lmdb").mkdir()
    net = tmp_path / "net.prototxt"
    user = ('name: "source: \\"rel_lmdb\\""  # source: "rel_lmdb"\n'
            '# source: "rel_lmdb"\n'
            'layer { name: "d" type: "Data" data_param { source: "rel_lmdb" batch_size: 2 } }\n'
            'layer {\n  name: "e"\n}\n')
    net.write_text(user)
    copy, missing = absolute_net_text(net)
    assert missing == []
    user_lines, copy_lines = user.splitlines(), copy.splitlines()
    assert len(copy_lines) == len(user_lines)
    assert copy_lines[:2] == user_lines[:2]
    assert copy_lines[3:] == user_lines[3:]
    assert copy_lines[2] == user_lines[2].replace('"rel_lmdb"', f'"{tmp_path / "rel_lmdb"}"')


def test_solver_fields_sharing_a_line(tmp_path):
    path = tmp_path / "solver.prototxt"
    path.write_text('net: "n.prototxt"\nbase_lr: 0.01 lr_policy: "step"  # two\n'
                    'net_param { layer { name: "base_lr: 3" } }\nmax_iter: 5\n')
    solver = SolverText.read(path)
    assert solver.get("base_lr") == ["0.01"]
    assert solver.get("lr_policy") == ["step"]
    assert solver.get("name") == []
    solver.replace("base_lr", ["0.5"])
    lines = solver.text().splitlines()
    assert len(lines) == 5
    assert solver.get("base_lr") == ["0.5"]
    assert solver.get("lr_policy") == ["step"]
    assert lines[1].endswith('lr_policy: "step"  # two')


def test_missing_relative_source_names_the_users_file_and_line(tmp_path, capsys):
    net = one_line_lenet(tmp_path, train_source="no/such_lmdb")
    job = base_job(tmp_path, solver=solver_for(tmp_path, net))
    path = write_job(tmp_path, job)
    assert main([str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    line = net.read_text().splitlines().index(
        next(l for l in net.read_text().splitlines() if "no/such_lmdb" in l)) + 1
    assert f"{net}:{line}: layer 'fmnist': data source 'no/such_lmdb' not found" in err, err


def test_one_line_data_layer_dry_run_and_run(tmp_path, capsys, fashion_mnist):
    net = one_line_lenet(tmp_path)
    job = base_job(tmp_path, name="oneline", solver=solver_for(tmp_path, net))
    job["solver_overrides"] = {"max_iter": 20, "test_interval": 20, "test_iter": 2,
                               "snapshot": 20, "display": 10}
    path = write_job(tmp_path, job)
    assert main([str(path), "--dry-run"]) == 0, capsys.readouterr().err
    result = Job.from_yaml(path).run(quiet=True, timeout=180)
    assert result.summary["status"] == "ok", result.summary
    assert not leftover_processes(str(result.run_dir))
    copy = (result.run_dir / "net.prototxt").read_text().splitlines()
    assert len(copy) == len(net.read_text().splitlines())
