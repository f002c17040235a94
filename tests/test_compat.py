"""`tfr_extensions.compat`: the package without TF-Ranking, which Keras is active, and
our versions of TF-Ranking's pieces (ragged padding, approx ranks, ELWC parsing and
its predict signature, the strategy helpers) checked against TF-Ranking where it
imports."""
import os
import pathlib
import subprocess
import sys
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import input_pb2

from support.stack import THIS_STACK, needs_tf_ranking, tfr
from tfr_extensions import backend
from tfr_extensions import compat
from tfr_extensions import serving
from tfr_extensions import strategies
from tfr_extensions.data import elwc
from tfr_extensions.ops import approx_ranks, lists

REPO = pathlib.Path(__file__).resolve().parents[1]


def run_python(*args: str, **env) -> subprocess.CompletedProcess:
    """``python <args>`` from the repository root (``run_python("-c", code)``)."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=240, cwd=str(REPO),
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **env))


# --------------------------------------------------------------------------- without TF-Ranking

WITHOUT_TF_RANKING = """
import sys
sys.modules["tensorflow_ranking"] = None  # as where it is missing or cannot import
import numpy as np
import tfr_extensions as tfrx
from tfr_extensions import compat
assert not compat.has_tf_ranking()
loss = tfrx.losses.get("twin_ndcg_type3", seed=0)
print("LOSS", float(loss([[2.0, 0.0, 1.0]], [[0.1, 0.5, 0.3]])))
print("NAMES", tfrx.losses.names() == tfrx.losses.registry.tfrx_loss_names())
try:
    tfrx.tfranking
except ImportError as error:
    print("PIPELINE", error)
try:
    tfrx.pipeline  # the old name
except ImportError as error:
    print("OLD_NAME", error)
print("MODULES", sorted(m for m, module in sys.modules.items()
                        if m.startswith("tensorflow_ranking") and module is not None))
"""


def test_the_package_works_without_tf_ranking_and_tfranking_says_why_and_what_instead():
    proc = run_python("-c", WITHOUT_TF_RANKING)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines()
                 if line.split(" ", 1)[0] in ("LOSS", "NAMES", "PIPELINE", "OLD_NAME",
                                              "MODULES"))
    # minus nDCG: gains (3, 0, 1) ranked 3rd, 1st, 2nd
    dcg, ideal = 1 / np.log2(3) + 3 / np.log2(4), 3 + 1 / np.log2(3)
    assert float(lines["LOSS"]) == pytest.approx(-dcg / ideal, rel=1e-6)
    assert lines["NAMES"] == "True"
    message = lines["PIPELINE"]
    assert "tfr_extensions.tfranking" in message and "needs tensorflow-ranking" in message
    assert "pipelines.train" in message and "ranking_dataset" in message
    assert lines["OLD_NAME"] == message
    assert lines["MODULES"] == "[]"


def test_importing_the_package_does_not_import_tf_ranking():
    proc = run_python("-c",
                      "import sys, tfr_extensions, pipelines.train, pipelines.cross_validate\n"
                      "print(sorted(m for m in sys.modules if m.startswith('tensorflow_ranking')))")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"


FIRST_CALL_TRACED = """
import tensorflow as tf
import tfr_extensions as tfrx
loss = tfrx.losses.get("twin_ndcg_type3")

@tf.function  # AutoGraph on, as in Keras's fit: the array namespace loads in this trace
def gradient(labels, scores):
    with tf.GradientTape() as tape:
        tape.watch(scores)
        value = loss(labels, scores)
    return tape.gradient(value, scores)

