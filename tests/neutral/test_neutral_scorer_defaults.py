"""Our parts fit at their defaults: the batches of ``tfrx.data.RankingPyDataset(data,
batch_size=32)`` (features ``[B, L, F]`` alone, labels ``[B, L]`` with -1 on padding) go
into ``tfrx.models.scorer``, into ``model.fit`` with our loss, and into the training
model of ``tfrx-train`` (``tfrx.models.TrainingModel``), on every backend: Keras 3 on
TensorFlow, JAX and PyTorch, and Keras 2 (where ``RankingPyDataset`` is a
``keras.utils.Sequence``).

A bare features array means every document is valid (the same scores as an all-True
mask); the labels' -1 still keeps padding out of the loss.

Imports keras, numpy, pytest and tfr_extensions only, so it runs where TensorFlow is not
installed (``KERAS_BACKEND=jax`` or ``torch``).
"""
import numpy as np
import pytest

import tfr_extensions as tfrx
from tfr_extensions.backend import keras

NUM_FEATURES = 4


def to_numpy(x) -> np.ndarray:
    convert = getattr(getattr(keras, "ops", None), "convert_to_numpy", None)
    return np.asarray(convert(x) if convert else x)


@pytest.fixture(scope="module")
def batches():
    """Default batches of 40 synthetic queries of 3 to 12 documents: padded lists."""
    data = tfrx.data.synthetic(num_queries=40, num_features=NUM_FEATURES, seed=2,
                               list_size=(3, 12))
    return tfrx.data.RankingPyDataset(data, batch_size=32)


def test_default_batches_are_bare_features_with_padded_labels(batches):
    features, labels = batches[0]
    assert isinstance(features, np.ndarray) and features.shape[:2] == labels.shape
    assert features.shape == (32, 12, NUM_FEATURES) and (labels == -1).any()


def test_the_scorer_takes_default_batches_as_every_document_valid(batches):
    keras.utils.set_random_seed(0)
    model = tfrx.models.scorer("R4.L", NUM_FEATURES, hidden_units=8)
    features, _ = batches[0]
    bare = to_numpy(model(features, training=False))
    everything_valid = {"features": features, "mask": np.ones(features.shape[:2], bool)}
    assert bare.shape == features.shape[:2] and np.isfinite(bare).all()
    np.testing.assert_allclose(bare, to_numpy(model(everything_valid, training=False)),
                               rtol=1e-6, atol=1e-6)


def test_padding_labels_keep_padded_scores_out_of_the_loss(batches):
    features, labels = batches[0]
    model = tfrx.models.scorer("R4.L", NUM_FEATURES, hidden_units=8)
    loss = tfrx.losses.get("twin_ndcg_type3", seed=0)
    scores = to_numpy(model(features, training=False))
    moved = np.where(labels < 0, np.float32(1e3), scores).astype(np.float32)
    assert float(to_numpy(loss(labels, scores))) == pytest.approx(
        float(to_numpy(loss(labels, moved))), rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("training_model", [False, True], ids=["scorer", "TrainingModel"])
def test_fit_trains_the_scorer_on_default_batches(batches, training_model):
    keras.utils.set_random_seed(0)
    scorer = tfrx.models.scorer("R4.L", NUM_FEATURES, hidden_units=8)
    loss = tfrx.losses.get("twin_ndcg_type3", seed=0)
    model = tfrx.models.TrainingModel(scorer, loss) if training_model else scorer
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=loss)
    history = model.fit(batches, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
    features, _ = batches[1]  # the last, smaller batch: 8 lists
    scores = to_numpy(scorer(features, training=False))
    assert scores.shape == features.shape[:2] and np.isfinite(scores).all()
