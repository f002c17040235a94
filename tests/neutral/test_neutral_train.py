"""``tfrx-train`` on Keras 3's JAX and PyTorch backends, without TensorFlow: its outputs,
its refusal and ``--overwrite`` rules, resuming a run killed with SIGTERM, the ``.keras``
model file, and (JAX) ``--strategy data_parallel`` over two host devices.

The TensorFlow path of the same job (tf.data, TensorFlow's strategies and checkpoint) is
tested by ``tests/pipelines``; here the module skips on Keras 2 and on Keras 3's
TensorFlow backend.
"""
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from support import oracles
from support.run_results import assert_same_results, read_results
import tfr_extensions as tfrx
from tfr_extensions import backend

pytestmark = pytest.mark.skipif(
    not backend.IS_KERAS_3 or backend.uses_tensorflow_ops(),
    reason="the jobs' Keras 3 path (JAX, PyTorch); TensorFlow's path: tests/pipelines")

from pipelines import common  # noqa: E402  (after the skip: the module needs Keras 3)

REPO = pathlib.Path(__file__).resolve().parents[2]
#: resumed against uninterrupted, on every history value and mean: bitwise on one CPU
#: (same ops, inputs and seeds in the same order); the bound leaves room for a summation
#: order only, where each missing piece of state moves them by 1e-2 or more
TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def tiny_fold(tmp_path_factory):
    """train.txt (30 queries), vali.txt and test.txt (10 each), 6 features."""
    folder = tmp_path_factory.mktemp("tiny_fold")
    data = tfrx.data.synthetic(num_queries=50, num_features=6, seed=3, list_size=(3, 12))
    for part, subset in zip(("train", "vali", "test"),
                            common.split_queries(data, (3, 1, 1), seed=0)):
        tfrx.data.write_libsvm(subset, folder / f"{part}.txt")
    return folder


def small_args(fold, output_dir, *extra):
    """Flags of a small run with a randomized loss (its samples depend on the loss's
    seed state) on lists padded to 12 (one compiled shape)."""
    return ["--data", str(fold), "--loss", "expected_utility", "--scorer", "R2.L",
            "--hidden-units", "8", "--epochs", "3", "--batch-size", "4",
            "--steps-per-epoch", "6", "--list-size", "12", "--seed", "1",
            "--no-tensorboard", "--verbose", "0", "--output-dir", str(output_dir), *extra]


def job_env(env=None):
    """The environment of a job's process: this process's backend and repository."""
    return dict(os.environ if env is None else env, KERAS_BACKEND=backend.backend_name(),
                PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))


def run_job(args, env=None, timeout=600):
    """``python -m pipelines.train`` in its own process on this process's backend."""
    env = job_env(env)
    return subprocess.run([sys.executable, "-m", "pipelines.train", *args], cwd=str(REPO),
                          env=env, capture_output=True, text=True, timeout=timeout)


