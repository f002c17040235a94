"""TwinSigmoidLoss: exact forward values, the paper's closed-form gradients,
TF-Ranking conventions, XLA / mixed precision / ragged, and training."""
import itertools

import numpy as np
import pytest
import tensorflow as tf

from tfr_extensions.backend import keras

from support import oracles
from support.stack import tensorflow_ops_suite
import tfr_extensions as tfrx

METRICS = ("precision", "ap", "ap_min", "ndcg", "nerr")
GRADIENTS = ("type1", "type2", "type3")


def random_lists(batch=5, size=10, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    labels = rng.choice(5, size=(batch, size), p=[0.5, 0.2, 0.15, 0.1, 0.05]).astype(dtype)
    labels[:, -1] = -1.0
    labels[1, 2:4] = -1.0
    labels[2] = np.where(labels[2] >= 0, 0.0, -1.0)  # no relevant document
    scores = rng.normal(size=(batch, size)).astype(dtype)
    return labels, scores


@pytest.mark.parametrize("metric,topn", list(itertools.product(METRICS, [None, 3, 5])))
def test_forward_value_is_minus_the_exact_metric(metric, topn):
    labels, scores = random_lists(seed=1)
    loss = tfrx.losses.TwinSigmoidLoss(metric, topn=topn, seed=0,
                                       reduction="none")
    per_list = loss(labels, scores).numpy()[:, 0]  # [batch, 1], as in TF-Ranking
    expected = [-oracles.METRIC_ORACLES[metric](labels[b], scores[b], topn)
                for b in range(len(labels))]
    np.testing.assert_allclose(per_list, expected, rtol=1e-12, atol=1e-12)


@tensorflow_ops_suite
@pytest.mark.parametrize("metric,gradient,topn,graph",
                         [case + (False,) for case in itertools.product(METRICS, GRADIENTS,
                                                                        [None, 4])]
                         + [(metric, gradient, None, True)
                            for metric, gradient in itertools.product(METRICS, GRADIENTS)])
def test_gradient_equals_the_papers_closed_form(metric, gradient, topn, graph):
    labels, scores = random_lists(seed=2)
    loss = tfrx.losses.TwinSigmoidLoss(metric, topn=topn, gradient=gradient, alpha_b=1.3,
                                       seed=0, reduction="sum")

    def loss_gradient(s):
        with tf.GradientTape() as tape:
            tape.watch(s)
            value = loss(labels, s)
        return tape.gradient(value, s)

    grads = (tf.function(loss_gradient) if graph else loss_gradient)(tf.constant(scores))
    grads = grads.numpy()
    expected = np.stack([oracles.twin_loss_gradient(labels[b], scores[b], metric, topn,
                                                    1.3, gradient)
                         for b in range(len(labels))])
    np.testing.assert_allclose(grads, expected, rtol=1e-10, atol=1e-13)
    assert (grads[labels < 0] == 0).all()  # padded: exactly zero
    assert (grads[2] == 0).all()  # no relevant document: zero gradient


@tensorflow_ops_suite
@pytest.mark.parametrize("gradient", GRADIENTS)
def test_long_lists_gradient_equals_the_papers_closed_form(gradient):
    labels, scores = random_lists(batch=3, size=90, seed=8)
    loss = tfrx.losses.TwinSigmoidLoss("ndcg", topn=10, gradient=gradient, seed=0,
                                       reduction="sum")
    s = tf.constant(scores)
    with tf.GradientTape() as tape:
        tape.watch(s)
        value = loss(labels, s)
    expected = np.stack([oracles.twin_loss_gradient(labels[b], scores[b], "ndcg", 10, 1.0,
                                                    gradient) for b in range(len(labels))])
    np.testing.assert_allclose(tape.gradient(value, s).numpy(), expected, rtol=1e-10,
                               atol=1e-13)


def test_default_reduction_averages_over_lists_with_tf_ranking_weights():
    labels, scores = random_lists(seed=3)
    loss = tfrx.losses.TwinSigmoidLoss("ndcg", seed=0)
    expected = -np.mean([oracles.ndcg(labels[b], scores[b]) for b in range(len(labels))])
    np.testing.assert_allclose(loss(labels, scores).numpy(), expected, rtol=1e-12)
    # per-list weights scale lists; per-item weights follow TF-Ranking's listwise rule
    per_list = np.arange(1.0, 6.0)[:, None]
    ndcgs = np.array([oracles.ndcg(labels[b], scores[b]) for b in range(len(labels))])
    np.testing.assert_allclose(loss(labels, scores, sample_weight=per_list).numpy(),
                               -np.mean(per_list[:, 0] * ndcgs), rtol=1e-12)
    per_item = np.random.default_rng(0).uniform(size=labels.shape)
    relevance = np.where(labels > 0, labels, 0.0)
    list_weight = np.divide((per_item * relevance).sum(1), relevance.sum(1),
                            out=np.zeros(len(labels)), where=relevance.sum(1) > 0)
    np.testing.assert_allclose(loss(labels, scores, sample_weight=per_item).numpy(),
                               -np.mean(list_weight * ndcgs), rtol=1e-12)


@tensorflow_ops_suite
@pytest.mark.parametrize("gradient", GRADIENTS)
def test_xla_and_mixed_precision_match_graph_mode(gradient):
    labels, scores = random_lists(seed=7, dtype=np.float32)
    labels, scores = tf.constant(labels), tf.constant(scores)

    def value_and_grad_fn(**function_kwargs):
        loss = tfrx.losses.TwinSigmoidLoss("ap", topn=5, gradient=gradient, seed=3)

        @tf.function(**function_kwargs)
        def value_and_grad(s):
            with tf.GradientTape() as tape:
                tape.watch(s)
                value = loss(labels, s)
            return value, tape.gradient(value, s)
        return value_and_grad

    graph = value_and_grad_fn()(scores)
    xla = value_and_grad_fn(jit_compile=True)(scores)
    half = value_and_grad_fn()(tf.cast(scores, tf.float16))
    np.testing.assert_allclose(xla[0].numpy(), graph[0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(xla[1].numpy(), graph[1].numpy(), rtol=1e-4, atol=1e-7)
    assert half[0].dtype == tf.float32  # computed in float32
    scores16 = tf.cast(tf.cast(scores, tf.float16), tf.float32)
    reference = value_and_grad_fn()(scores16)
    np.testing.assert_allclose(half[0].numpy(), reference[0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(half[1].numpy(), reference[1].numpy(), rtol=1e-2, atol=1e-4)


def test_bad_arguments_raise_value_errors_naming_the_argument():
    for kwargs, arg in [({"metric": "mrr"}, "metric"), ({"gradient": "type4"}, "gradient"),
                        ({"topn": 0}, "topn"), ({"topn": 2.5}, "topn"),
                        ({"alpha_b": 0.0}, "alpha_b"), ({"alpha_b": -1}, "alpha_b")]:
        with pytest.raises(ValueError, match=arg):
            tfrx.losses.TwinSigmoidLoss(**kwargs)
    loss = tfrx.losses.TwinSigmoidLoss()
    with pytest.raises(ValueError, match="same shape"):
        loss(tf.zeros([2, 3]), tf.zeros([2, 4]))
    with pytest.raises(ValueError, match="rank"):
        loss(tf.zeros([2, 3, 1]), tf.zeros([2, 3, 1]))


# --- training -------------------------------------------------------------------------

def synthetic_lists(num_lists, size=20, features=8, seed=0):
    """Features with a known linear signal; labels 0..4 by quantiles of it."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(num_lists, size, features)).astype(np.float32)
    w = np.linspace(1.0, -0.5, features).astype(np.float32)
    signal = x @ w + 0.5 * rng.normal(size=(num_lists, size))
    labels = np.digitize(signal, [0.6, 1.5, 2.2, 2.8]).astype(np.float32)
    labels[:, -3:] = -1.0  # padding
    return x, labels


def small_scorer(features=8):
    inputs = keras.Input(shape=(None, features))
    hidden = keras.layers.Dense(16, activation="relu")(inputs)
    scores = keras.layers.Dense(1)(hidden)
    return keras.Model(inputs, keras.layers.Reshape((-1,))(scores))


@pytest.mark.parametrize("name", ["twin_precision_type3", "twin_ap_type2",
                                  "twin_ndcg_type1", "twin_ndcg_type3", "twin_nerr_type3"])
def test_a_keras_scorer_trains_and_saves_with_the_loss(name, tmp_path):
    keras.utils.set_random_seed(0)
    x, y = synthetic_lists(256)
    vx, vy = synthetic_lists(64, seed=1)
    model = small_scorer()
    loss = tfrx.losses.get(name, topn=10, seed=0)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss,
                  metrics=[tfrx.metrics.RankingMetric("ndcg", topn=5)])
    before = tfrx.metrics.ndcg(vy, model.predict(vx, verbose=0), topn=5).numpy().mean()
    model.fit(x, y, batch_size=32, epochs=4, verbose=0)
    after = tfrx.metrics.ndcg(vy, model.predict(vx, verbose=0), topn=5).numpy().mean()
    assert after > before + 0.1, (before, after)

    path = str(tmp_path / "model.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    assert restored.loss.get_config() == loss.get_config()
    np.testing.assert_allclose(restored.predict(vx, verbose=0), model.predict(vx, verbose=0),
                               rtol=1e-6)


@tensorflow_ops_suite
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("spread", [4.0, 500.0])  # 500: e^-spread underflows float32
@pytest.mark.parametrize("reduction", ["none", "sum_over_batch_size"])
@pytest.mark.parametrize("size", [12, 45])
def test_eager_graph_and_xla_give_the_same_losses_and_gradients(dtype, spread, reduction, size):
    # Eagerly and in graph mode the loss runs as an XLA program of its own (lists
    # padded to a bucket: 12 -> 32, 45 -> 64); under jit_compile, inside the caller's
    # program. All three give the same losses and gradients, bad input and sample
    # weights included.
    labels, scores = random_lists(batch=6, size=size, seed=9, dtype=dtype)
    scores = scores / np.ptp(scores) * spread
    scores[0, 3] = scores[0, 5]  # a tie, broken by the seeded keys
    scores[3, 1] = np.nan  # a valid document's NaN score: the list's loss is NaN
    labels[4, 0] = 40.0  # above the maximum label: NaN too
    weights = np.arange(1.0, 7.0, dtype=dtype)[:, None]
    loss = tfrx.losses.TwinSigmoidLoss("ndcg", topn=5, gradient="type3", seed=3,
                                       reduction=reduction)

    def value_and_grads(s):
        with tf.GradientTape() as tape:
            tape.watch(s)
            value = loss(labels, s, sample_weight=weights)
        return value, tape.gradient(value, s)

    results = []
    for run in (value_and_grads, tf.function(value_and_grads),
                tf.function(value_and_grads, jit_compile=True)):
        loss._calls.assign(0)  # the same tie-breaking draw in every run
        results.append([x.numpy() for x in run(tf.constant(scores))])
    (eager_value, eager_grads), (graph_value, graph_grads), (xla_value, xla_grads) = results
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    for value, grads in ((graph_value, graph_grads), (xla_value, xla_grads)):
        np.testing.assert_allclose(value, eager_value, rtol=tolerance, atol=tolerance)
        np.testing.assert_allclose(grads, eager_grads, rtol=tolerance, atol=tolerance)
    if reduction == "none":
        assert np.isnan(graph_value[[3, 4], 0]).all() and np.isfinite(graph_value[[0, 1, 5]]).all()
    assert (graph_grads[[2, 3, 4]] == 0).all()  # no relevant document; broken lists
    assert (graph_grads[labels < 0] == 0).all() and np.abs(graph_grads).sum() > 0
