"""pipelines.train resumes a killed run exactly, and refuses another run's output dir."""
import dataclasses
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from pipelines import common
from pipelines import resume
from pipelines import train

from support import stack

REPO = pathlib.Path(__file__).resolve().parents[2]
EPOCHS = 3
#: Resumed vs uninterrupted, on every history value and every validation/test mean
#: (per-query values too). Measured: bitwise equal on CPU (same ops, inputs and seeds in
#: the same order). The bound leaves room for a different float summation order only;
#: each missing piece of state moves these numbers by far more (measured with the state
#: left out: loss step counter 0.125 on the test means, data order 0.03 on the validation
#: curve, best-epoch state 0.125 on the means).
TOLERANCE = 1e-6


def train_argv(fold, output_dir, *extra):
    """``python -m pipelines.train`` flags of a small run whose loss is randomized (its
    sampled rankings depend on the loss's step counter) and whose best validation epoch
    comes before the interruption (epoch 1 of 3: the restored best weights are used)."""
    return [sys.executable, "-m", "pipelines.train", "--data", str(fold),
            "--loss", "expected_utility", "--scorer", "R2.L", "--hidden-units", "8",
            "--epochs", str(EPOCHS), "--batch-size", "4", "--steps-per-epoch", "30",
            "--seed", "1", "--no-tensorboard", "--output-dir", str(output_dir), *extra]


