"""Scorers: notation, activations, masking, normalization, dtypes, serialization."""
import json

import numpy as np
import pytest
import tensorflow as tf

from tfr_extensions import models
from tfr_extensions.backend import keras

F = 5


def batch(seed=0, batch_size=3, list_size=6, lengths=(6, 4, 1)):
    rng = np.random.default_rng(seed)
    features = rng.normal(3.0, 2.0, size=(batch_size, list_size, F)).astype(np.float32)
    mask = np.arange(list_size)[None, :] < np.asarray(lengths)[:, None]
    return {"features": tf.constant(features), "mask": tf.constant(mask)}


@pytest.mark.parametrize("notation, hidden, activation, output_activation", [
    ("R5", (100,) * 4, "relu", True),
    ("CE5", (100,) * 4, "celu", True),
    ("GE5", (100,) * 4, "gelu", True),
    ("R4.L", (100,) * 4, "relu", False),
    ("CE4.L", (100,) * 4, "celu", False),
    ("R1", (), "relu", True),
    ("GE1.L", (100,), "gelu", False),
    ("B64", (64, 32, 16), "relu", False),
    ("B1024", (1024, 512, 256, 128, 64, 32, 16), "relu", False),
])
def test_notation(notation, hidden, activation, output_activation):
    arch = models.parse_notation(notation, 100)
    assert arch == models.Architecture(hidden, activation, output_activation)
    model = models.scorer(notation, F, hidden_units=100)
    dense = [v for v in model.trainable_variables if "kernel" in v.name]
    assert [int(v.shape[1]) for v in dense] == list(hidden) + [1]


@pytest.mark.parametrize("notation", ["R0", "X5", "r5", "R4.l", "B32", "B100", "CE", "5", None])
def test_bad_notation_lists_accepted_forms(notation):
    with pytest.raises(ValueError, match=r"notation.*R<n>\.L.*B1024"):
        models.scorer(notation, F)


def test_bad_arguments():
    with pytest.raises(ValueError, match="normalization"):
        models.scorer("R4.L", F, normalization="minmax")
    with pytest.raises(ValueError, match="num_features"):
        models.scorer("R4.L", 0)


def test_celu_matches_definition_and_has_finite_gradient():
    x = np.array([-1e4, -30.0, -1.0, -1e-3, 0.0, 1e-3, 2.0, 1e4])
    want = np.maximum(0.0, x) + np.minimum(0.0, np.expm1(np.minimum(x, 0.0)))
    np.testing.assert_allclose(models.celu(tf.constant(x)).numpy(), want, rtol=1e-12)
    x64 = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x64)
        y = models.celu(x64)
    grad = tape.gradient(y, x64).numpy()
    np.testing.assert_allclose(grad, np.where(x > 0, 1.0, np.exp(np.minimum(x, 0.0))), rtol=1e-12)
    theoretical, numerical = tf.test.compute_gradient(
        models.celu, [tf.constant([-1.3, -0.2, 0.4, 2.5], tf.float64)])
    np.testing.assert_allclose(theoretical[0], numerical[0], atol=1e-6)


@pytest.mark.parametrize("notation", ["R5", "CE4.L", "GE5", "B64"])
def test_output_shape_dtype_finite_and_mask_optional(notation):
    model = models.scorer(notation, F, hidden_units=16)
    inputs = batch()
    scores = model(inputs, training=False)
    assert scores.shape == (3, 6) and scores.dtype == tf.float32
    assert np.isfinite(scores.numpy()).all()
    all_valid = {"features": inputs["features"], "mask": tf.ones([3, 6], tf.bool)}
    np.testing.assert_allclose(model({"features": inputs["features"]}).numpy(),
                               model(all_valid).numpy(), rtol=1e-6)
    if notation == "R5":
        assert (scores.numpy() >= 0).all()  # output ReLU


@pytest.mark.parametrize("training", [False, True])
def test_padding_is_deleting(training):
    """Garbage in padded rows changes no valid score (z-score and batch-norm moments
    use valid documents only)."""
    model = models.scorer("CE4.L", F, hidden_units=16)
    inputs = batch(lengths=(6, 4, 1))
    garbage = np.array(inputs["features"])
    garbage[~inputs["mask"].numpy()] = 1e6
    padded = model(inputs, training=training).numpy()
    noisy = model({"features": tf.constant(garbage), "mask": inputs["mask"]},
                  training=training).numpy()
    valid = inputs["mask"].numpy()
    np.testing.assert_allclose(noisy[valid], padded[valid], rtol=1e-4, atol=1e-5)
    assert np.isfinite(noisy).all()