print(gradient(tf.constant([[1.0, 0.0, 2.0]]), tf.constant([[0.1, 0.2, 0.3]])).shape)
"""


def test_a_loss_first_called_in_a_tf_function_traces_without_autograph_warnings(tmp_path):
    script = tmp_path / "first_call.py"  # a file: AutoGraph converts only code with a source
    script.write_text(FIRST_CALL_TRACED)
    proc = run_python(str(script))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "(1, 3)"
    assert "AutoGraph could not transform" not in proc.stderr, proc.stderr[-3000:]


# --------------------------------------------------------------------------- Keras


def test_the_active_keras_is_the_stacks():
    package, version = backend.keras_package()
    expected = {"tf215": ("keras", "2.15."), "tf221": ("tf_keras", "2.21."),
                "keras3": ("keras", "3.")}[THIS_STACK]
    assert (package, version[:len(expected[1])]) == expected
    assert backend.IS_KERAS_3 == (THIS_STACK == "keras3")
    assert backend.keras.__name__ == ("keras" if backend.IS_KERAS_3 else tf.keras.__name__)
    assert backend.backend_name() == "tensorflow"


IMPORT_AND_TRAIN_ONE_STEP = """
import numpy as np
import tfr_extensions as tfrx
model = tfrx.models.scorer("R1.L", 2, hidden_units=4)
model.compile(optimizer="adam", loss=tfrx.losses.get("twin_ndcg_type3", seed=0))
x = {"features": np.ones([2, 3, 2], np.float32), "mask": np.ones([2, 3], bool)}
loss = model.train_on_batch(x, np.array([[1., 0., 2.], [0., 1., 0.]], np.float32))
print("KERAS", tfrx.backend.describe(), "LOSS", float(np.ravel(loss)[0]))
"""


@pytest.mark.skipif(THIS_STACK != "tf221",
                    reason="tf221 has tf_keras installed beside Keras 3 (TF 2.15 always has "
                           "Keras 2; the keras3 stack runs its whole suite this way)")
def test_without_the_legacy_variable_tensorflow_2_21_runs_on_keras_3():
    """Nothing to set for Keras 3: ``TF_USE_LEGACY_KERAS`` unset or 0 gives Keras 3,
    and the package imports and trains there."""
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    for setting in ({}, {"TF_USE_LEGACY_KERAS": "0"}):
        proc = subprocess.run([sys.executable, "-c", IMPORT_AND_TRAIN_ONE_STEP],
                              capture_output=True, text=True, timeout=240, cwd=str(REPO),
                              env=dict(env, TF_CPP_MIN_LOG_LEVEL="2", **setting))
        assert proc.returncode == 0, proc.stderr[-3000:]
        line = proc.stdout.strip().splitlines()[-1]
        assert line.startswith("KERAS Keras 3.") and "backend 'tensorflow'" in line, line
        assert np.isfinite(float(line.rsplit(" ", 1)[1]))


@pytest.mark.skipif(THIS_STACK != "keras3", reason="needs a stack without tf_keras installed")
def test_legacy_keras_without_tf_keras_is_a_clear_import_error():
    proc = run_python("-c", "import tfr_extensions", TF_USE_LEGACY_KERAS="1")
    assert proc.returncode != 0
    message = proc.stderr.strip().splitlines()[-1]
    assert message.startswith("ImportError: tfr_extensions needs Keras, but tf.keras does not "
                              "load (TensorFlow 2.21"), message
    assert "TF_USE_LEGACY_KERAS='1'" in message
    assert "unset TF_USE_LEGACY_KERAS" in message and "pip install 'tf-keras==2.21.*'" in message


# --------------------------------------------------------------------------- ours vs TF-Ranking's


@needs_tf_ranking
def test_ragged_to_dense_equals_tf_ranking():
    from tensorflow_ranking.python import utils as tfr_utils
    labels = tf.ragged.constant([[1.0, 0.0, 2.0], [3.0], [0.0, 1.0]])
    scores = tf.ragged.constant([[0.1, 0.2, 0.3], [0.4], [0.5, 0.6]])
    for weights in (None, tf.constant([[1.0], [2.0], [3.0]]),
                    tf.ragged.constant([[1.0, 2.0, 3.0], [4.0], [5.0, 6.0]])):
        ours = lists.ragged_to_dense(labels, scores, weights)
        theirs = tfr_utils.ragged_to_dense(labels, scores, weights)
        for a, b in zip(ours, theirs):
            if a is None:
                assert b is None
            else:
                np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(TypeError, match="`labels` must be a tf.RaggedTensor"):
        lists.ragged_to_dense(tf.zeros([2, 2]), None)


@needs_tf_ranking
def test_approx_ranks_equal_tf_ranking():
    from tensorflow_ranking.python import losses_impl
    logits = tf.random.stateless_normal([4, 9], seed=[1, 2]) * 5
    np.testing.assert_allclose(approx_ranks.approx_ranks(logits).numpy(),
                               losses_impl.approx_ranks(logits).numpy(), rtol=1e-6)
    np.testing.assert_allclose(approx_ranks.approx_ranks(logits, None, 0.5).numpy(),
                               losses_impl.approx_ranks(logits / 0.5).numpy(), rtol=1e-6)
    # masked = the padded documents deleted (TF-Ranking pushes them 1000 below instead)
    mask = tf.constant([[True] * 6 + [False] * 3] * 4)
    masked = approx_ranks.approx_ranks(logits, mask, 0.5).numpy()
    np.testing.assert_allclose(masked[:, :6], approx_ranks.approx_ranks(
        logits[:, :6], None, 0.5).numpy(), rtol=1e-6)
    assert np.all(masked[:, 6:] == 0.5)


def _example(**features) -> tf.train.Example:
    feature = {}
    for name, value in features.items():
        if isinstance(value[0], int):
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=value))
        else:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def _elwcs():
    """Three lists of 3, 1 and 4 examples; one without a context; ragged "terms"."""
    rng = np.random.default_rng(0)
    records = []
    for query, size in enumerate((3, 1, 4)):
        elwc = input_pb2.ExampleListWithContext()
        if query != 1:
            elwc.context.CopyFrom(_example(query_length=[query + 2]))
        for _ in range(size):
            terms = [int(t) for t in rng.integers(0, 9, size=rng.integers(1, 4))]
            elwc.examples.add().CopyFrom(_example(x=list(rng.normal(size=2)), terms=terms))
        records.append(elwc.SerializeToString())
    return tf.constant(records)


CONTEXT_SPEC = {"query_length": tf.io.FixedLenFeature([1], tf.int64, default_value=[0])}
EXAMPLE_SPEC = {"x": tf.io.FixedLenFeature([2], tf.float32, default_value=[-1.0, -1.0]),
                "terms": tf.io.VarLenFeature(tf.int64)}


def _dense(value):
    return tf.sparse.to_dense(value).numpy() if isinstance(value, tf.SparseTensor) else value.numpy()


@needs_tf_ranking
@pytest.mark.parametrize("list_size", [None, 2, 6])
def test_parse_elwc_equals_tf_ranking(list_size):
    serialized = _elwcs()
    kwargs = dict(list_size=list_size, example_feature_spec=EXAMPLE_SPEC,
                  mask_feature_name="mask", size_feature_name="size")
    # TF-Ranking fails on an ELWC without a context when a context spec is given,
    # so it parses the two lists with a context; ours parses the third as defaults.
    with_context = tf.gather(serialized, [0, 2])
    theirs = tfr.data.parse_from_example_list(with_context, context_feature_spec=CONTEXT_SPEC,
                                              **kwargs)
    ours = elwc.parse_elwc(with_context, CONTEXT_SPEC, **kwargs)
    assert sorted(ours) == sorted(theirs)
    for name in theirs:
        np.testing.assert_array_equal(_dense(ours[name]), _dense(theirs[name]), err_msg=name)
    all_three = elwc.parse_elwc(serialized, CONTEXT_SPEC, **kwargs)
    assert all_three["query_length"].numpy()[:, 0].tolist() == [2, 0, 4]
    assert all_three["size"].numpy().tolist() == [3, 1, 4]


@needs_tf_ranking
def test_elwc_predict_function_equals_tf_ranking_signature():
    spec = {"x": EXAMPLE_SPEC["x"]}

    class Model(tf.keras.Model):
        def call(self, inputs, training=False):
            weights = tf.constant([2.0, -1.0])
            scores = tf.reduce_sum(inputs["x"] * weights, axis=-1)
            return tf.where(inputs["mask"], scores, 0.0)

    model = Model()
    ours = serving.elwc_predict_function(model, {}, spec, "mask")
    theirs = tfr.keras.saved_model.Signatures(
        model, context_feature_spec={}, example_feature_spec=spec,
        mask_feature_name="mask").predict_tf_function()
    serialized = _elwcs()
    np.testing.assert_array_equal(ours(serialized)["outputs"].numpy(),
                                  theirs(serialized)["outputs"].numpy())


@needs_tf_ranking
def test_strategy_helpers_equal_tf_ranking():
    from tensorflow_ranking.python.keras import strategy_utils
    assert (strategies.MIRRORED_STRATEGY, strategies.MWMS_STRATEGY) == (
        strategy_utils.MIRRORED_STRATEGY, strategy_utils.MWMS_STRATEGY)
    assert strategies.get_strategy(None) is None
    assert isinstance(strategies.get_strategy("MirroredStrategy"), tf.distribute.MirroredStrategy)
    with pytest.raises(ValueError, match="`strategy` must be None or one of"):
        strategies.get_strategy("TPUStrategy")
    assert (strategies.get_output_filepath("out", None)
            == strategy_utils.get_output_filepath("out", None))


@needs_tf_ranking
@pytest.mark.parametrize("task_type,task_id", [("chief", 0), ("worker", 0), ("worker", 2),
                                               (None, None)])
def test_output_filepath_per_worker_equals_tf_ranking(tmp_path, task_type, task_id):
    from tensorflow_ranking.python.keras import strategy_utils
    strategy = mock.Mock(spec=tf.distribute.MultiWorkerMirroredStrategy)
    strategy.cluster_resolver.task_type = task_type
    strategy.cluster_resolver.task_id = task_id
    assert (strategies.get_output_filepath(str(tmp_path), strategy)
            == strategy_utils.get_output_filepath(str(tmp_path), strategy))


# --------------------------------------------------------------------------- old names


def test_the_moved_names_still_import_from_compat():
    """Each piece lives with what it belongs to; its old name here is the same object."""
    moved = {"ragged_to_dense": lists, "PADDING_PREDICTION": lists, "PADDING_WEIGHT": lists,
             "approx_ranks": approx_ranks, "parse_elwc": elwc, "split_elwc": elwc,
             "elwc_predict_function": serving, "get_strategy": strategies,
             "strategy_scope": strategies, "get_output_filepath": strategies,
             "MIRRORED_STRATEGY": strategies, "MWMS_STRATEGY": strategies}
    for name, module in moved.items():
        assert getattr(compat, name) is getattr(module, name), name
        assert name in dir(compat), name
    from tfr_extensions.compat import parse_elwc  # noqa: F401 (the old import path)
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        compat.nothing_here  # noqa: B018
