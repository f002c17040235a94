"""pipelines.distributed: the Keras 3 multi-worker loop matches ``fit``; the replica sync."""
import numpy as np
import pytest
import tensorflow as tf

import tfr_extensions as tfrx
from pipelines import distributed
from tfr_extensions import backend
from tfr_extensions.backend import keras

DATA = tfrx.data.synthetic(num_queries=40, num_features=5, seed=4, list_size=(3, 10))
EPOCHS, STEPS = 3, 4


class Recorder(keras.callbacks.Callback):
    """Every callback hook ``fit`` calls, with its epoch or batch and log names."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def on_train_begin(self, logs=None):
        self.calls.append(("train_begin", self.params["epochs"], self.params["steps"]))

    def on_epoch_begin(self, epoch, logs=None):
        self.calls.append(("epoch_begin", epoch))

    def on_train_batch_end(self, batch, logs=None):
        self.calls.append(("batch_end", batch, sorted(logs)))

    def on_epoch_end(self, epoch, logs=None):
        self.calls.append(("epoch_end", epoch, sorted(logs)))

    def on_train_end(self, logs=None):
        self.calls.append(("train_end",))


def build(kind):
    """A compiled scorer with a seeded randomized loss, or an IRGAN."""
    if kind == "irgan":
        from tfr_extensions.adversarial import IRGAN
        model = IRGAN(*[tfrx.models.scorer("R2.L", 5, hidden_units=8, name=name)
                        for name in ("generator", "discriminator")], mode="pair", seed=1)
        model.compile()
        return model
    model = tfrx.models.scorer("R2.L", 5, hidden_units=8)
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=tfrx.losses.get("expected_utility", topn=3, seed=1),
                  metrics=[tfrx.metrics.RankingMetric("ndcg", topn=5)])
    return model


def train(kind, use_own_loop):
    """Three epochs (resumed at the second) under a MirroredStrategy of one replica:
    ``model.fit`` or ``fit_multi_worker``."""
    keras.utils.set_random_seed(0)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    dataset = tfrx.data.ranking_dataset(DATA, batch_size=8, normalization="none", seed=2,
                                        repeat=True)
    with strategy.scope():
        model = build(kind)
    recorder = Recorder()
    fit = distributed.fit_multi_worker if use_own_loop else distributed.fit
    fit(model, dataset, strategy, epochs=EPOCHS, initial_epoch=1, steps_per_epoch=STEPS,
        callbacks=[recorder], verbose=0)
    return model, recorder, model.history.history


@pytest.mark.skipif(not backend.IS_KERAS_3, reason="the loop replaces Keras 3's fit only "
                    "(Keras 2 has no Model._symbolic_build)")
@pytest.mark.parametrize("kind, keys", [("scorer", {"loss", "ndcg_5"}),
                                        ("irgan", {"d_loss", "g_loss", "reward"})])
def test_the_multi_worker_loop_trains_and_calls_back_as_fit_does(kind, keys):
    want_model, want_calls, want_history = train(kind, use_own_loop=False)
    got_model, got_calls, got_history = train(kind, use_own_loop=True)
    assert got_calls.calls == want_calls.calls
    assert want_calls.calls[0] == ("train_begin", EPOCHS, STEPS)
    assert [c[0] for c in want_calls.calls].count("batch_end") == (EPOCHS - 1) * STEPS
    assert set(got_history) == set(want_history) == keys
    for key, values in want_history.items():
        np.testing.assert_allclose(got_history[key], values, rtol=1e-6, err_msg=key)
    for got, want in zip(got_model.get_weights(), want_model.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert len(got_model.get_weights()) == len(want_model.get_weights())


def test_replica_local_variables_are_the_batch_norm_statistics():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        model = tfrx.models.scorer("R2.L", 5, hidden_units=8)
    local = distributed.replica_local_variables(model)
    assert len(local) == 4 and all("moving" in v.name for v in local)  # 2 layers, mean + var
    assert not distributed.has_replicas(strategy) and not distributed.has_replicas(None)
    assert distributed.uses_own_loop(strategy) is False and distributed.uses_own_loop(None) is False
