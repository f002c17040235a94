"""``tfrx-cv``: a finished run whose ``results.json`` or ``done.json`` is damaged is done
again, and the report never crashes on it; ``tfrx-train`` trains such a run again too."""
import json
import shutil

import pytest

from pipelines import cv_presets, cv_report, cv_runner, flags, run_dir, train
from pipelines.train import TrainConfig
from support import stack
from support.damage import empty, overwrite, truncate_to_half

# tfrx-cv's runner is the same code under each Keras: tf215 and keras3 run it (and the
# stacks without TensorFlow, their own trainer)
pytestmark = stack.heavy_integration("tf215", "keras3", "jax", "torch")


def digit_changed(path):
    """A change that keeps valid JSON: only the recorded checksums can tell."""
    text = open(path).read()
    at = next(i for i, c in enumerate(text) if c.isdigit() and i > len(text) // 2)
    with open(path, "w") as f:
        f.write(text[:at] + str((int(text[at]) + 1) % 10) + text[at + 1:])


DAMAGE = {"truncated_to_half": truncate_to_half, "emptied": empty,
          "64_bytes_overwritten": overwrite, "digit_changed": digit_changed}


@pytest.fixture(scope="module")
def finished(tiny_fold, tmp_path_factory):
    """A cross-validation of one run (ranknet, fold 1, one epoch), finished."""
    root = tmp_path_factory.mktemp("cv_damage")
    data = root / "data"
    data.mkdir()
    (data / "Fold1").symlink_to(tiny_fold, target_is_directory=True)
    cv = flags.with_flags(cv_runner.CVConfig(
        name="tiny", data=str(data), folds=(1,), methods=("ranknet",),
        train=TrainConfig(epochs=1, batch_size=8, steps_per_epoch=2),
        output_dir=str(root / "runs"), report_dir=str(root / "report")))
    assert cv_runner.run_all(cv, log=lambda line: None) == {"trained": 1, "skipped": 0}
    run = root / "runs" / "ranknet" / "default" / "fold1"
    identity = cv_runner.run_identity(cv, cv_presets.METHODS["ranknet"], {}, 1)
    assert cv_runner.run_status(str(run), identity) == ("done", [])
    return cv, run, identity


def test_done_json_records_every_output(finished):
    _, run, _ = finished
    done = run_dir.read_done(str(run))
    assert set(done["outputs"]) >= {"results.json", "vali_per_query.csv",
                                    "test_per_query.csv", "config.json"}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("name", ["results.json", "done.json", "test_per_query.csv"])
def test_a_damaged_output_makes_the_run_damaged_not_a_crash(finished, tmp_path, name, damage):
    _, run, identity = finished
    copy = tmp_path / "fold1"
    shutil.copytree(run, copy)
    DAMAGE[damage](copy / name)
    status, reasons = cv_runner.run_status(str(copy), identity)
    assert status == "damaged" and len(reasons) == 1, (status, reasons)
    assert str(copy) in reasons[0] and "damaged" in reasons[0]


def test_run_all_redoes_a_damaged_run_and_the_report_skips_it_meanwhile(finished):
    cv, run, identity = finished
    before = json.loads((run / "results.json").read_text())
    truncate_to_half(run / "results.json")
    assert cv_report.collect_rows(cv) == []  # not finished any more: no crash
    lines = []
    assert cv_runner.run_all(cv, log=lines.append) == {"trained": 1, "skipped": 0}
    assert "is damaged" in lines[0] and lines[0].endswith("retraining")
    after = json.loads((run / "results.json").read_text())
    assert after["test"] == before["test"] and after["history"] == before["history"]
    assert cv_runner.run_status(str(run), identity) == ("done", [])
    empty(run / "done.json")
    assert cv_runner.run_all(cv, log=lines.append) == {"trained": 1, "skipped": 0}
    assert [r.key for r in cv_report.collect_rows(cv)] == ["ranknet"]


def test_tfrx_train_trains_a_damaged_finished_run_again(tiny_fold, tmp_path):
    argv = ["--data", str(tiny_fold), "--loss", "ranknet", "--scorer", "R2.L",
            "--hidden-units", "8", "--epochs", "1", "--batch-size", "8",
            "--steps-per-epoch", "2", "--seed", "1", "--output-dir", str(tmp_path / "run"),
            "--no-tensorboard", "--verbose", "0"]
    first = train.run(train.parse_args(argv))
    overwrite(tmp_path / "run" / "results.json")
    with pytest.warns(UserWarning, match="is damaged .*results.json.*: it is trained again"):
        again = train.run(train.parse_args(argv))
    assert again.test.summary["ndcg@5"] == pytest.approx(first.test.summary["ndcg@5"], abs=1e-6)
    assert run_dir.read_done(str(tmp_path / "run"))["outputs"]
