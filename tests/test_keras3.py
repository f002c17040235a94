"""Keras 3 support (issue 21): saving, mixed precision, XLA, float64, seeded losses, backends.

What each test pins, with the stacks it runs on (Keras 2 too wherever the feature exists):

* ``model.save`` + ``load_model`` keep a compiled scorer's losses (every option) and
  ``RankingMetric`` options, and a seeded loss's step counter (Keras 3: the counter
  travels through ``save_own_variables``); ``model.export`` serves the model's scores;
* ``mixed_float16``: the loss is float32 and equals the float32 model's;
* ``jit_compile=True`` and the ``"auto"`` that a GPU resolves to XLA train like
  ``jit_compile=False``;
* float64 scores compute in float64 (Keras 3's own ``Loss.__call__`` casts to floatx);
* seeded losses draw fresh samples at each step, reproduce from one seed, and resume
  from ``save_weights`` / ``load_weights`` (Keras 3);
* on ``KERAS_BACKEND=jax`` the TensorFlow functions work, the losses and
  ``RankingMetric`` compute through ``tfrx.keras_ops`` (its own suite:
  ``tests/keras_ops``), and the TensorFlow programs (scorers, IRGAN, export) raise
  ``UnsupportedBackendError`` naming the backend.

Models are tiny (``R2.L``, 8 hidden units, 4 features, lists of 6) and train a few steps.
"""
import collections
import functools
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import tfr_extensions as tfrx
from support.stack import REPO, THIS_STACK
from tfr_extensions import backend
from tfr_extensions.backend import keras

keras3_only = pytest.mark.skipif(not backend.IS_KERAS_3, reason="a Keras 3 feature")

NUM_FEATURES = 4
LIST_SIZE = 6