def test_mq2008_fold1_writes_every_output_and_the_model_file_scores_them(mq2008_dir,
                                                                          tmp_path):
    """``tfrx-train`` end to end, as installed (the console script beside this
    interpreter), on MQ2008 Fold1 for two short epochs."""
    output = tmp_path / "run"
    script = pathlib.Path(sys.executable).with_name("tfrx-train")
    assert script.exists(), f"{script}: the package is not installed in this environment"
    done = subprocess.run([str(script), "--data", str(mq2008_dir), "--fold", "1",
                           "--epochs", "2", "--steps-per-epoch", "5", "--no-tensorboard",
                           "--verbose", "0", "--output-dir", str(output)],
                          env=job_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "best epoch" in done.stdout and "test:" in done.stdout
    names = {p.name for p in output.iterdir()}
    assert {"config.json", "results.json", "vali_per_query.csv", "test_per_query.csv",
            "model.keras", "done.json"} <= names and "backup" not in names
    stored = read_results(output)
    assert stored["best_epoch"] in (1, 2) and len(stored["history"]["val_ndcg_5"]) == 2
    assert stored["model_file"] == str(output / "model.keras")
    assert 0.0 <= stored["timing"]["input_wait_fraction"] < 1.0 and stored["timing"]["steps"] == 10
    assert stored["test"]["num_queries"] == 156 and stored["test"]["no_relevant"] == "exclude"
    # the saved model scores the test queries as the run evaluated them (oracle nDCG@5)
    model = tfrx.backend.keras.models.load_model(output / "model.keras")
    test = tfrx.data.read_libsvm(mq2008_dir / "Fold1" / "test.txt")
    scores = tfrx.evaluation.predict_scores(model, test)
    per_query = pd.read_csv(output / "test_per_query.csv")
    offsets = test.query_offsets
    expected = [oracles.ndcg(test.labels[a:b], scores[a:b], 5) if test.labels[a:b].max() > 0
                else np.nan for a, b in zip(offsets[:-1], offsets[1:])]
    np.testing.assert_allclose(per_query["ndcg@5"], expected, rtol=1e-5, atol=1e-6)
    assert stored["test"]["ndcg@5"] == pytest.approx(np.nanmean(expected), rel=1e-5)
    assert stored["test"]["ndcg@5"] > 0.55  # an untrained R4.L scores about 0.45


@pytest.mark.skipif(backend.backend_name() == "torch",
                    reason="a rerun's rules (report, refuse, overwrite) are the job's, not the "
                           "backend's: they run on the jax stack and in tests/pipelines "
                           "(CI's time budget)")
def test_a_finished_run_is_reported_another_config_refused_and_overwrite_trains(tiny_fold,
                                                                                tmp_path):
    output = tmp_path / "run"
    first = run_job(small_args(tiny_fold, output, "--epochs", "1"))
    assert first.returncode == 0, first.stdout + first.stderr
    again = run_job(small_args(tiny_fold, output, "--epochs", "1"))
    assert again.returncode == 0 and "holds a finished run of this config" in again.stdout
    assert "validation:" in again.stdout  # its stored results
    other = run_job(small_args(tiny_fold, output, "--epochs", "2"))
    assert other.returncode == 1 and "epochs: 1 -> 2" in other.stderr
    assert "--overwrite" in other.stderr
    overwritten = run_job(small_args(tiny_fold, output, "--epochs", "2", "--overwrite"))
    assert overwritten.returncode == 0, overwritten.stderr
    assert len(read_results(output)["history"]["loss"]) == 2


def test_tensorflow_strategies_and_irgan_are_refused_by_name(tiny_fold, tmp_path):
    mirrored = run_job(small_args(tiny_fold, tmp_path / "a", "--strategy", "mirrored"))
    assert mirrored.returncode != 0 and "TensorFlow distribution strategy" in mirrored.stderr
    irgan = run_job(small_args(tiny_fold, tmp_path / "b", "--loss", "irgan_point"))
    assert irgan.returncode != 0 and "a TensorFlow program" in irgan.stderr


def test_a_run_killed_with_sigterm_resumes_to_the_results_of_an_uninterrupted_one(tiny_fold,
                                                                                  tmp_path):
    run, reference = tmp_path / "run", tmp_path / "reference"
    killed = subprocess.Popen([sys.executable, "-m", "pipelines.train",
                               *small_args(tiny_fold, run)], cwd=str(REPO), env=job_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    checkpoint = run / "backup" / "epoch-1"  # a backup generation, renamed into place whole
    try:
        deadline = time.monotonic() + 300
        while not checkpoint.exists():
            assert killed.poll() is None, killed.stdout.read()[-3000:]
            assert time.monotonic() < deadline, "no checkpoint within 300 s"
            time.sleep(0.01)
        killed.send_signal(signal.SIGTERM)
        killed.wait(timeout=60)
    finally:
        if killed.poll() is None:
            killed.kill()
    assert killed.returncode == -signal.SIGTERM and not (run / "done.json").exists()
    resumed = run_job(small_args(tiny_fold, run))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resumed after epoch" in resumed.stdout
    uninterrupted = run_job(small_args(tiny_fold, reference))
    assert uninterrupted.returncode == 0, uninterrupted.stderr
    got, want = read_results(run), read_results(reference)
    assert got["resumed_from_epoch"] >= 1 and want["resumed_from_epoch"] == 0
    assert_same_results(got, want, TOLERANCE)
    pd.testing.assert_frame_equal(pd.read_csv(run / "test_per_query.csv"),
                                  pd.read_csv(reference / "test_per_query.csv"),
                                  rtol=TOLERANCE, atol=TOLERANCE)


#: the runs of the data_parallel tests: 30 training queries in batches of 6 (nothing left
#: out on two devices), the twin-sigmoid loss (seeded: its draws must match too)
PARALLEL_FLAGS = ("--loss", "twin_ndcg_type3", "--batch-size", "6", "--steps-per-epoch", "5",
                  "--epochs", "2", "--keep-no-relevant")
only_jax = pytest.mark.skipif(backend.backend_name() != "jax", reason="data_parallel is JAX's")


@pytest.fixture(scope="module")
def one_device_run(tiny_fold, tmp_path_factory):
    """The reference: the same run on one device, in one process."""
    output = tmp_path_factory.mktemp("one_device")
    done = run_job(small_args(tiny_fold, output, *PARALLEL_FLAGS))
    assert done.returncode == 0, done.stderr
    return read_results(output)


def assert_same_run(got, want):
    for key, values in want["history"].items():
        np.testing.assert_allclose(got["history"][key], values, rtol=1e-5, atol=1e-6,
                                   err_msg=key)
    assert got["best_epoch"] == want["best_epoch"]
    for key in ("ndcg@5", "map@10", "nerr@10"):
        assert got["test"][key] == pytest.approx(want["test"][key], rel=1e-5, abs=1e-6)


@only_jax
def test_data_parallel_over_two_host_devices_equals_one_device(tiny_fold, tmp_path,
                                                               one_device_run):
    """Two host devices (XLA_FLAGS), the same global batches: the same results."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # (programs of two devices: compiled afresh)
    two = run_job(small_args(tiny_fold, tmp_path / "two", *PARALLEL_FLAGS, "--strategy",
                             "data_parallel"), env=env)
    assert two.returncode == 0, two.stderr
    assert "leaves out" not in two.stdout
    assert_same_run(read_results(tmp_path / "two"), one_device_run)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@only_jax
def test_two_jax_processes_over_loopback_equal_one_process(tiny_fold, tmp_path,
                                                           one_device_run):
    """``jax.distributed`` through Keras's environment variables: two processes of one
    CPU device each, CPU collectives over loopback (gloo); process 0 writes the run's
    outputs, process 1 nothing in it; the results are the one-process run's."""
    output = tmp_path / "run"
    address = f"127.0.0.1:{free_port()}"
    processes = []
    for index in range(2):
        env = job_env()
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        env.update(KERAS_DISTRIBUTION_JOB_ADDRESSES=address,
                   KERAS_DISTRIBUTION_NUM_PROCESSES="2",
                   KERAS_DISTRIBUTION_PROCESS_ID=str(index))
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "pipelines.train",
             *small_args(tiny_fold, output, *PARALLEL_FLAGS, "--strategy", "data_parallel")],
            cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True))
    try:
        outputs = [process.communicate(timeout=600)[0] for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    assert [p.returncode for p in processes] == [0, 0], "\n".join(o[-2000:] for o in outputs)
    assert f"outputs in {output}" in outputs[0] and f"outputs in {output}" not in outputs[1]
    assert_same_run(read_results(output), one_device_run)
