"""``tfrx-demo`` and ``tfrx-cv`` (which runs ``tfrx-train`` and ``tfrx-lambdamart`` for a
fold) on Keras 3's JAX and PyTorch backends, as installed: the console scripts beside this
interpreter, without TensorFlow on the jax and torch stacks. The TensorFlow route of the
same jobs is tested by ``tests/pipelines``."""
import json
import os
import pathlib
import subprocess
import sys

import pandas as pd
import pytest

from tfr_extensions import backend

pytestmark = pytest.mark.skipif(
    not backend.IS_KERAS_3 or backend.uses_tensorflow_ops(),
    reason="the jobs' Keras 3 path (JAX, PyTorch); TensorFlow's path: tests/pipelines")

REPO = pathlib.Path(__file__).resolve().parents[2]


def run_script(name, *args, cwd):
    script = pathlib.Path(sys.executable).with_name(name)
    assert script.exists(), f"{script}: the package is not installed in this environment"
    env = dict(os.environ, KERAS_BACKEND=backend.backend_name())
    done = subprocess.run([str(script), *args], cwd=str(cwd), env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_the_demo_trains_compares_and_says_how_to_export(tmp_path):
    out = run_script("tfrx-demo", "--epochs", "1", cwd=tmp_path)
    table = out.split("Test metrics", 1)[1].splitlines()
    rows = {line.split("  ")[0].strip(): line for line in table
            if line.startswith(("untrained R4.L", "twin_ndcg_type3 (tfrx)", "LambdaMART"))}
    assert len(rows) == 3, out[-2000:]
    values = {name: [float(v) for v in line.split()[-6:]] for name, line in rows.items()}
    assert all(0.0 <= v <= 1.0 for row in values.values() for v in row)
    run = tmp_path / "runs" / "demo" / "twin_ndcg_type3"
    assert (run / "done.json").exists() and (run / "model.keras").exists()
    if backend.HAS_TENSORFLOW:  # (the keras3 stack with KERAS_BACKEND=jax/torch)
        assert (tmp_path / "saved_models" / "demo" / "1" / "saved_model.pb").exists()
    else:
        command = "tfrx-export runs/demo/twin_ndcg_type3/model.keras saved_models/demo/1"
        assert command.replace("/", os.sep) in out
        assert not (tmp_path / "saved_models").exists()


def test_cross_validation_trains_each_method_and_reports(tmp_path):
    out = run_script("tfrx-cv", "--folds", "1", "--methods", "twin_ndcg_type3,lambdamart",
                     "--epochs", "1", "--lambdamart-rounds", "10", "--output-dir", "cv",
                     "--report-dir", "report", cwd=tmp_path)
    assert "2 runs trained, 0 skipped" in out
    table = pd.read_csv(tmp_path / "report" / "comparison.csv")
    assert len(table) == 2 and table["ndcg@5"].between(0.0, 1.0).all()
    runs = list((tmp_path / "cv").glob("twin_ndcg_type3/*/fold1/results.json"))
    assert len(runs) == 1, sorted(map(str, (tmp_path / "cv").rglob("results.json")))
    stored = json.loads(runs[0].read_text())
    assert "'jax'" in stored["backend"] or "'torch'" in stored["backend"]
    again = run_script("tfrx-cv", "--folds", "1", "--methods", "twin_ndcg_type3,lambdamart",
                       "--epochs", "1", "--lambdamart-rounds", "10", "--output-dir", "cv",
                       "--report-dir", "report", cwd=tmp_path)
    assert "0 runs trained, 2 skipped" in again  # finished runs of the same config