def lists(batch=8, seed=0, duplicates=False):
    """``({"features", "mask"}, labels)``: labels 0..2, the last document padded (-1);
    with ``duplicates`` documents 0 and 1 of each list have the same features (tied
    scores) and different labels, so that tie breaking changes the loss."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(batch, LIST_SIZE, NUM_FEATURES)).astype(np.float32)
    labels = rng.integers(0, 3, size=(batch, LIST_SIZE)).astype(np.float32)
    labels[:, -1] = -1.0
    labels[:, 0] = 2.0
    if duplicates:
        features[:, 1] = features[:, 0]
        labels[:, 1] = 0.0
    return {"features": features, "mask": labels >= 0}, labels


def scorer(seed=1):
    keras.utils.set_random_seed(seed)
    return tfrx.models.scorer("R2.L", NUM_FEATURES, hidden_units=8)


def max_difference(first, second):
    return max(float(np.max(np.abs(a - b))) for a, b in zip(first, second))


# -- 1. model.save / load_model / export ----------------------------------------------

#: a representative set of registry names, each with options away from its defaults
SAVED_LOSSES = [
    ("twin_ndcg_type3", dict(topn=3, alpha_b=2.0, seed=7)),
    ("TwinSigmoidLoss", dict(metric="ap", topn=4, gradient="type2", alpha_b=0.5,
                             tie_break=False, reduction="sum", name="twin_ap")),
    ("softndcg", dict(sigma=0.5, topn=3, discount_alpha=0.5, method="exact",
                      sinkhorn_iterations=2)),
    ("wassrank", dict(regularization=0.2, sinkhorn_iterations=5, cost_type="dg",
                      target="softmax", gain_base=2.0, epsilon_scaling=False)),
    ("expected_utility", dict(metric="precision", topn=3, num_samples=2, temperature=0.5,
                              baseline=True, seed=11)),
    ("mdprank", dict(gamma=0.9, topn=4, num_samples=2, temperature=2.0, normalize=False,
                     seed=5)),
    ("ranknet", dict(sigma=2.0)),
    ("ndcg_beta_hinge", dict(margin=0.5, squared=True)),
]


def saved_and_loaded(model, path):
    model.save(str(path))
    return keras.models.load_model(str(path))


@pytest.mark.parametrize("name,options", SAVED_LOSSES, ids=[n for n, _ in SAVED_LOSSES])
def test_save_and_load_model_keep_every_loss_option(name, options, tmp_path):
    x, y = lists()
    model = scorer()
    if name[0].isupper():  # a class name: the class takes `name`
        loss = getattr(tfrx.losses, name)(**options)
    else:
        loss = tfrx.losses.get(name, **options)
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss=loss)
    restored = saved_and_loaded(model, tmp_path / "model.keras")

    assert type(restored.loss) is type(loss)
    assert restored.loss is not loss
    assert restored.loss.get_config() == loss.get_config()
    for option, value in options.items():
        assert restored.loss.get_config()[option] == value, option
    # the same values: the options were applied, not only stored (two calls: seeded
    # losses draw the samples of steps 0 and 1 on both)
    scores = model(x, training=False)
    np.testing.assert_allclose(restored(x, training=False), scores, rtol=1e-6)
    for _ in range(2):
        expected = float(loss(y, scores))
        assert float(restored.loss(y, scores)) == pytest.approx(expected, rel=1e-6, abs=1e-7)


def test_save_and_load_model_keep_ranking_metric_options_and_values(tmp_path):
    x, y = lists()
    model = scorer()
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss=tfrx.losses.get("ranknet"),
                  metrics=[tfrx.metrics.RankingMetric("map", topn=3, no_relevant="exclude"),
                           tfrx.metrics.RankingMetric("nerr", topn=2, name="err2",
                                                      no_relevant="one"),
                           tfrx.metrics.RankingMetric("precision")])
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    restored = saved_and_loaded(model, tmp_path / "model.keras")
    ours = model.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
    theirs = restored.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
    assert set(ours) == {"loss", "map_3_exclude", "err2", "precision"}
    assert theirs == pytest.approx(ours, rel=1e-6, abs=1e-7)

    def ranking_metrics(m):
        found = m.metrics[-1].metrics if backend.IS_KERAS_3 else m.metrics
        return {metric.name: metric.get_config() for metric in found
                if isinstance(metric, tfrx.metrics.RankingMetric)}

    assert ranking_metrics(restored) == ranking_metrics(model)
    assert ranking_metrics(restored)["err2"] == {
        "name": "err2", "dtype": "float32", "metric": "nerr", "topn": 2, "no_relevant": "one"}


@keras3_only
def test_save_and_load_model_restore_the_seeded_loss_step_counter(tmp_path):
    """After k steps, save, load: the next step draws what the original's next step
    draws (the same loss and the same weights after it), not what step 0 drew."""
    x, y = lists(batch=4)
    model = scorer()
    loss = tfrx.losses.ExpectedUtilityLoss(topn=4, num_samples=1, seed=3)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss)
    for _ in range(3):
        model.train_on_batch(x, y)
    assert int(loss._calls.numpy()) == 3
    path = str(tmp_path / "model.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    assert int(restored.loss._calls.numpy()) == 3  # a fresh loss would start at 0

    original_next = model.train_on_batch(x, y)
    restored_next = restored.train_on_batch(x, y)
    assert restored_next == original_next
    assert max_difference(model.get_weights(), restored.get_weights()) == 0.0
    # the counter matters: the same weights with step 0's samples give another loss
    restored.loss._calls.assign(3)
    at_step_3 = float(restored.loss(y, restored(x, training=False)))
    restored.loss._calls.assign(0)
    at_step_0 = float(restored.loss(y, restored(x, training=False)))
    assert at_step_3 != at_step_0


# Keras 2 too: Scorer.export passes the signature to an ExportArchive there
def test_model_export_serves_the_model_scores(tmp_path):
    """``model.export`` (the scorer's default signature: any batch and list size, a bool
    mask) serves the model's scores, also for lists longer than any it was called on."""
    model = scorer()
    path = str(tmp_path / "export")
    model.export(path, format="tf_saved_model", verbose=False)
    served = tf.saved_model.load(path)
    rng = np.random.default_rng(2)
    for batch, length in ((8, LIST_SIZE), (3, 2), (2, 11)):
        inputs = {"features": rng.normal(size=(batch, length, NUM_FEATURES)).astype(np.float32),
                  "mask": rng.uniform(size=(batch, length)) > 0.2}
        expected = model.predict(inputs, verbose=0)
        np.testing.assert_allclose(served.serve(inputs).numpy(), expected, rtol=1e-6, atol=1e-6)
        signature = served.signatures["serving_default"]
        outputs = signature(**{key: tf.constant(value) for key, value in inputs.items()})
        np.testing.assert_allclose(list(outputs.values())[0].numpy(), expected, rtol=1e-6,
                                   atol=1e-6)