def start(argv):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen(argv, cwd=str(REPO), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def wait_for(path, proc, timeout=180.0):
    """Polls until ``path`` exists; fails if ``proc`` ends first or on timeout."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"training ended before {path} appeared:\n{proc.stdout.read()[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{path} did not appear within {timeout} s")
        time.sleep(0.01)


def finish(proc, timeout=240):
    output = proc.communicate(timeout=timeout)[0]
    assert proc.returncode == 0, output[-4000:]
    return output


@stack.heavy_integration("tf215", "keras3")
def test_a_killed_run_resumes_and_equals_an_uninterrupted_one(tiny_fold, tmp_path):
    run, reference = tmp_path / "run", tmp_path / "reference"
    killed = start(train_argv(tiny_fold, run, "--verbose", "0"))
    try:
        # a backup generation appears by a rename once whole: epoch 1's backup is complete
        wait_for(run / "backup" / "chief" / "epoch-1", killed)
        killed.send_signal(signal.SIGTERM)
        killed.wait(timeout=60)
    finally:
        if killed.poll() is None:
            killed.kill()
    assert killed.returncode == -signal.SIGTERM
    assert not (run / "done.json").exists() and not (run / "results.json").exists()
    backed_up = resume.backed_up_epochs(str(run / "backup"))
    assert 1 <= backed_up < EPOCHS

    rerun = start(train_argv(tiny_fold, run, "--verbose", "2"))  # verbose: not compared
    # meanwhile, the uninterrupted run with the same flags, in this process
    train.main(train_argv(tiny_fold, reference, "--verbose", "0")[3:])
    output = finish(rerun)
    assert re.findall(rf"^Epoch (\d+)/{EPOCHS}$", output, re.M) == \
        [str(epoch) for epoch in range(backed_up + 1, EPOCHS + 1)]  # only the missing epochs

    got, want = (json.loads((folder / "results.json").read_text()) for folder in (run, reference))
    assert got["resumed_from_epoch"] == backed_up and want["resumed_from_epoch"] == 0
    assert got["best_epoch"] == want["best_epoch"] == 1
    assert set(got["history"]) == set(want["history"]) == {"loss", "ndcg_5", "val_ndcg_5"}
    for key, values in want["history"].items():
        assert len(got["history"][key]) == EPOCHS
        np.testing.assert_allclose(got["history"][key], values, rtol=TOLERANCE, atol=TOLERANCE,
                                   err_msg=key)
    for part in ("validation", "test"):
        for key, value in want[part].items():
            assert got[part][key] == pytest.approx(value, abs=TOLERANCE), (part, key)
    for name in ("vali_per_query.csv", "test_per_query.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(run / name), pd.read_csv(reference / name),
                                      check_exact=False, atol=TOLERANCE, rtol=0)
    assert (run / "done.json").is_file() and not (run / "backup").exists()


def tiny_argv(tiny_fold, out, epochs=1, learning_rate=0.001):
    """Flags of a run of a few seconds (RankNet: the quickest loss to trace)."""
    return ["--data", str(tiny_fold), "--loss", "ranknet", "--scorer", "R2.L",
            "--hidden-units", "8", "--epochs", str(epochs), "--batch-size", "8",
            "--steps-per-epoch", "2", "--seed", "1", "--learning-rate", str(learning_rate),
            "--output-dir", str(out), "--no-tensorboard", "--verbose", "0"]


def test_a_rerun_refuses_another_config_unless_overwrite(tiny_fold, tmp_path, capsys):
    out = tmp_path / "run"
    config = train.parse_args(tiny_argv(tiny_fold, out))
    first = train.run(config)
    other_argv = tiny_argv(tiny_fold, out, epochs=2, learning_rate=0.01)
    other = train.parse_args(other_argv)

    with pytest.raises(train.OutputDirError) as refused:
        train.run(other)
    message = str(refused.value)
    assert message.startswith(f"{out} holds a finished run of another config (epochs: 1 -> 2; "
                              "learning_rate: 0.001 -> 0.01)"), message
    assert "--overwrite" in message
    assert json.loads((out / "config.json").read_text()) == config.to_json()  # untouched
    with pytest.raises(SystemExit) as exit_info:  # the CLI: exit status 1, the same message
        train.main(other_argv)
    assert str(exit_info.value.code) == f"pipelines.train: error: {message}"

    # the same config (verbose aside) over a finished run: nothing to do
    with pytest.raises(train.FinishedRunError, match="finished run of this config"):
        train.run(dataclasses.replace(config, verbose=2))
    capsys.readouterr()
    train.main(tiny_argv(tiny_fold, out))  # exit status 0: prints the stored results
    printed = capsys.readouterr().out
    assert "finished run of this config" in printed
    assert f"test:       {common.format_summary(first.test.summary)}" in printed

    second = train.run(other, overwrite=True)
    assert len(second.history["loss"]) == 2
    assert json.loads((out / "done.json").read_text())["config"] == other.to_json()
    assert json.loads((out / "results.json").read_text())["config"]["epochs"] == 2


def test_an_unfinished_run_of_another_config_is_refused_too(tiny_fold, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    config = train.parse_args(tiny_argv(tiny_fold, out))
    stale = dict(config.to_json(), seed=7)  # a killed run of another seed
    (out / "config.json").write_text(json.dumps(stale))
    (out / "backup").mkdir()
    with pytest.raises(train.OutputDirError, match=r"unfinished run of another config "
                                                   r"\(seed: 7 -> 1\)"):
        train.run(config)
    (out / "config.json").unlink()  # outputs without a config: unknown, refused
    with pytest.raises(train.OutputDirError, match=r"holds \['backup'\] but no config.json"):
        train.run(config)


def test_a_run_stopped_after_its_last_epoch_resumes_without_training(tiny_fold, tmp_path,
                                                                     monkeypatch):
    config = train.parse_args(tiny_argv(tiny_fold, tmp_path / "run", epochs=2))
    stopped = []

    def stop_before_writing(result):  # as a kill during the final evaluation would
        stopped.append(result)
        raise KeyboardInterrupt
    with monkeypatch.context() as patch:
        patch.setattr(train, "write_outputs", stop_before_writing)
        with pytest.raises(KeyboardInterrupt):
            train.run(config)
    assert resume.backed_up_epochs(str(tmp_path / "run" / "backup")) == 2
    assert not (tmp_path / "run" / "done.json").exists()

    resumed = train.run(config)
    want = stopped[0]
    assert resumed.resumed_from_epoch == 2 and resumed.history == want.history
    assert resumed.best_epoch == want.best_epoch
    definitions = "metric_definitions"  # strings: compared exactly
    assert resumed.test.summary[definitions] == want.test.summary[definitions]
    assert {k: v for k, v in resumed.test.summary.items() if k != definitions} == \
        pytest.approx({k: v for k, v in want.test.summary.items() if k != definitions},
                      abs=TOLERANCE)
    assert (tmp_path / "run" / "done.json").is_file()


class Interrupted(Exception):
    """Raised right after the backup of an epoch, as a kill there would stop the run."""


def run_interrupted(config, monkeypatch, after_epoch=1):
    """``train.run(config)`` stopped once the backup of ``after_epoch`` is written."""
    back_up = resume.TrainingBackup.on_epoch_end

    def on_epoch_end(self, epoch, logs=None):
        back_up(self, epoch, logs)
        if epoch + 1 == after_epoch:
            raise Interrupted()
    with monkeypatch.context() as patch:
        patch.setattr(resume.TrainingBackup, "on_epoch_end", on_epoch_end)
        with pytest.raises(Interrupted):
            train.run(config)


def assert_results_equal(got, want):
    """Two results.json dicts: same best epochs, histories and means (to TOLERANCE)."""
    assert got["best_epoch"] == want["best_epoch"]
    assert set(got["history"]) == set(want["history"])
    for key, values in want["history"].items():
        np.testing.assert_allclose(got["history"][key], values, rtol=TOLERANCE, atol=TOLERANCE,
                                   err_msg=key)
    for scores_got, scores_want in [(got, want), *[(got["players"][p], want["players"][p])
                                                   for p in want.get("players", {})]]:
        assert scores_got["best_epoch"] == scores_want["best_epoch"]
        for part in ("validation", "test"):
            for key, value in scores_want[part].items():
                assert scores_got[part][key] == pytest.approx(value, abs=TOLERANCE), (part, key)


# (compiled steps with a seeded loss resume on the jax stack, where Keras 3 compiles every
# step: tests/neutral/test_neutral_train.py)
@stack.heavy_integration("tf215", "keras3")
@pytest.mark.parametrize("overrides", [
    {"loss": "irgan_pair"},                                    # two players, two optimizers
    {"strategy": "mirrored", "mixed_precision": True},         # loss scaling's state too
], ids=["irgan", "mirrored_mixed_precision"])
def test_an_interrupted_run_resumes_exactly(tiny_fold, tmp_path, monkeypatch, overrides):
    argv = tiny_argv(tiny_fold, tmp_path / "run", epochs=2)
    config = dataclasses.replace(train.parse_args(argv), seed=3, steps_per_epoch=3, **overrides)
    run_interrupted(config, monkeypatch)
    assert resume.backed_up_epochs(str(tmp_path / "run" / "backup")) == 1

    resumed = train.run(config)
    reference = train.run(dataclasses.replace(config, output_dir=str(tmp_path / "reference")))
    assert resumed.resumed_from_epoch == 1 and reference.resumed_from_epoch == 0
    assert len(resumed.history[next(iter(resumed.history))]) == 2
    got, want = (json.loads((tmp_path / folder / "results.json").read_text())
                 for folder in ("run", "reference"))
    assert_results_equal(got, want)


@stack.heavy_integration("tf215", "keras3")
def test_two_replicas_of_a_mirrored_strategy_resume_exactly(tiny_fold, tmp_path):
    """Keras's fit under a MirroredStrategy of two replicas (Keras 3 first averages a
    batch over them, and opens a second iterator on the training stream)."""
    job = start([sys.executable, str(pathlib.Path(__file__).with_name("mirrored_job.py")),
                 str(tiny_fold), str(tmp_path), "ranknet"])
    finish(job)
    got, want = (json.loads((tmp_path / folder / "results.json").read_text())
                 for folder in ("run", "reference"))
    assert got["resumed_from_epoch"] == 1 and want["resumed_from_epoch"] == 0
    assert_results_equal(got, want)
