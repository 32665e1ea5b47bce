"""How a job fails: a permanent worker failure (an unknown layer type, a
diverged run) fails the job at once, without restarts, with the program's
message naming the user's files; the exit codes mirror common/exit_code.hpp.
(A worker killed by a signal is restarted: test_run.py.)"""
from __future__ import annotations

import pathlib
import re

from ps_train_util import ROOT, base_job, leftover_processes, write_job
from pstrain import Job, exitcodes


def lenet_with_layer_type(tmp_path, layer: str, new_type: str):
    """The user's LeNet with one layer's type changed, its data sources made
    absolute (it lives outside the repository); returns (net path, line of
    that layer's `layer {`)."""
    text = (ROOT / "configs/nets/lenet_train_test.prototxt").read_text()
    text = text.replace('source: "data/', f'source: "{ROOT}/data/')
    lines = text.splitlines()
    name_at = next(i for i, l in enumerate(lines) if l.strip() == f'name: "{layer}"')
    type_at = next(i for i in range(name_at, len(lines)) if lines[i].strip().startswith("type:"))
    lines[type_at] = re.sub(r'type: "\w+"', f'type: "{new_type}"', lines[type_at])
    layer_at = max(i for i in range(name_at + 1) if lines[i].strip().startswith("layer"))
    net = tmp_path / "user_nets" / "my_lenet.prototxt"
    net.parent.mkdir()
    net.write_text("\n".join(lines) + "\n")
    return net, layer_at + 1


def solver_for(tmp_path, net, **fields) -> str:
    text = (ROOT / "configs/nets/lenet_solver.prototxt").read_text()
    text = re.sub(r'^net: .*$', f'net: "{net}"', text, flags=re.M)
    for name, value in fields.items():
        text = re.sub(rf'^{name}: .*$', f"{name}: {value}", text, flags=re.M)
    path = tmp_path / "user_nets" / "my_solver.prototxt"
    path.write_text(text)
    return str(path)


def test_unknown_layer_type_fails_at_once_naming_the_users_file(tmp_path, fashion_mnist):
    net, line = lenet_with_layer_type(tmp_path, "relu1", "Frobnicate")
    job = base_job(tmp_path, name="badtype", solver=solver_for(tmp_path, net))
    job["restart"] = {"max_worker_restarts": 3}
    result = Job.from_yaml(write_job(tmp_path, job)).run(quiet=True, timeout=120)
    s = result.summary
    assert s["status"] == "failed"
    assert s["worker_restarts"] == 0
    assert not [r for r in result.metrics if r["event"] == "restart"]
    # "worker-R exited with 1 (a permanent failure): ps-worker R: <user's net>:<line>: ..."
    m = re.match(r"worker-(\d) exited with 1 \(a permanent failure\): ps-worker \1: (.*)$",
                 s["message"])
    assert m, s["message"]
    assert m.group(2).startswith(f"{net}:{line}: layer 'relu1' (Frobnicate): unknown layer type "
                                 f"'Frobnicate': not a Caffe layer type either"), s["message"]
    assert str(result.run_dir / "net.prototxt") not in s["message"]   # nor is the copy
    assert "not restarted" in s["message"]
    # One attempt: each worker log holds the error once and no restart.
    for rank in (0, 1):
        log = (result.run_dir / "logs" / f"worker-{rank}.log").read_text()
        assert "restart" not in log
        assert log.count("unknown layer type 'Frobnicate'") <= 1
    # At once: no iteration ran, and ps-train stopped the server (SIGTERM) before any
    # worker had initialised it, instead of leaving it to its idle timeout.
    assert s["iterations"] == 0
    server_log = (result.run_dir / "logs" / "server-0.log").read_text().splitlines()
    assert server_log[-1].endswith(
        '"message":"interrupted: no checkpoint (not initialised, nothing to save)"}'), server_log
    assert not leftover_processes(str(result.run_dir))


def test_a_diverged_run_fails_without_restarts(tmp_path, fashion_mnist):
    net, _ = lenet_with_layer_type(tmp_path, "relu1", "ReLU")   # unchanged LeNet
    job = base_job(tmp_path, name="diverged", solver=solver_for(tmp_path, net))
    job["solver_overrides"].update(base_lr=1e30, lr_policy="fixed", max_iter=200,
                                   test_interval=0, snapshot=0)
    result = Job.from_yaml(write_job(tmp_path, job)).run(quiet=True, timeout=120)
    s = result.summary
    assert s["status"] == "failed"
    assert s["worker_restarts"] == 0
    assert re.match(r"worker-(\d) exited with 3 \(training diverged\): ps-worker \1: training "
                    r"diverged: the loss is \S+ at iteration \d+ \(lower base_lr or check the "
                    r"data\); not restarted", s["message"]), s["message"]
    assert not leftover_processes(str(result.run_dir))


def test_messages_name_the_users_files_and_lines(tmp_path, fashion_mnist):
    net, _ = lenet_with_layer_type(tmp_path, "relu1", "ReLU")
    solver = solver_for(tmp_path, net)
    job = base_job(tmp_path, name="paths", solver=solver)
    plan = Job.from_yaml(write_job(tmp_path, job)).plan()
    copy = plan.run_dir / "net.prototxt"
    assert plan.originals == {plan.solver_copy: pathlib.Path(solver), copy: net}
    assert plan.user_paths(f"ps-worker 0: {copy}:12: bad; {plan.solver_copy}:3:7: worse") == \
        f"ps-worker 0: {net}:12: bad; {solver}:3:7: worse"
    # The copies keep every line of the user's files where it was.
    assert plan.nets["net.prototxt"][1].splitlines()[:40] == net.read_text().splitlines()[:40]
    user = pathlib.Path(solver).read_text().splitlines()
    copied = plan.solver_text.splitlines()
    for i, l in enumerate(user):
        if l.startswith(("net:", "snapshot_prefix:", "max_iter:", "test_interval:", "test_iter:",
                         "snapshot:", "display:")):
            assert copied[i] == f"# {l}  (ps-train: replaced below)"
        else:
            assert copied[i] == l


def test_exit_codes_mirror_the_cpp_header():
    header = (ROOT / "common/exit_code.hpp").read_text()
    numbers = dict(re.findall(r"^\s*kExit(\w+) = (\d+),", header, re.M))
    assert {k: int(v) for k, v in numbers.items()} == {
        "Ok": exitcodes.OK, "Failure": exitcodes.FAILURE, "Usage": exitcodes.USAGE,
        "Diverged": exitcodes.DIVERGED, "Retryable": exitcodes.RETRYABLE}
    assert [c for c in (0, 1, 2, 3, 75, -9, -15) if exitcodes.is_retryable(c)] == [75, -9, -15]
    assert exitcodes.describe(-9) == "was killed by signal 9"
    assert exitcodes.describe(75) == "exited with 75 (retryable)"
    assert exitcodes.describe(3) == "exited with 3 (training diverged)"
    assert exitcodes.describe(42) == "exited with 42"
