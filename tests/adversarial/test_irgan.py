"""IRGAN point / pair / list: training runs, both players learn, the
discriminator separates ideal from sampled rankings better after training;
under MirroredStrategy too."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import tfr_extensions as tfrx
from support import stack
from support.stack import REPO
from tfr_extensions.adversarial import IRGAN
from tfr_extensions.backend import keras

NUM_FEATURES = 6


@pytest.fixture(scope="module")
def dataset():
    data = tfrx.data.synthetic(num_queries=32, num_features=NUM_FEATURES, seed=3,
                               list_size=(4, 16), noise=0.3)
    return tfrx.data.ranking_dataset(data, batch_size=16, shuffle=True, seed=0)


def _players(seed):
    keras.utils.set_random_seed(seed)
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
    gan.compile(d_optimizer=keras.optimizers.Adam(0.03),
                g_optimizer=keras.optimizers.Adam(0.03))
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


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_ideal_rankings_break_label_ties_uniformly_at_random(dtype):
    """The discriminator's ideal rankings (Eq. 13): labels sorted descending,
    each order of tied documents equally likely (float32 labels once kept the
    index order: float noise passed as integer tie keys)."""
    from tfr_extensions.adversarial import irgan  # pylint: disable=import-outside-toplevel
    labels = tf.constant([[1.0, 2.0, 1.0, 1.0, -1.0]], dtype)  # 2 first, then 0/2/3 tied
    firsts = []
    for step in range(300):
        order = irgan._ideal_rankings(labels, labels >= 0, tf.constant([step, 9]), topn=4)
        order = order.numpy()[0, 0]
        assert order[0] == 1 and sorted(order[1:]) == [0, 2, 3]
        firsts.append(order[1])
    counts = np.bincount(firsts, minlength=4)[[0, 2, 3]]
    assert counts.min() > 70, counts  # 100 each expected; P(< 71) ~ 1e-3 per document


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


@pytest.mark.parametrize("mode", ["point", "pair", "list"])
def test_a_batch_of_zero_lists_trains_without_error(mode):
    """The differentiated scores are gathered with lists.batch_gather, whose
    gradient, unlike tf.gather's with batch_dims=1, fits an empty batch."""
    generator, discriminator = _players(7)
    gan = IRGAN(generator, discriminator, mode=mode, seed=0)
    gan.compile(run_eagerly=True)
    out = gan.train_on_batch({"features": tf.zeros([0, 5, NUM_FEATURES])}, tf.zeros([0, 5]),
                             return_dict=True)
    assert all(np.isfinite(v) for v in out.values()), out


MIRRORED_JOB = """
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import numpy as np
import tfr_extensions as tfrx
from tfr_extensions.backend import keras
from tfr_extensions.adversarial import IRGAN
from tfr_extensions.ops import plackett_luce

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
data = tfrx.data.synthetic(num_queries=32, num_features=4, seed=3, list_size=(4, 10), noise=0.3)


def run(seed):
    keras.utils.set_random_seed(0)  # the initial weights (and the data order)
    dataset = tfrx.data.numeric_masks(  # Keras 3 averages a batch across replicas first
        tfrx.data.ranking_dataset(data, batch_size=8, shuffle=True, seed=0))
    with strategy.scope():
        players = [tfrx.models.scorer("R1.L", 4, hidden_units=4, batch_norm=False, name=name)
                   for name in ("generator", "discriminator")]
        gan = IRGAN(*players, mode="list", topn=4, seed=seed)
        gan.compile(d_optimizer=keras.optimizers.Adam(0.03),
                    g_optimizer=keras.optimizers.Adam(0.03))
    before = [w.numpy().copy() for w in gan.trainable_weights]
    history = gan.fit(dataset, epochs=2, verbose=0).history
    changed = all(bool(np.any(a != w.numpy())) for a, w in zip(before, gan.trainable_weights))
    steps = int(gan._calls.numpy())

    @tf.function
    def draws():  # two steps of one ranking per replica, from the same scores
        scores = tf.constant([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
        return [strategy.experimental_local_results(strategy.run(
            lambda: plackett_luce.sample_rankings(scores, seed=gan.next_seed())))
            for _ in range(2)]
    rankings = [[r.numpy().ravel().tolist() for r in step] for step in draws()]
    return {"history": history, "changed": changed, "steps": steps, "rankings": rankings,
            "weights": [w.numpy().ravel().tolist() for w in gan.trainable_weights]}


json.dump({"first": run(5), "again": run(5), "other": run(6)}, sys.stdout)
"""


@stack.heavy_integration("tf215", "keras3")
def test_training_under_mirrored_strategy_is_reproducible_with_replicas_drawing_apart():
    """Two logical CPU replicas: the step counter (ON_WRITE, ONLY_FIRST_REPLICA)
    advances once per step, each replica folds in its id (the replicas draw
    different rankings at every step), training moves both players with finite
    losses, and one seed gives the same run twice; another seed, another run."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, "-c", MIRRORED_JOB], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    first = runs["first"]
    assert first["changed"] and first["steps"] == 2 * 4  # 32 queries, batches of 8, 2 epochs
    for key in ("d_loss", "g_loss", "reward"):
        assert np.all(np.isfinite(first["history"][key])), key
    for step in first["rankings"]:
        assert len(step) == 2 and step[0] != step[1]  # the replicas draw apart
        assert sorted(step[0]) == sorted(step[1]) == list(range(6))
    assert first["rankings"][0] != first["rankings"][1]  # and afresh at every step
    assert runs["again"] == first
    assert runs["other"]["history"] != first["history"]


@pytest.mark.parametrize("kwargs, arg", [
    ({"mode": "triple"}, "mode"), ({"num_samples": 0}, "num_samples"),
    ({"temperature": 0.0}, "temperature"), ({"topn": 0}, "topn"),
    ({"serve": "both"}, "serve"), ({"d_steps": 0}, "d_steps"),
])
def test_bad_arguments_raise_value_error(kwargs, arg):
    generator, discriminator = _players(0)
    with pytest.raises(ValueError, match=arg):
        IRGAN(generator, discriminator, **kwargs)
