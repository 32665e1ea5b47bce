"""The job-file reader under a property-based fuzzer (hypothesis): whatever a
job file holds, Job.from_yaml gives a validated JobConfig or raises JobError
with one line that names the file; no other exception escapes. Three sources
of input: arbitrary bytes, YAML documents built from the job schema's own keys
(every section: security, remote, the research methods, transport.compression
and shared_memory_mb too) with hostile values, and every job under configs/
(configs/experiments/ too) with random edits, each file in turn.

Examples per property: PSTRAIN_FUZZ_EXAMPLES (default 40, seeded, so CI is
reproducible); e.g. PSTRAIN_FUZZ_EXAMPLES=20000 for a long run."""
from __future__ import annotations

import os
import pathlib
import tempfile

import pytest
import yaml

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ps_train_util import ROOT  # noqa: E402
from pstrain import Job, JobError  # noqa: E402
from pstrain import config  # noqa: E402
from pstrain.config import JobConfig  # noqa: E402

EXAMPLES = int(os.environ.get("PSTRAIN_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
# near_valid_documents runs once per key of the schema (~70): half the examples each.
FUZZ_EACH_KEY = settings(FUZZ, max_examples=max(5, EXAMPLES // 2))

# Every key the schema knows (python/pstrain/config.py), with the solver fields
# ps-train overrides most. A section may also be given as a scalar where the
# schema allows a short form (security: none, transport.compression: fp16).
TOP_KEYS = ["name", "solver", "solver_overrides", "weights", "cluster", "consistency",
            "transport", "data", "output", "restart", "engine", "remote", "security"]
SECTION_KEYS = {
    "cluster": ["servers", "server_device", "workers", "worker_devices", "threads_per_worker",
                "hosts", "hostfile", "server_placement", "straggler", "server_threads"],
    "consistency": ["mode", "staleness", "staleness_per_worker", "backup_workers", "staleness_lr",
                    "dc_asgd", "easgd", "local_sgd"],
    "transport": ["kind", "interface", "chunk_bytes", "shared_memory_mb", "io_threads",
                  "compression", "pull_compression", "sufficient_factors", "factor_right",
                  "host_aggregation",
                  "pull_overlap", "gpu_ipc"],
    "data": ["prepare", "memory_data"],
    "restart": ["max_worker_restarts", "max_server_restarts"],
    "remote": ["ssh", "ssh_options", "workdir", "program_dir", "srun_options"],
    "security": ["auth", "nonfinite"],
    "solver_overrides": ["max_iter", "base_lr", "test_iter", "stepvalue", "lr_policy", "type",
                         "snapshot_prefix", "net", "momentum", "display", "random_seed"],
}
# Sections inside sections: (section, key) -> its keys.
SUBSECTION_KEYS = {
    ("cluster", "straggler"): ["rank", "delay_ms", "jitter_ms"],
    ("consistency", "dc_asgd"): ["lambda", "adaptive", "momentum", "epsilon"],
    ("consistency", "easgd"): ["tau", "alpha"],
    ("consistency", "local_sgd"): ["tau"],
    ("transport", "compression"): ["method", "ratio", "error_feedback"],
}
# Words each key takes, so that documents get past the first check often enough
# to reach the later ones.
KNOWN_WORDS = ["curve", "none", "stop", "drop", "fp16", "bf16", "topk", "sign", "hostfile", "slurm",
               "local", "per_host", "first_slots", "ssh", "{run_dir}", "{host}", "-o", "BatchMode=yes",
               "--exclusive"]

# Values chosen to break readers: wrong types, extremes, NUL bytes, ~user paths,
# names of other keys, the right words in the wrong case.
SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["", "~", "~nosuchuser_pstrain/x", "a\x00b", "cpu", "gpu:0", "gpu:-1", "auto",
                     "bsp", "ssp", "asp", "BSP", "tcp", "ipc", "fast", "reference", "gpu",
                     "fashion-mnist", "nets/lenet_solver.prototxt", "../" * 40, "/", ".",
                     "0.0.0.0", "1e-3", "nan", "-1", "x" * 5000, "é∂\u202e", "\ud7ff"]
                    + KNOWN_WORDS),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.text(max_size=10), st.integers(), st.booleans()), inner,
                    max_size=4)), max_leaves=12)


