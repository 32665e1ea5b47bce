"""summary.json's figures from metrics records alone: the final test and its
iteration, the iteration-0 test, and throughput after a resume; the progress
bar's accuracy with its iteration."""
from __future__ import annotations

import pathlib

from pstrain.metrics import accuracy_text, summarize
from pstrain.progress import BarProgress


def accuracy_record(it: int, acc: float) -> dict:
    return {"time": 0.0, "role": "worker", "rank": 0, "iter": it, "event": "test",
            "accuracy": acc, "loss": 1.0 - acc}


def summary(records: list[dict], **changes) -> dict:
    args = dict(name="x", status="interrupted", mode="ssp", staleness=2, workers=2, servers=1,
                batch=64, wall_seconds=12.0, train_seconds=10.0, worker_restarts=0,
                run_dir=pathlib.Path("/nonexistent"))
    args.update(changes)
    return summarize(records, **args)


def train(it: int) -> dict:
    return {"time": 0.0, "role": "worker", "rank": 0, "iter": it, "event": "train", "loss": 1.0}


def test_the_last_test_done_is_final_with_its_iteration():
    s = summary([accuracy_record(0, 0.1), train(0), accuracy_record(100, 0.7), train(150)])
    assert s["final_test_accuracy"] == 0.7 and s["final_test_iteration"] == 100
    assert s["initial_test_accuracy"] == 0.1
    assert accuracy_text(s) == "test accuracy 0.7000 at iteration 100"


def test_only_the_iteration_0_test_is_no_final_result():
    s = summary([accuracy_record(0, 0.1), train(0), train(50)])
    assert s["final_test_accuracy"] is None and s["final_test_iteration"] is None
    assert s["final_test_loss"] is None and s["initial_test_accuracy"] == 0.1
    assert accuracy_text(s) == "no test after training began (iteration-0 test accuracy 0.1000)"
    assert accuracy_text(summary([train(0)])) == ""


def test_throughput_after_a_resume_counts_this_part_only():
    recs = [train(0), accuracy_record(400, 0.8), train(400), train(600), accuracy_record(680, 0.85)]
    s = summary(recs, start_iteration=400, status="ok")
    assert s["iterations"] == 680 and s["start_iteration"] == 400
    assert s["images_per_second"] == round(280 * 2 * 64 / 10.0, 1)
    assert summary(recs)["images_per_second"] == round(680 * 2 * 64 / 10.0, 1)


def test_the_progress_bar_shows_the_iteration_of_its_accuracy():
    bar = BarProgress("x", 100)
    try:
        bar.event(accuracy_record(50, 0.75))
        assert "acc=0.7500@50" in bar.bar.postfix
    finally:
        bar.close()
