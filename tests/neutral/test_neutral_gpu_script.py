"""The prepared GPU script (``benchmarks/gpu.py``) runs here on the CPU, tiny, on this
process's backend: it trains through the job and reports every figure of its table."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from tfr_extensions import backend

pytestmark = pytest.mark.skipif(
    not backend.IS_KERAS_3 or backend.uses_tensorflow_ops(),
    reason="the script is for Keras 3's JAX and PyTorch backends (a GPU machine has no "
           "TensorFlow)")

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_the_gpu_script_runs_tiny_on_this_backend(tmp_path):
    name = backend.backend_name()
    # one loss and one throughput shape: each part is a process of its own, which
    # imports Keras and compiles the loss's step for seconds on a CPU
    losses = ["twin_ndcg_type3"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO),
                                                        os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu", "--tiny", "--backends", name,
         "--losses", *losses, "--shapes", "4x32", "--out", str(tmp_path)],
        cwd=str(REPO), env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = json.loads((tmp_path / "gpu.json").read_text())
    assert [r["loss"] for r in rows["train"]] == losses, rows["skipped"]
    for row in rows["train"]:
        assert row["backend"] == name and row["epoch_seconds"] and 0 <= row["test_ndcg_5"] <= 1
        assert row["last_epoch_steps_per_s"] > 0 and 0 <= row["last_epoch_input_wait_fraction"] < 1
        assert row["loss_share_of_step"] > 0
        if name == "torch":  # counted on a CUDA device only
            assert row["loss_cuda_synchronizations"] is None
    if name == "torch":  # its peer, the port, needs nothing more
        assert {r["loss"] for r in rows["throughput"]} >= {"torch_approx_ndcg", *losses}
    assert "training (" in done.stdout