# -- 2. mixed_float16 -----------------------------------------------------------------

def set_policy(name):
    if backend.IS_KERAS_3:
        keras.config.set_dtype_policy(name)
    else:
        keras.mixed_precision.set_global_policy(name)


@pytest.fixture
def mixed_float16():
    set_policy("mixed_float16")
    try:
        yield
    finally:
        set_policy("float32")


#: measured: |mixed - float32| <= 2e-5 (ranknet; 0 for twin-sigmoid, whose forward pass
#: only sees ranks) while the scores differ by ~9e-4; the bound is float16's relative
#: step, 1e-3 (its 11-bit significand), as the hidden layers compute in float16
MIXED_TOLERANCE = 1e-3


@pytest.mark.parametrize("name", ["ranknet", "softndcg", "twin_ap_type3"])
def test_mixed_float16_loss_is_float32_and_equals_the_float32_loss(name, mixed_float16):
    x, y = lists()
    mixed = scorer()
    assert mixed.dense_layers[0].compute_dtype == "float16"
    set_policy("float32")
    full = scorer()
    assert full.dense_layers[0].compute_dtype == "float32"
    mixed.set_weights(full.get_weights())
    loss = tfrx.losses.get(name)
    mixed_scores, full_scores = mixed(x), full(x)
    assert mixed_scores.dtype == tf.float32  # the output layer computes in float32
    assert 0 < max_difference([mixed_scores.numpy()], [full_scores.numpy()]) < 0.05
    mixed_loss, full_loss = loss(y, mixed_scores), loss(y, full_scores)
    assert mixed_loss.dtype == tf.float32
    assert abs(float(mixed_loss) - float(full_loss)) <= MIXED_TOLERANCE
    # float16 scores (a model whose output layer follows the policy) compute in float32
    half_loss = loss(y, tf.cast(full_scores, tf.float16))
    assert half_loss.dtype == tf.float32
    assert abs(float(half_loss) - float(full_loss)) <= MIXED_TOLERANCE


def test_mixed_float16_training(mixed_float16):
    x, y = lists(batch=16)
    model = scorer()
    before = [w.copy() for w in model.get_weights()]
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=tfrx.losses.get("twin_ndcg_type3", seed=2))
    history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    assert all(np.isfinite(history["loss"]))
    assert history["loss"][-1] < history["loss"][0]
    assert all(w.dtype == np.float32 for w in model.get_weights())
    assert max_difference(before, model.get_weights()) > 1e-3
    assert all(np.all(np.isfinite(w)) for w in model.get_weights())


# -- 3. XLA ---------------------------------------------------------------------------

#: measured: weights within 6e-8 after 2 SGD steps (2.4e-7 after 4, and so for expected
#: utility): XLA fuses and reorders float32 sums, nothing more
XLA_TOLERANCE = 1e-5


