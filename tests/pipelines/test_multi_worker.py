"""Two MultiWorkerMirroredStrategy workers on 127.0.0.1 keep identical weights, through an
interruption and a resume from the chief's backup."""
import json
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np

JOB = pathlib.Path(__file__).with_name("multi_worker_job.py")
REPO = pathlib.Path(__file__).resolve().parents[2]


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_workers(tiny_fold, tmp_path, *job_args):
    """Runs the two workers of one job; returns their exit statuses and logs."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    procs = []
    for index in range(2):
        tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), TF_CPP_MIN_LOG_LEVEL="2",
                   PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        procs.append(subprocess.Popen(
            [sys.executable, str(JOB), str(tiny_fold), str(tmp_path / "out"),
             str(tmp_path / f"weights_{index}.npz"), str(index), *job_args],
            env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True))
    logs = []
    try:
        for proc in procs:
            logs.append(proc.communicate(timeout=240)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return [proc.returncode for proc in procs], logs


def assert_same_weights(tmp_path):
    weights = [np.load(tmp_path / f"weights_{index}.npz") for index in range(2)]
    assert len(weights[0].files) == len(weights[1].files) > 0
    for key in weights[0].files:
        np.testing.assert_array_equal(weights[0][key], weights[1][key], err_msg=key)


def test_two_workers_train_in_sync_and_resume_from_the_chiefs_backup(tiny_fold, tmp_path):
    from multi_worker_job import INTERRUPTED
    from pipelines import train

    codes, logs = run_workers(tiny_fold, tmp_path, "2", "1")  # stops after epoch 1 of 2
    for code, log in zip(codes, logs):
        assert code == INTERRUPTED, log[-4000:]
    assert_same_weights(tmp_path)  # different initial values, synchronized
    assert train.backed_up_epochs(str(tmp_path / "out" / "backup")) == 1
    assert not (tmp_path / "out" / "done.json").exists()

    codes, logs = run_workers(tiny_fold, tmp_path, "2")  # the rerun: both restore epoch 1
    for code, log in zip(codes, logs):
        assert code == 0, log[-4000:]
    assert_same_weights(tmp_path)
    # the chief (worker 0) wrote the run's outputs; worker 1 its scratch copy
    for folder in (tmp_path / "out", tmp_path / "out" / "workertemp_1"):
        results = json.loads((folder / "results.json").read_text())
        assert results["resumed_from_epoch"] == 1 and len(results["history"]["loss"]) == 2
        assert (folder / "done.json").is_file()
    assert not (tmp_path / "out" / "backup").exists()
