"""Two MultiWorkerMirroredStrategy workers on 127.0.0.1 keep identical weights, through an
interruption and a resume from the chief's backup (Keras 2: ``fit``; Keras 3:
``pipelines.distributed.fit_multi_worker``, see that module)."""
import json
import pathlib

from support.local_cluster import assert_equal_weights, run_cluster
from support import stack

JOB = pathlib.Path(__file__).with_name("multi_worker_job.py")
WORKERS = ({"type": "worker", "index": 0}, {"type": "worker", "index": 1})


def run_workers(tiny_fold, tmp_path, *job_args):
    """Runs the two workers of one job; returns their exit statuses and logs."""
    return run_cluster(WORKERS, lambda index: [JOB, tiny_fold, tmp_path / "out",
                                               tmp_path / f"weights_{index}.npz", index,
                                               *job_args], cwd=tmp_path, timeout=240)


def assert_same_weights(tmp_path):
    assert_equal_weights([tmp_path / f"weights_{index}.npz" for index in range(2)])


@stack.heavy_integration("tf215", "keras3")
def test_two_workers_train_in_sync_and_resume_from_the_chiefs_backup(tiny_fold, tmp_path):
    from multi_worker_job import INTERRUPTED
    from pipelines import resume

    codes, logs = run_workers(tiny_fold, tmp_path, "2", "1")  # stops after epoch 1 of 2
    for code, log in zip(codes, logs):
        assert code == INTERRUPTED, log[-4000:]
    assert_same_weights(tmp_path)  # different initial values, synchronized
    assert resume.backed_up_epochs(str(tmp_path / "out" / "backup")) == 1
    assert not (tmp_path / "out" / "done.json").exists()
    # the chief's backup generation; worker 1 saved too, into a scratch folder it deleted
    assert sorted(p.name for p in (tmp_path / "out" / "backup").iterdir()) == ["chief"]
    assert sorted(p.name for p in (tmp_path / "out" / "backup" / "chief").iterdir()) == \
        ["epoch-1"]

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