#: seeded, with random tie breaking: the step counter and the stateless draws under XLA
#: (XLA of the Plackett-Luce sampling of the policy-gradient losses: tests/ops)
XLA_CASES = {"twin_ndcg_type3": dict(topn=4, seed=3)}


def train(name, jit_compile, gpu=False, monkeypatch=None):
    """``(weights, per-epoch losses)`` of a scorer trained 2 steps on lists with ties (the
    twin-sigmoid loss breaks them at random); ``gpu``: compiled while Keras sees a GPU
    (``tf.config.list_physical_devices`` patched: ``Trainer._resolve_auto_jit_compile``
    reads it to resolve ``"auto"``)."""
    x, y = lists(duplicates=True)
    model = scorer()
    if gpu:
        device = collections.namedtuple("Device", "name device_type")(
            "/physical_device:GPU:0", "GPU")
        monkeypatch.setattr(tf.config, "list_physical_devices", lambda *_: [device])
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=tfrx.losses.get(name, **XLA_CASES[name]), jit_compile=jit_compile)
    if gpu:
        monkeypatch.undo()
    assert model.jit_compile is (jit_compile is True or gpu)
    history = model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0).history
    return model.get_weights(), history["loss"]


@functools.lru_cache(maxsize=None)
def train_without_xla(name):
    return train(name, False)


@pytest.mark.parametrize("name", sorted(XLA_CASES))
def test_jit_compile_trains_like_no_jit(name):
    weights, losses = train(name, True)
    plain_weights, plain_losses = train_without_xla(name)
    np.testing.assert_allclose(losses, plain_losses, rtol=1e-5)
    assert max_difference(weights, plain_weights) < XLA_TOLERANCE
    assert max_difference(weights, scorer().get_weights()) > 1e-3  # it trained


@keras3_only
def test_jit_compile_auto_is_xla_where_keras_sees_a_gpu(monkeypatch):
    """``"auto"`` is False on this CPU-only machine; where Keras sees a GPU it picks XLA
    (every layer of the scorer supports it) and the loss trains as without XLA."""
    model = scorer()
    model.compile(optimizer="sgd", loss=tfrx.losses.get("twin_ndcg_type3"), jit_compile="auto")
    assert model.jit_compile is False
    weights, losses = train("twin_ndcg_type3", "auto", gpu=True, monkeypatch=monkeypatch)
    plain_weights, plain_losses = train_without_xla("twin_ndcg_type3")
    np.testing.assert_allclose(losses, plain_losses, rtol=1e-5)
    assert max_difference(weights, plain_weights) < XLA_TOLERANCE


# -- 4. float64 ------------------------------------------------------------------------

FLOAT64_LOSSES = [
    ("twin_ap_type2", tfrx.losses.twin_sigmoid_loss, dict(metric="ap", gradient="type2")),
    ("softndcg", tfrx.losses.softndcg_loss, {}),
    ("wassrank", tfrx.losses.wassrank_loss, {}),
    ("ranknet", tfrx.losses.ranknet_loss, {}),
]


@pytest.mark.parametrize("name,function,options", FLOAT64_LOSSES,
                         ids=[case[0] for case in FLOAT64_LOSSES])
def test_float64_scores_compute_in_float64(name, function, options):
    """The reduced loss is float64 and equals the pure function's float64 value to
    1e-12, where the same function in float32 is off by more: no float32
    step in between (Keras 3's own ``Loss.__call__`` would cast to floatx)."""
    rng = np.random.default_rng(4)
    labels = rng.integers(0, 4, size=(5, 7)).astype(np.float64)
    labels[:, -2:] = -1.0
    labels[:, 0] = 3.0
    scores = rng.normal(size=(5, 7)) * 3.0
    weights = rng.uniform(0.5, 2.0, size=(5, 1))

    def reference(dtype):  # SUM_OVER_BATCH_SIZE of the weighted per-list losses
        losses, list_weights = function(tf.constant(labels, dtype), tf.constant(scores, dtype),
                                        **options)
        return float(np.sum(losses.numpy().astype(np.float64) * list_weights.numpy()
                            * weights[:, 0]) / len(labels))

    expected, expected32 = reference(tf.float64), reference(tf.float32)
    scores_t = tf.constant(scores)
    with tf.GradientTape() as tape:
        tape.watch(scores_t)
        value = tfrx.losses.get(name)(tf.constant(labels), scores_t,
                                      sample_weight=tf.constant(weights))
    assert value.dtype == tf.float64
    assert tape.gradient(value, scores_t).dtype == tf.float64
    tolerance = 1e-12 * max(1.0, abs(expected))
    assert abs(float(value) - expected) <= tolerance
    assert abs(expected32 - expected) > tolerance  # a float32 step would be told apart