@st.composite
def sections(draw, name: str) -> dict:
    """A section over its keys; a key with keys of its own is sometimes a section too."""
    section: dict = {}
    for sub in draw(st.lists(st.sampled_from(SECTION_KEYS[name]), unique=True)):
        inner = SUBSECTION_KEYS.get((name, sub))
        if inner is not None and draw(st.booleans()):
            section[sub] = {k: draw(VALUES) for k in draw(st.lists(st.sampled_from(inner),
                                                                   unique=True))}
        else:
            section[sub] = draw(VALUES)
    return section


@st.composite
def schema_documents(draw) -> dict:
    """A job dict over the schema's keys (sometimes a near-miss key) with hostile values."""
    doc: dict = {}
    for key in draw(st.lists(st.sampled_from(TOP_KEYS), unique=True)):
        if key in SECTION_KEYS and draw(st.booleans()):
            doc[key] = draw(sections(key))
        else:
            doc[key] = draw(VALUES)
    if draw(st.booleans()):
        doc.setdefault("name", "job")
        doc.setdefault("solver", "solver.prototxt")
    if draw(st.integers(0, 9)) == 0:
        doc[draw(st.sampled_from(["nmae", "clustr", "cluster.workers", "securty", 7, None]))] = \
            draw(VALUES)
    return doc


# A valid job, every section given; near_valid_documents breaks one to three keys of
# it, so that each key's own check is reached (a document broken everywhere stops
# at its first bad key, and the sections read last would never be tried).
VALID = {
    "name": "near", "solver": "solver.prototxt",
    "solver_overrides": {"max_iter": 40, "snapshot": 0},
    "cluster": {"servers": 1, "workers": 3, "worker_devices": "cpu", "threads_per_worker": 1,
                "hosts": "local", "straggler": {"rank": 1, "delay_ms": 5, "jitter_ms": 1}},
    "consistency": {"mode": "asp", "staleness_lr": True,
                    "dc_asgd": {"lambda": 0.1, "adaptive": True, "momentum": 0.9,
                                "epsilon": 1e-6}},
    "transport": {"kind": "tcp", "interface": "127.0.0.1", "chunk_bytes": 4096,
                  "shared_memory_mb": 8, "sufficient_factors": True,
                  "compression": {"method": "topk", "ratio": 0.1, "error_feedback": False}},
    "data": {"prepare": "fashion-mnist"}, "output": "runs",
    "restart": {"max_worker_restarts": 1, "max_server_restarts": 1}, "engine": "fast",
    "remote": {"ssh": "ssh", "ssh_options": ["-o", "BatchMode=yes"], "workdir": "{run_dir}",
               "program_dir": "", "srun_options": ["--exclusive"]},
    "security": {"auth": "curve", "nonfinite": "drop"},
}
KEY_PATHS = ([(k,) for k in TOP_KEYS]
             + [(s, k) for s, keys in SECTION_KEYS.items() for k in keys]
             + [(s, k, kk) for (s, k), keys in SUBSECTION_KEYS.items() for kk in keys])


