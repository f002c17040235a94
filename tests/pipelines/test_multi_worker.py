"""Two MultiWorkerMirroredStrategy workers on 127.0.0.1 end with identical weights."""
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


def test_two_workers_train_in_sync(tiny_fold, tmp_path):
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    procs = []
    for index in range(2):
        tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), TF_CPP_MIN_LOG_LEVEL="2",
                   PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        procs.append(subprocess.Popen(
            [sys.executable, str(JOB), str(tiny_fold), str(tmp_path / "out"),
             str(tmp_path / f"weights_{index}.npz"), str(index)],
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
    for proc, log in zip(procs, logs):
        assert proc.returncode == 0, log[-4000:]
    weights = [np.load(tmp_path / f"weights_{index}.npz") for index in range(2)]
    assert len(weights[0].files) == len(weights[1].files) > 0
    for key in weights[0].files:
        np.testing.assert_array_equal(weights[0][key], weights[1][key], err_msg=key)
    # the chief (worker 0) wrote the run's outputs; worker 1 its scratch copy
    assert (tmp_path / "out" / "results.json").is_file()
    assert (tmp_path / "out" / "workertemp_1" / "results.json").is_file()