# -- 5. seeded losses: fresh samples at every step, reproducible, resumable -------------

RANDOMIZED = [
    ("expected_utility", dict(topn=4, num_samples=1, seed=21)),
    ("mdprank", dict(topn=4, num_samples=1, seed=22)),
    ("twin_ndcg_type1", dict(tie_break=True, seed=23)),  # ties: duplicated documents
]


def seeded_run(name, options, steps, learning_rate=0.05, model=None):
    """Losses of ``steps`` training steps on one batch with ties; ``model``: a compiled
    model to go on with, else a new one."""
    if model is None:
        model = scorer()
        model.compile(optimizer=keras.optimizers.SGD(learning_rate),
                      loss=tfrx.losses.get(name, **options))
    x, y = lists(batch=4, duplicates=True)
    return model, [float(model.train_on_batch(x, y)) for _ in range(steps)]


@pytest.mark.parametrize("name,options", RANDOMIZED, ids=[n for n, _ in RANDOMIZED])
def test_seeded_loss_draws_fresh_samples_each_step_and_reproduces(name, options):
    # learning rate 0: the weights stay, so only the samples change from step to step
    _, frozen = seeded_run(name, options, steps=4, learning_rate=0.0)
    assert len(set(frozen)) >= 3, frozen  # (tie breaking has few outcomes: some repeat)
    _, again = seeded_run(name, options, steps=4, learning_rate=0.0)
    assert again == frozen


@keras3_only
@pytest.mark.parametrize("name,options", RANDOMIZED, ids=[n for n, _ in RANDOMIZED])
def test_seeded_loss_resumes_from_save_weights(name, options, tmp_path):
    """2 steps, ``save_weights``, 2 more steps equal a new model and loss that
    ``load_weights`` and take 2 steps: the counter comes back with the weights."""
    path = str(tmp_path / "run.weights.h5")
    first, head = seeded_run(name, options, steps=2)
    first.save_weights(path)
    _, straight = seeded_run(name, options, steps=2, model=first)
    resumed = scorer(seed=99)  # other initial weights: load_weights must replace them
    resumed.compile(optimizer=keras.optimizers.SGD(0.05), loss=tfrx.losses.get(name, **options))
    resumed.load_weights(path)
    assert int(resumed.loss._calls.numpy()) == 2
    assert seeded_run(name, options, steps=2, model=resumed)[1] == straight
    # the counter matters: the same weights with step 0's samples give other losses
    resumed.load_weights(path)
    resumed.loss._calls.assign(0)
    assert seeded_run(name, options, steps=2, model=resumed)[1] != straight
    assert len(set(head + straight)) >= 3


# -- 7. another Keras 3 backend ---------------------------------------------------------

