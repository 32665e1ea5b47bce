"""The job-file reader under a property-based fuzzer (hypothesis): whatever a
job file holds, Job.from_yaml gives a validated JobConfig or raises JobError
with one line that names the file; no other exception escapes. Three sources
of input: arbitrary bytes, YAML documents built from the job schema's own keys
with hostile values, and the committed configs/*.yaml with random edits.

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
from pstrain.config import JobConfig  # noqa: E402

EXAMPLES = int(os.environ.get("PSTRAIN_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))

# Every key the schema knows, with the solver fields ps-train overrides most.
TOP_KEYS = ["name", "solver", "solver_overrides", "cluster", "consistency", "transport", "data",
            "output", "restart", "engine"]
SECTION_KEYS = {
    "cluster": ["servers", "server_device", "workers", "worker_devices", "threads_per_worker",
                "hosts", "straggler"],
    "consistency": ["mode", "staleness"],
    "transport": ["kind", "interface", "chunk_bytes"],
    "data": ["prepare"],
    "restart": ["max_worker_restarts"],
    "solver_overrides": ["max_iter", "base_lr", "test_iter", "stepvalue", "lr_policy", "type",
                         "snapshot_prefix", "net", "momentum", "display"],
}
STRAGGLER_KEYS = ["rank", "delay_ms", "jitter_ms"]

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
                     "0.0.0.0", "1e-3", "nan", "-1", "x" * 5000, "é∂\u202e", "\ud7ff"]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.text(max_size=10), st.integers(), st.booleans()), inner,
                    max_size=4)), max_leaves=12)


@st.composite
def schema_documents(draw) -> dict:
    """A job dict over the schema's keys (sometimes a near-miss key) with hostile values."""
    doc: dict = {}
    for key in draw(st.lists(st.sampled_from(TOP_KEYS), unique=True)):
        if key in SECTION_KEYS and draw(st.booleans()):
            section: dict = {}
            for sub in draw(st.lists(st.sampled_from(SECTION_KEYS[key]), unique=True)):
                if sub == "straggler" and draw(st.booleans()):
                    section[sub] = {k: draw(VALUES) for k in
                                    draw(st.lists(st.sampled_from(STRAGGLER_KEYS), unique=True))}
                else:
                    section[sub] = draw(VALUES)
            doc[key] = section
        else:
            doc[key] = draw(VALUES)
    if draw(st.booleans()):
        doc.setdefault("name", "job")
        doc.setdefault("solver", "solver.prototxt")
    if draw(st.integers(0, 9)) == 0:
        doc[draw(st.sampled_from(["nmae", "clustr", "cluster.workers", 7, None]))] = draw(VALUES)
    return doc


OVERRIDES = st.lists(st.one_of(
    st.text(max_size=40),
    st.builds(lambda k, v: f"{k}={v}",
              st.sampled_from(["cluster.workers", "consistency.mode", "name", "cluster",
                               "solver_overrides.max_iter", "transport.chunk_bytes", "a.b.c",
                               "name.x", ""]),
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
    assert isinstance(job.config, JobConfig)
    assert job.config.cluster.workers >= 1 and job.config.cluster.servers >= 1
    assert job.config.consistency.mode in ("bsp", "ssp", "asp")
    assert job.config.solver.is_absolute() and job.config.output.is_absolute()


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


CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


@FUZZ
@given(st.sampled_from(CONFIGS), st.lists(st.tuples(
    st.integers(0, 10_000), st.integers(0, 40),
    st.sampled_from(["", "\n", ":", "- ", "{", "[", "]", "}", "'", '"', "&a ", "*a", "!!python/",
                     "\t", "  ", "#", "? ", "0x", "-", "~", "null", "\x00", "\\"])), max_size=5))
def test_edited_real_job_files_give_a_config_or_one_line_error(scratch, config, edits):
    text = config.read_text()
    for position, cut, insert in edits:
        at = position % (len(text) + 1)
        text = text[:at] + insert + text[at + cut:]
    path = scratch / config.name  # relative paths resolve against the scratch folder
    path.write_text(text)
    check(path)


@pytest.mark.parametrize("text, expected", [
    (b"name: a\nsolver: s\xff\n", "not UTF-8 text"),
    (b"[" * 2000, "nested too deeply"),
    (b"name: a\nsolver: \"s\\0x\"\n", "solver: contains a NUL character"),
    (b"name: a\nsolver: s\noutput: ~nosuchuser_pstrain/runs\n", "output: cannot expand"),
])
def test_inputs_the_fuzzer_found_give_one_line_errors(scratch, text, expected):
    path = scratch / "found.yaml"
    path.write_bytes(text)
    with pytest.raises(JobError) as e:
        Job.from_yaml(path)
    assert expected in str(e.value) and "\n" not in str(e.value)
