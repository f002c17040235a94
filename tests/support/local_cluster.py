"""Multi-worker jobs on 127.0.0.1 for the tests: one subprocess per task of a
``TF_CONFIG`` cluster, and the check that the tasks ended with equal weights."""
import json
import os
import pathlib
import socket
import subprocess
import sys
from typing import Callable, List, Mapping, Sequence, Tuple

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]


def free_ports(count: int) -> List[int]:
    """``count`` TCP ports of 127.0.0.1 that were free a moment ago."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_cluster(tasks: Sequence[Mapping[str, object]], argv: Callable[[int], Sequence[str]],
                cwd, timeout: float) -> Tuple[List[int], List[str]]:
    """Runs one process per task (``{"type": "chief"|"worker", "index": i}``) of a
    cluster on free local ports, the i-th with ``python <argv(i)>`` and
    ``TF_CONFIG`` set; returns their exit statuses and combined outputs.
    Processes still running after ``timeout`` seconds are killed."""
    ports = iter(free_ports(len(tasks)))
    cluster = {}
    for task in tasks:
        cluster.setdefault(task["type"], []).append(f"127.0.0.1:{next(ports)}")
    procs = []
    for index, task in enumerate(tasks):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                   TF_CONFIG=json.dumps({"cluster": cluster, "task": dict(task)}),
                   PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        procs.append(subprocess.Popen(
            [sys.executable, *map(str, argv(index))], env=env, cwd=str(cwd),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = []
    try:
        for proc in procs:
            logs.append(proc.communicate(timeout=timeout)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return [proc.returncode for proc in procs], logs


def assert_equal_weights(paths: Sequence[pathlib.Path]) -> None:
    """The ``.npz`` weight files of the tasks hold the same, non-empty arrays."""
    weights = [np.load(path) for path in paths]
    assert len(weights[0].files) > 0
    for other in weights[1:]:
        assert other.files == weights[0].files
        for key in weights[0].files:
            np.testing.assert_array_equal(other[key], weights[0][key], err_msg=key)
