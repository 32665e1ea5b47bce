"""A run's TensorBoard files served by TensorBoard itself and looked at in headless
Chromium: TensorBoard's HTTP API returns every worker's and the server's scalars
with the values written, and the page renders (a screenshot is kept in the test's
output: tmp_path/tensorboard.png, and build/test-output/tensorboard.png)."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from pstrain import tensorboard

pytest.importorskip("tensorboard")
cv2 = pytest.importorskip("cv2")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def synthetic_run() -> list[dict]:
    """Two workers training 50 iterations and a server: the metrics a run records."""
    records = []
    for it in range(0, 50, 5):
        for rank in (0, 1):
            records.append({"time": 1000.0 + it + rank * 0.2, "role": "worker", "rank": rank,
                            "iter": it, "event": "train", "loss": 2.3 / (1 + 0.1 * it) + 0.05 * rank,
                            "lr": 0.01, "images_per_second": 800.0 + 10 * rank,
                            "staleness": rank, "bytes_sent": 580000 * (it + 1)})
    for it, accuracy in ((0, 0.1), (25, 0.6), (50, 0.7)):
        records.append({"time": 1000.0 + it, "role": "worker", "rank": 0, "iter": it,
                        "event": "test", "accuracy": accuracy, "loss": 1.2})
    records.append({"time": 1051.0, "role": "server", "rank": 0, "event": "done", "version": 50,
                    "pushes_applied": 100, "staleness_max": 2, "bad_messages": 0})
    return records


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=30) as reply:
        return json.loads(reply.read())


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/setup.sh test)")
def test_tensorboard_serves_the_run_and_chromium_renders_it(tmp_path, build_dir):
    tensorboard.export(synthetic_run(), tmp_path)
    server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir",
                               str(tmp_path / "tensorboard"), "--host", "127.0.0.1", "--port",
                               "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    try:
        url, deadline, seen = None, time.monotonic() + 90, []
        while url is None and time.monotonic() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            seen.append(line)
            match = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
            url = match.group(1) if match else None
        assert url, "".join(seen)
        # TensorBoard reads the event files in the background after it prints
        # its address: ask until every run and tag is in (60 s at most).
        want = {"train/loss", "train/lr", "train/images_per_second", "train/staleness",
                "train/bytes_sent", "test/accuracy"}
        deadline = time.monotonic() + 60
        while True:
            runs = sorted(get_json(url + "data/runs"))
            tags = get_json(url + "data/plugin/scalars/tags")
            if ((runs == ["server-0", "worker-0", "worker-1"]
                 and want <= set(tags.get("worker-0", {})))
                    or time.monotonic() > deadline):
                break
            time.sleep(0.5)
        assert runs == ["server-0", "worker-0", "worker-1"]
        assert want <= set(tags["worker-0"])
        loss = get_json(url + "data/plugin/scalars/scalars?run=worker-1&tag=train/loss")
        assert [step for _, step, _ in loss] == list(range(0, 50, 5))
        assert loss[0][2] == pytest.approx(2.35) and loss[0][0] == pytest.approx(1000.2)
        staleness = get_json(url + "data/plugin/scalars/scalars?run=server-0&tag="
                             "done/staleness_max")
        assert [(step, value) for _, step, value in staleness] == [(50, 2.0)]

        png = tmp_path / "tensorboard.png"
        shot = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                               "--window-size=1400,1000", "--virtual-time-budget=20000",
                               f"--screenshot={png}", url + "#scalars&tagFilter=train"],
                              capture_output=True, text=True, timeout=120)
        assert png.exists(), shot.stderr[-2000:]
        image = cv2.imread(str(png))
        assert image.shape[:2] == (1000, 1400)
        # TensorBoard's orange header bar (B, G, R about 0, 124, 245) across the top: the
        # app rendered, not an error page; and the page is more than one colour.
        header = image[5:50, :, :].reshape(-1, 3).astype(int)
        assert (abs(header - (0, 124, 245)).sum(axis=1) < 60).mean() > 0.8
        assert image.std() > 20
        kept = build_dir / "test-output" / "tensorboard.png"
        kept.parent.mkdir(exist_ok=True)
        shutil.copy(png, kept)
        print(f"screenshot: {png} (copy: {kept})")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