def test_normalization_inside_model_makes_scores_invariant_to_per_query_affine_maps():
    model = models.scorer("R4.L", F, hidden_units=16)
    inputs = batch()
    scale = tf.constant([[[2.0]], [[0.5]], [[7.0]]])
    shifted = {"features": inputs["features"] * scale + 11.0, "mask": inputs["mask"]}
    valid = inputs["mask"].numpy()
    np.testing.assert_allclose(model(shifted).numpy()[valid], model(inputs).numpy()[valid],
                               rtol=1e-4, atol=1e-4)
    raw = models.scorer("R4.L", F, hidden_units=16, normalization="none")
    assert not np.allclose(raw(shifted).numpy()[valid], raw(inputs).numpy()[valid])


def test_permuting_documents_permutes_scores():
    model = models.scorer("GE5", F, hidden_units=16)
    inputs = batch(lengths=(6, 6, 6))
    perm = np.random.default_rng(3).permutation(6)
    permuted = {"features": tf.gather(inputs["features"], perm, axis=1), "mask": inputs["mask"]}
    np.testing.assert_allclose(model(permuted).numpy(), model(inputs).numpy()[:, perm],
                               rtol=1e-5, atol=1e-6)


def test_mixed_float16_outputs_float32():
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = models.scorer("CE4.L", F, hidden_units=16)
        scores = model(batch(), training=True)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    assert scores.dtype == tf.float32
    assert model.dense_layers[0].compute_dtype == "float16"
    assert np.isfinite(scores.numpy()).all()


def test_l2_matches_pytorch_weight_decay_convention():
    model = models.scorer("R1.L", F, hidden_units=4, l2=1e-3)
    kernels = [v for v in model.trainable_variables if "kernel" in v.name]
    want = 1e-3 / 2 * sum(float(tf.reduce_sum(k ** 2)) for k in kernels)
    assert float(tf.add_n(model.losses)) == pytest.approx(want, rel=1e-5)
    assert not models.scorer("R1.L", F, hidden_units=4).losses


def test_config_round_trip_through_json():
    model = models.scorer("CE4.L", F, hidden_units=8, l2=1e-3)
    config = json.loads(json.dumps(keras.utils.serialize_keras_object(model)))
    clone = keras.utils.deserialize_keras_object(config)
    inputs = batch()
    clone(inputs)
    clone.set_weights(model.get_weights())
    assert clone.get_config() == model.get_config()
    np.testing.assert_allclose(clone(inputs).numpy(), model(inputs).numpy(), rtol=1e-6)



# --- the context-aware scorer SA<n> (Keras 3: tests/neutral/test_neutral_attention_scorer.py)


def test_sa_notation_and_its_scores_against_the_numpy_oracle():
    from support import oracles_attention  # pylint: disable=import-outside-toplevel
    assert models.parse_notation("SA3", 32) == models.Architecture((32,), "relu", False, 3)
    keras.utils.set_random_seed(0)
    model = models.scorer("SA2", F, hidden_units=16, attention_heads=2, batch_norm=False)
    inputs = batch(seed=4)
    mask = inputs["mask"].numpy()
    want = oracles_attention.scores(inputs["features"].numpy(), mask,
                                    oracles_attention.weights_of(model, np.asarray))
    got = model(inputs, training=False).numpy()
    np.testing.assert_allclose(got[mask], want[mask], rtol=2e-5, atol=2e-5)


def test_sa_scores_ignore_padding_anywhere_and_follow_permutations():
    keras.utils.set_random_seed(1)
    model = models.scorer("SA2", F, hidden_units=16, attention_heads=2)
    inputs = batch(seed=5)
    features, mask = inputs["features"].numpy(), inputs["mask"].numpy()
    want = model(inputs, training=False).numpy()
    for position in (0, 2, 6):
        padded = {"features": np.insert(features, position, np.nan, axis=1),
                  "mask": np.insert(mask, position, False, axis=1)}
        got = np.delete(model(padded, training=False).numpy(), position, axis=1)
        np.testing.assert_allclose(got[mask], want[mask], rtol=1e-6, atol=1e-6)
    permutation = np.random.default_rng(2).permutation(features.shape[1])
    got = model({"features": features[:, permutation], "mask": mask[:, permutation]},
                training=False).numpy()
    valid = mask[:, permutation]
    np.testing.assert_allclose(got[valid], want[:, permutation][valid], rtol=1e-6, atol=1e-6)