JAX_SCRIPT = r"""
import json, os, tempfile
import numpy as np
import tensorflow as tf
import tfr_extensions as tfrx
from tfr_extensions import backend
import keras

labels = tf.constant([[2., 0., 1., -1.], [0., 1., 3., 0.]])
scores = tf.constant([[0.3, 1.2, -0.4, 5.0], [0.1, 0.2, 0.9, -1.0]])
losses, weights = tfrx.losses.twin_sigmoid_loss(labels, scores, metric="ndcg", topn=3)
out = {"backend": keras.backend.backend(), "describe": backend.describe(),
       "twin": np.asarray(losses).tolist(), "weights": np.asarray(weights).tolist(),
       "ndcg": tfrx.metrics.to_numpy(tfrx.metrics.ndcg(labels, scores, topn=3)).tolist(),
       "ranks": np.asarray(tfrx.ops.twin_sigmoid_ranks(scores, labels, tie_break=False)).tolist()}
plain = keras.Sequential([keras.Input((4, 2)), keras.layers.Dense(1)])
export_dir = os.path.join(tempfile.mkdtemp(), "export")
loss = tfrx.losses.get("twin_ndcg_type3", topn=3)
out["class_loss"] = float(loss(labels.numpy(), scores.numpy()))
metric = tfrx.metrics.RankingMetric("ndcg", topn=3)
metric.update_state(labels.numpy(), scores.numpy())
out["class_ndcg"] = float(metric.result())
model = tfrx.models.scorer("R2.L", 2, hidden_units=4)
out["scorer_shape"] = list(model({"features": np.ones((3, 5, 2), np.float32)}).shape)
attempts = {
    "adversarial.IRGAN": lambda: tfrx.adversarial.IRGAN(plain, plain),
    "serving.export": lambda: tfrx.serving.export(plain, export_dir, num_features=2),
}
for key, attempt in attempts.items():
    try:
        attempt()
        out[key] = None
    except backend.UnsupportedBackendError as error:
        out[key] = str(error)
out["export_dir_exists"] = os.path.exists(export_dir)
print("RESULT" + json.dumps(out))
"""


@pytest.mark.skipif(THIS_STACK != "keras3", reason="needs the keras3 stack's Keras 3 and jax")
def test_jax_backend_functions_and_losses_work_and_tensorflow_programs_refuse():
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env.update(KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", JAX_SCRIPT], capture_output=True, text=True,
                          timeout=240, cwd=str(REPO), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert out.pop("backend") == "jax"
    assert "'jax'" in out.pop("describe")
    # the functions (keras.ops on JAX) give this process's (TensorFlow backend) numbers
    labels = tf.constant([[2., 0., 1., -1.], [0., 1., 3., 0.]])
    scores = tf.constant([[0.3, 1.2, -0.4, 5.0], [0.1, 0.2, 0.9, -1.0]])
    losses, weights = tfrx.losses.twin_sigmoid_loss(labels, scores, metric="ndcg", topn=3)
    np.testing.assert_allclose(out.pop("twin"), losses.numpy(), rtol=1e-6)
    np.testing.assert_allclose(out.pop("weights"), weights.numpy(), rtol=1e-6)
    np.testing.assert_allclose(out.pop("ndcg"), tfrx.metrics.ndcg(labels, scores, topn=3),
                               rtol=1e-6)
    np.testing.assert_allclose(out.pop("ranks"), tfrx.ops.twin_sigmoid_ranks(
        scores, labels, tie_break=False), rtol=1e-6)
    # the loss class and RankingMetric compute on JAX (through tfrx.keras_ops)
    weighted = losses.numpy() * weights.numpy()
    np.testing.assert_allclose(out.pop("class_loss"), weighted.mean(), rtol=1e-5)
    np.testing.assert_allclose(out.pop("class_ndcg"),
                               tfrx.metrics.ndcg(labels, scores, topn=3).numpy().mean(), rtol=1e-5)
    assert out.pop("export_dir_exists") is False
    assert out.pop("scorer_shape") == [3, 5]  # the scorers are Keras 3 layers on every backend
    assert len(out) == 2
    for feature, message in out.items():
        assert message is not None, f"tfrx.{feature} did not raise UnsupportedBackendError"
        assert "'jax'" in message and "KERAS_BACKEND=tensorflow" in message, (feature, message)
