"""The package without TensorFlow: in a fresh interpreter where ``import tensorflow``
fails (``sys.modules["tensorflow"] = None``, as on a machine without it) and Keras 3
runs on JAX or PyTorch, ``import tfr_extensions`` imports no TensorFlow; every loss of
``tfrx.losses.names()`` builds and computes; ``RankingMetric``, the evaluation, the
NumPy data path and ``tfrx.gbdt`` work; and the TensorFlow-only features raise an
``ImportError`` that names them and what to use instead.

The probe runs once per module (one subprocess); each test reads its report. On the
TensorFlow stacks it runs on a JAX or PyTorch backend installed beside TensorFlow.
"""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

from tfr_extensions import backend

if not backend.IS_KERAS_3:
    pytest.skip("Keras 2: the package needs TensorFlow there; this suite is Keras 3's",
                allow_module_level=True)

REPO = pathlib.Path(__file__).resolve().parents[2]
#: the Keras backend of the probe: this process's if it is not TensorFlow, else one
#: installed beside it (PyTorch first: its eager ops need no compilation)
PROBE_BACKEND = next((name for name in (backend.backend_name(), "torch", "jax")
                      if name != "tensorflow" and importlib.util.find_spec(name)), None)

#: TensorFlow-only feature -> the attribute path that names it
TENSORFLOW_ONLY = {"serving": "tfrx.serving", "adversarial": "tfrx.adversarial",
                   "tfranking": "tfrx.tfranking", "pipeline": "tfrx.pipeline",  # its old name
                   "ranking_dataset": "tfrx.data.ranking_dataset",
                   "to_elwc": "tfrx.data.to_elwc"}

PROBE = r'''
import json, sys, tempfile
sys.modules["tensorflow"] = None  # `import tensorflow` raises ImportError, as without it
report = {}
import numpy as np
import tfr_extensions as tfrx
from tfr_extensions import backend, evaluation
report["tensorflow_imported"] = sys.modules.get("tensorflow") is not None
report["has_tensorflow"] = backend.HAS_TENSORFLOW
report["backend"] = backend.backend_name()
labels = np.array([[2.0, 0.0, 1.0, -1.0], [0.0, 1.0, 3.0, 0.0]], np.float32)
scores = np.array([[0.3, -1.2, 0.8, 5.0], [1.5, 0.1, -0.4, 0.7]], np.float32)
losses = {}
for name in tfrx.losses.names():
    loss = tfrx.losses.get(name)
    value = float(np.asarray(loss(labels, scores)))
    losses[name] = [type(loss).__name__, value]
report["losses"] = losses
report["twin_ndcg"] = [float(v) for v in np.asarray(
    tfrx.losses.twin_sigmoid_loss(labels, scores, gradient="type3")[0])]
metric = tfrx.metrics.RankingMetric("ndcg", topn=3)
metric.update_state(labels, scores)
report["ranking_metric"] = float(np.asarray(metric.result()))
report["ndcg"] = tfrx.metrics.to_numpy(tfrx.metrics.ndcg(labels, scores)).tolist()
result = evaluation.evaluate([0.0, 1.0, 2.0, 0.0, 0.0], [3.0, 2.0, 1.0, 1.0, 0.0], [0, 3, 5],
                             topns=(3,), metrics=("ndcg",))
report["evaluate"] = [result.summary["ndcg@3"], result.summary["num_counted"]]
data = tfrx.data.synthetic(num_queries=6, num_features=3, seed=1, list_size=(2, 5))
with tempfile.TemporaryDirectory() as folder:
    tfrx.data.write_libsvm(data, folder + "/train.txt")
    again = tfrx.data.read_libsvm(folder + "/train.txt", cache=folder + "/cache")
report["read_libsvm"] = bool(np.array_equal(again.labels, data.labels)
                             and np.allclose(again.features, data.features, atol=1e-6)
                             and np.array_equal(again.query_offsets, data.query_offsets))
features, dense_labels = tfrx.data.to_dense(again)
report["to_dense"] = [list(features.shape), int((dense_labels >= 0).sum())]
batches = tfrx.data.RankingPyDataset(again, batch_size=4, with_mask=True)
x, y = batches[0]
report["py_dataset"] = [len(batches), sorted(x), list(y.shape)]
objective = tfrx.gbdt.twin_sigmoid_objective("ndcg", "type3", seed=0)
grad, hess = objective.gradients(np.array([0.3, -1.2, 0.8, 1.0]),
                                 np.array([2.0, 0.0, 1.0, 0.0]), [3, 1])
report["gbdt"] = [np.asarray(grad).tolist(), bool(np.all(np.asarray(hess) >= 0))]
errors = {}
for feature, path in %(features)s.items():
    owner = tfrx.data if path.startswith("tfrx.data.") else tfrx
    try:
        getattr(owner, path.rsplit(".", 1)[1])
        errors[feature] = None
    except ImportError as error:
        errors[feature] = str(error)
report["errors"] = errors
report["tensorflow_imported_at_end"] = sys.modules.get("tensorflow") is not None
print("REPORT " + json.dumps(report))
'''


