"""IRGAN point / pair / list: training runs, both players learn, the
discriminator separates ideal from sampled rankings better after training."""
import numpy as np
import pytest
import tensorflow as tf

import tfr_extensions as tfrx
from tfr_extensions.adversarial import IRGAN, log1mexp

NUM_FEATURES = 6


@pytest.fixture(scope="module")
def dataset():
    data = tfrx.data.synthetic(num_queries=32, num_features=NUM_FEATURES, seed=3,
                               list_size=(4, 16), noise=0.3)
    return tfrx.data.ranking_dataset(data, batch_size=16, shuffle=True, seed=0)


def _players(seed):
    tf.keras.utils.set_random_seed(seed)
    make = lambda name: tfrx.models.scorer("R1.L", NUM_FEATURES, hidden_units=8,  # noqa: E731
                                           batch_norm=False, name=name)
    return make("generator"), make("discriminator")


def _weights(model):
    return [w.numpy().copy() for w in model.trainable_weights]


def _gap(gan, dataset):
    return np.mean([float(gan.discriminator_gap(x, y, num_samples=10, seed=1))
                    for x, y in dataset.take(2)])


@pytest.mark.parametrize("mode", ["point", "pair", "list"])
def test_training_runs_both_players_learn_and_discriminator_separates(mode, dataset):
    generator, discriminator = _players(0)
    gan = IRGAN(generator, discriminator, mode=mode, topn=10, seed=0)
    gan.compile(d_optimizer=tf.keras.optimizers.Adam(0.03),
                g_optimizer=tf.keras.optimizers.Adam(0.03))
    before = {"g": _weights(generator), "d": _weights(discriminator)}
    gap_before = _gap(gan, dataset)
    history = gan.fit(dataset, epochs=3, verbose=0)
    for key in ("d_loss", "g_loss", "reward"):
        assert np.all(np.isfinite(history.history[key])), key
    for name, model in (("g", generator), ("d", discriminator)):
        changed = [np.any(a != b) for a, b in zip(before[name], _weights(model))]
        assert all(changed), name
    assert _gap(gan, dataset) > gap_before


def test_either_player_is_evaluated_and_exported(dataset, tmp_path):
    generator, discriminator = _players(1)
    gan = IRGAN(generator, discriminator, mode="list", num_samples=2, topn=5, seed=2)
    gan.compile(metrics=[tfrx.metrics.RankingMetric("ndcg", topn=5)])
    x, y = next(iter(dataset))
    results = {}
    for player in ("discriminator", "generator"):
        gan.serve = player
        results[player] = gan.evaluate(dataset, verbose=0, return_dict=True)["ndcg_5"]
        np.testing.assert_allclose(gan.predict(x, verbose=0), gan.player(player)(x).numpy(),
                                   rtol=1e-5, atol=1e-6)
    assert all(0.0 < v <= 1.0 for v in results.values())
    export_dir = tfrx.serving.export(gan.generator, str(tmp_path / "generator" / "1"))
    assert "serving_default" in tf.saved_model.load(export_dir).signatures


def test_reproducible_with_a_seed(dataset):
    runs = []
    x, y = next(iter(dataset))
    for run in range(2):
        generator, discriminator = _players(4)  # same initial weights
        tf.random.set_seed(100 + run)  # the global RNG must not matter
        gan = IRGAN(generator, discriminator, mode="pair", seed=5)
        gan.compile(run_eagerly=True)  # one step: no tracing
        runs.append(gan.train_on_batch(x, y, return_dict=True))
    assert runs[0] == runs[1]


def test_degenerate_lists_are_finite():
    """All-padding lists, lists without relevant documents, one-document lists."""
    features = tf.random.stateless_normal([4, 5, NUM_FEATURES], seed=[1, 2])
    labels = tf.constant([[-1.0] * 5, [0.0, 0.0, 0.0, -1.0, -1.0],
                          [2.0, -1.0, -1.0, -1.0, -1.0], [1.0, 0.0, 2.0, 0.0, -1.0]])
    for mode in ("point", "pair", "list"):
        generator, discriminator = _players(6)
        gan = IRGAN(generator, discriminator, mode=mode, seed=0)
        gan.compile(run_eagerly=True)  # one step: no tracing
        out = gan.train_on_batch({"features": features}, labels, return_dict=True)
        assert all(np.isfinite(v) for v in out.values()), (mode, out)


def test_log1mexp_matches_numpy_and_is_finite():
    x = tf.constant([-1e-8, -0.1, -0.69, -0.7, -5.0, -50.0], tf.float64)
    np.testing.assert_allclose(log1mexp(x).numpy(), np.log(-np.expm1(x.numpy())), rtol=1e-12,
                               atol=1e-15)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(log1mexp(x))
    assert np.all(np.isfinite(tape.gradient(y, x).numpy()))


@pytest.mark.parametrize("kwargs, arg", [
    ({"mode": "triple"}, "mode"), ({"num_samples": 0}, "num_samples"),
    ({"temperature": 0.0}, "temperature"), ({"topn": 0}, "topn"),
    ({"serve": "both"}, "serve"), ({"d_steps": 0}, "d_steps"),
])
def test_bad_arguments_raise_value_error(kwargs, arg):
    generator, discriminator = _players(0)
    with pytest.raises(ValueError, match=arg):
        IRGAN(generator, discriminator, **kwargs)