def set_key(doc: dict, path: tuple, value) -> None:
    """doc[path[0]][path[1]]... = value (a missing or scalar section becomes a mapping);
    the value DELETE removes the key."""
    node = doc
    for part in path[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    if value is DELETE:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value


DELETE = object()


@st.composite
def near_valid_documents(draw, path: tuple) -> dict:
    """VALID with `path` given a hostile value (near-miss words and short strings as
    often as other scalars and nested values), sometimes another key too, sometimes
    on the other research methods."""
    import copy
    doc = copy.deepcopy(VALID)
    if draw(st.booleans()):  # the other research methods: bsp with backups, or elastic
        doc["consistency"] = draw(st.sampled_from([
            {"mode": "bsp", "backup_workers": 1},
            {"mode": "bsp", "easgd": {"tau": 4, "alpha": 0.2}},
            {"mode": "bsp", "local_sgd": {"tau": 2}},
            {"mode": "ssp", "staleness_per_worker": [0, 2, 1]}]))
    hostile = st.one_of(st.sampled_from(KNOWN_WORDS + ["", "x", "curve ", "NONE", "0"]),
                        st.text(max_size=12), SCALARS, VALUES, st.just(DELETE))
    set_key(doc, path, draw(hostile))
    if draw(st.integers(0, 3)) == 0:
        set_key(doc, draw(st.sampled_from(KEY_PATHS)), draw(hostile))
    return doc


OVERRIDES = st.lists(st.one_of(
    st.text(max_size=40),
    st.builds(lambda k, v: f"{k}={v}",
              st.sampled_from(["cluster.workers", "consistency.mode", "name", "cluster",
                               "solver_overrides.max_iter", "transport.chunk_bytes", "a.b.c",
                               "name.x", "", "security", "security.nonfinite",
                               "consistency.dc_asgd.lambda", "consistency.easgd",
                               "transport.compression", "transport.compression.ratio",
                               "transport.pull_compression", "transport.gpu_ipc",
                               "transport.shared_memory_mb", "transport.sufficient_factors",
                               "transport.io_threads",
                               "remote.ssh_options"]),
              st.text(max_size=20))), max_size=3)


def check(path: pathlib.Path, overrides: list[str] | None = None) -> None:
    """The property: a JobConfig, or a JobError of one line naming the file."""
    try:
        job = Job.from_yaml(path, overrides)
    except JobError as e:
        message = str(e)
        assert message, "an empty error"
        assert "\n" not in message and "\r" not in message, f"not one line: {message!r}"
        assert str(path) in message, f"does not name the file: {message!r}"
        return
    c = job.config
    assert isinstance(c, JobConfig)
    assert c.cluster.workers >= 1 and c.cluster.servers >= 1
    assert c.consistency.mode in ("bsp", "ssp", "asp")
    assert c.solver.is_absolute() and c.output.is_absolute()
    # The newer sections come out validated too.
    assert c.security.auth in config.AUTH and c.security.nonfinite in config.NONFINITE
    assert not (c.security.auth == "none" and c.transport.kind == "tcp"
                and not config.is_loopback(c.transport.interface))
    compression = c.transport.compression
    assert compression.method in config.COMPRESSIONS and 0 < compression.ratio <= 1
    assert isinstance(compression.error_feedback, bool)
    assert c.transport.pull_compression in config.PULL_COMPRESSIONS
    assert 0 <= c.transport.shared_memory_mb <= config.SHARED_MEMORY_MAX_MB
    assert c.transport.io_threads == "auto" or 1 <= c.transport.io_threads <= config.IO_THREADS_MAX
    assert c.transport.sufficient_factors in (False, True, "broadcast")
    assert c.transport.pull_overlap in (True, False, "auto")
    m = c.consistency
    assert 0 <= m.backup_workers < c.cluster.workers
    assert m.backup_workers == 0 or m.mode == "bsp"
    assert isinstance(m.staleness_lr, bool) and not (m.staleness_lr and m.mode == "bsp")
    if m.dc_asgd is not None:
        assert m.mode != "bsp" and m.dc_asgd.lambda_ > 0 and 0 <= m.dc_asgd.momentum < 1
        assert m.dc_asgd.epsilon > 0
    if m.staleness_per_worker is not None:
        assert m.mode == "ssp" and len(m.staleness_per_worker) == c.cluster.workers
        assert all(type(v) is int and v >= 0 for v in m.staleness_per_worker)
    assert m.easgd is None or m.local_sgd is None
    for elastic in (m.easgd, m.local_sgd):
        assert elastic is None or elastic.tau >= 1
    assert all(isinstance(o, str) for o in c.remote.ssh_options + c.remote.srun_options)


@pytest.fixture(scope="module")
def scratch():
    with tempfile.TemporaryDirectory(prefix="pstrain_config_fuzz_") as d:
        yield pathlib.Path(d)


@FUZZ
@given(st.binary(max_size=400))
def test_any_bytes_give_a_config_or_one_line_error(scratch, data):
    path = scratch / "bytes.yaml"
    path.write_bytes(data)
    check(path)


@FUZZ
@given(schema_documents(), OVERRIDES)
def test_schema_shaped_documents_give_a_config_or_one_line_error(scratch, doc, overrides):
    path = scratch / "schema.yaml"
    try:
        text = yaml.safe_dump(doc, allow_unicode=True)
    except yaml.YAMLError:
        return  # not representable as YAML (e.g. a lone surrogate)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    check(path, overrides or None)


def test_the_fuzzer_knows_every_key_of_the_schema():
    """A key added to python/pstrain/config.py must be added here too."""
    import dataclasses
    sections = {"": config.JobConfig, "cluster": config.ClusterConfig,
                "consistency": config.ConsistencyConfig, "transport": config.TransportConfig,
                "data": config.DataConfig, "restart": config.RestartConfig,
                "remote": config.RemoteConfig, "security": config.SecurityConfig,
                "cluster.straggler": config.StragglerConfig,
                "consistency.dc_asgd": config.DcAsgdConfig,
                "consistency.easgd": config.ElasticConfig,
                "consistency.local_sgd": config.LocalSgdConfig,
                "transport.compression": config.CompressionConfig}
    known = {"": TOP_KEYS, **SECTION_KEYS,
             **{f"{s}.{k}": keys for (s, k), keys in SUBSECTION_KEYS.items()}}
    for name, cls in sections.items():
        fields = {f.name.rstrip("_") for f in dataclasses.fields(cls)}
        assert fields == set(known[name]), (name, fields ^ set(known[name]))


def test_the_valid_base_of_near_valid_documents_reads(scratch):
    path = scratch / "valid.yaml"
    path.write_text(yaml.safe_dump(VALID))
    assert Job.from_yaml(path).config.transport.compression.method == "topk"


@pytest.mark.parametrize("path", KEY_PATHS, ids=".".join)
@FUZZ_EACH_KEY
@given(data=st.data())
def test_near_valid_documents_give_a_config_or_one_line_error(scratch, path, data):
    doc = data.draw(near_valid_documents(path))
    target = scratch / "near.yaml"
    try:
        text = yaml.safe_dump(doc, allow_unicode=True)
    except yaml.YAMLError:
        return
    target.write_text(text, encoding="utf-8", errors="surrogatepass")
    check(target)


# Every job under configs/ (configs/experiments/ too; configs/nets holds prototxts).
CONFIGS = sorted((ROOT / "configs").rglob("*.yaml"))
EDITS = st.lists(st.tuples(
    st.integers(0, 10_000), st.integers(0, 40),
    st.sampled_from(["", "\n", ":", "- ", "{", "[", "]", "}", "'", '"', "&a ", "*a", "!!python/",
                     "\t", "  ", "#", "? ", "0x", "-", "~", "null", "\x00", "\\",
                     "security: none\n", "compression: {method: topk, ratio: 2}\n",
                     "dc_asgd: {lambda: 0}\n", "shared_memory_mb: -1\n", "remote: {ssh: 7}\n"])),
    max_size=5)


def test_every_committed_job_reads_and_is_fuzzed():
    names = {str(c.relative_to(ROOT / "configs")) for c in CONFIGS}
    assert {"fmnist_lenet.yaml", "experiments/fmnist_compression.yaml",
            "experiments/fmnist_stale.yaml"} <= names, names
    for path in CONFIGS:
        assert isinstance(Job.from_yaml(path).config, JobConfig), path


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: str(p.relative_to(ROOT / "configs")))
@FUZZ
@given(edits=EDITS)
def test_edited_real_job_files_give_a_config_or_one_line_error(scratch, config, edits):
    text = config.read_text()
    for position, cut, insert in edits:
        at = position % (len(text) + 1)
        text = text[:at] + insert + text[at + cut:]
    folder = scratch / config.parent.relative_to(ROOT / "configs")
    folder.mkdir(exist_ok=True)  # relative paths resolve against the scratch folder
    path = folder / config.name
    path.write_text(text)
    check(path)


@pytest.mark.parametrize("text, expected", [
    (b"name: a\nsolver: s\xff\n", "not UTF-8 text"),
    (b"[" * 2000, "nested too deeply"),
    (b"name: a\nsolver: \"s\\0x\"\n", "solver: contains a NUL character"),
    (b"name: a\nsolver: s\noutput: ~nosuchuser_pstrain/runs\n", "output: cannot expand"),
    # near_valid_documents: a key holding a line break gave a two-line error.
    (b'name: a\nsolver: s\ncluster: {"\\n": 1}\n', "unknown key 'cluster.\\n'"),
    (b'name: a\nsolver: s\nsolver_overrides: {"x\\ty": 1}\n',
     "solver_overrides.x\\ty: 'x\\ty' is not a SolverParameter field"),
])
def test_inputs_the_fuzzer_found_give_one_line_errors(scratch, text, expected):
    path = scratch / "found.yaml"
    path.write_bytes(text)
    with pytest.raises(JobError) as e:
        Job.from_yaml(path)
    assert expected in str(e.value) and "\n" not in str(e.value)