@pytest.fixture(scope="module")
def report():
    if PROBE_BACKEND is None:
        pytest.skip("no Keras backend other than TensorFlow is installed here (jax, torch)")
    env = {key: value for key, value in os.environ.items() if key != "TF_USE_LEGACY_KERAS"}
    env["KERAS_BACKEND"] = PROBE_BACKEND
    code = PROBE % {"features": repr(TENSORFLOW_ONLY)}
    run = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    lines = [line for line in run.stdout.splitlines() if line.startswith("REPORT ")]
    assert run.returncode == 0 and lines, run.stdout[-3000:] + run.stderr[-5000:]
    return json.loads(lines[-1][len("REPORT "):])


def test_the_package_imports_without_tensorflow_and_never_imports_it(report):
    assert report["backend"] == PROBE_BACKEND and report["has_tensorflow"] is False
    assert report["tensorflow_imported"] is False
    assert report["tensorflow_imported_at_end"] is False


def test_every_loss_builds_and_computes(report):
    import tfr_extensions as tfrx  # pylint: disable=import-outside-toplevel
    ours = tfrx.losses.names(tf_ranking=False)
    assert sorted(report["losses"]) == sorted(ours)  # (no TF-Ranking names there)
    for name, (class_name, value) in report["losses"].items():
        assert class_name == type(tfrx.losses.get(name)).__name__, name
        assert value == value and abs(value) < 1e3, (name, value)  # finite
    # minus nDCG of each list (oracle: support.oracles.ndcg)
    from support import oracles  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel
    labels = np.array([[2.0, 0.0, 1.0, -1.0], [0.0, 1.0, 3.0, 0.0]])
    scores = np.array([[0.3, -1.2, 0.8, 5.0], [1.5, 0.1, -0.4, 0.7]])
    expected = [-oracles.ndcg(y, s) for y, s in zip(labels, scores)]
    assert report["twin_ndcg"] == pytest.approx(expected, rel=1e-6)
    assert report["ndcg"] == pytest.approx([-v for v in expected], rel=1e-6)
    assert report["ranking_metric"] == pytest.approx(
        np.mean([oracles.ndcg(y, s, 3) for y, s in zip(labels, scores)]), rel=1e-6)


def test_evaluation_data_and_gbdt_work_without_tensorflow(report):
    assert report["evaluate"] == [pytest.approx(0.5869, abs=1e-4), 1]
    assert report["read_libsvm"] is True
    features_shape, valid = report["to_dense"]
    assert features_shape[0] == 6 and features_shape[2] == 3 and valid >= 12
    num_batches, inputs, labels_shape = report["py_dataset"]
    assert num_batches == 2 and inputs == ["features", "mask"] and labels_shape[0] == 4
    grad, hessian_non_negative = report["gbdt"]
    assert grad[3] == 0.0 and any(g != 0 for g in grad[:3]) and hessian_non_negative


@pytest.mark.parametrize("feature", sorted(TENSORFLOW_ONLY))
def test_tensorflow_only_features_say_what_to_use_instead(report, feature):
    message = report["errors"][feature]
    assert message is not None, f"{TENSORFLOW_ONLY[feature]} did not raise ImportError"
    assert feature in message and "TensorFlow" in message and "Instead" in message, message


def test_without_a_backend_set_the_import_says_to_pick_one(tmp_path):
    """Without TensorFlow, Keras 3's default backend (TensorFlow) cannot load: the import
    says so and names ``KERAS_BACKEND``, rather than failing inside Keras."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("TF_USE_LEGACY_KERAS", "KERAS_BACKEND")}
    env["KERAS_HOME"] = str(tmp_path)  # no keras.json that names a backend
    code = ('import sys; sys.modules["tensorflow"] = None\n'
            'try:\n    import tfr_extensions\nexcept ImportError as error:\n'
            '    print("ERROR", error)\n')
    run = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "ERROR" in run.stdout and "KERAS_BACKEND=jax" in run.stdout, run.stdout[-2000:]
