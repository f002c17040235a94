"""One suite over every registered loss, so a new loss cannot skip it.

Each loss, built by its registry name with defaults (and a seed where it takes
one), must: round-trip through JSON config; give finite values and gradients at
scores of +-1e4 and on all-tied scores; give padded documents exactly zero
gradient; give lists without relevant documents zero loss and zero gradient;
give the same values under XLA as in graph mode; accept ragged input equal to
padded input; and train a Keras model under the mixed_float16 policy.
"""
import inspect
import json

import numpy as np
import pytest
import tensorflow as tf

import tfr_extensions as tfrx
from loss_modes import value_and_grad
from stack import needs_tf_ranking, tfr
from tfr_extensions.losses import registry

NAMES = sorted({inspect.signature(cls.__init__).parameters["name"].default
                for cls, _ in registry._NAMES.values()})


def build(name, **kwargs):
    cls = registry._NAMES[name][0]
    if "seed" in inspect.signature(cls.__init__).parameters:
        kwargs.setdefault("seed", 0)
    return tfrx.losses.get(name, **kwargs)


LABELS = np.array([
    [2.0, 0.0, 1.0, 0.0, 3.0, -1.0, -1.0],   # padded tail
    [0.0, 0.0, 0.0, 0.0, -1.0, -1.0, -1.0],  # no relevant document
    [1.0, 0.0, -1.0, 2.0, 0.0, 1.0, 0.0],    # padding in the middle
    [4.0, 1.0, 0.0, 0.0, 0.0, 2.0, 1.0],
], np.float32)
SCORES = np.random.default_rng(0).normal(size=LABELS.shape).astype(np.float32)


def test_every_class_is_reachable_by_its_class_name_and_default_name():
    for name in NAMES:
        cls = registry._NAMES[name][0]
        assert registry._NAMES[cls.__name__][0] is cls
    with pytest.raises(ValueError, match="Known losses: .*twin_ndcg_type3"):
        tfrx.losses.get("no_such_loss")


@needs_tf_ranking
def test_tf_ranking_names_are_known_where_it_imports():
    with pytest.raises(ValueError, match="Known losses: .*twin_ndcg_type3.*approx_ndcg_loss"):
        tfrx.losses.get("no_such_loss")
    assert type(tfrx.losses.get("list_mle_loss")).__name__ == "ListMLELoss"


@pytest.mark.skipif(tfr is not None, reason="TF-Ranking imports on this stack")
def test_without_tf_ranking_its_names_are_unknown_and_the_error_says_why():
    assert registry.tfr_loss_names() == () and registry.names() == registry.tfrx_loss_names()
    with pytest.raises(ValueError, match="approx_ndcg_loss.*need tensorflow-ranking"):
        tfrx.losses.get("approx_ndcg_loss")


@needs_tf_ranking
def test_tf_ranking_lambda_weights_by_name_give_lambdarank():
    by_name = tfrx.losses.get("pairwise_logistic_loss", lambda_weight="ndcg_v2")
    by_object = tfrx.losses.get("pairwise_logistic_loss",
                                lambda_weight=tfr.keras.losses.NDCGLambdaWeightV2())
    assert isinstance(by_name._lambda_weight, tfr.keras.losses.NDCGLambdaWeightV2)
    np.testing.assert_allclose(by_name(LABELS, SCORES).numpy(), by_object(LABELS, SCORES).numpy())
    plain = tfrx.losses.get("pairwise_logistic_loss")
    assert not np.isclose(by_name(LABELS, SCORES).numpy(), plain(LABELS, SCORES).numpy())
    with pytest.raises(ValueError, match="lambda_weight.*ndcg_v2"):
        tfrx.losses.get("pairwise_logistic_loss", lambda_weight="ndcg_v3")


@pytest.mark.parametrize("name", NAMES)
def test_json_config_round_trip_gives_the_same_loss(name):
    loss = build(name)
    config = json.loads(json.dumps(tf.keras.losses.serialize(loss)))
    clone = tf.keras.losses.deserialize(config)
    assert type(clone) is type(loss) and clone.get_config() == loss.get_config()
    np.testing.assert_allclose(clone(LABELS, SCORES).numpy(), build(name)(LABELS, SCORES).numpy(),
                               rtol=1e-6)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("scores", [
    np.where(np.arange(7) % 2 == 0, 1e4, -1e4)[None].repeat(4, 0).astype(np.float32),
    np.zeros((4, 7), np.float32),  # all tied
    SCORES * 1e4,
], ids=["extreme", "tied", "large-range"])
def test_finite_values_zero_gradient_for_padding_and_lists_without_relevance(name, scores):
    value, grad = value_and_grad(build(name, reduction="none"), LABELS, scores)
    value, grad = value.numpy().reshape(len(LABELS), -1), grad.numpy()
    assert np.isfinite(value).all() and np.isfinite(grad).all()
    assert (grad[LABELS < 0] == 0).all()
    assert (value[1] == 0).all() and (grad[1] == 0).all()


@pytest.mark.parametrize("name", NAMES)
def test_xla_matches_graph_mode(name):
    graph_loss, xla_loss = build(name), build(name)
    graph = tf.function(lambda s: value_and_grad(graph_loss, LABELS, s))(SCORES)
    xla = tf.function(lambda s: value_and_grad(xla_loss, LABELS, s), jit_compile=True)(SCORES)
    np.testing.assert_allclose(xla[0].numpy(), graph[0].numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(xla[1].numpy(), graph[1].numpy(), rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_ragged_input_equals_padded_input(name):
    labels = LABELS[[0, 1, 3]]  # padding only at the ends: ragged packs nothing
    scores = SCORES[[0, 1, 3]]
    rows = [labels[b] >= 0 for b in range(3)]
    ragged = (tf.ragged.constant([labels[b][rows[b]] for b in range(3)]),
              tf.ragged.constant([scores[b][rows[b]] for b in range(3)]))
    np.testing.assert_allclose(build(name, ragged=True)(*ragged).numpy(),
                               build(name)(labels, scores).numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", NAMES)
def test_trains_under_the_mixed_float16_policy(name):
    tf.keras.utils.set_random_seed(0)
    tf.keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        inputs = tf.keras.Input(shape=(7, 3))
        hidden = tf.keras.layers.Dense(4, activation="relu")(inputs)
        scores = tf.keras.layers.Dense(1, dtype="float32")(hidden)
        model = tf.keras.Model(inputs, tf.keras.layers.Reshape((7,))(scores))
        model.compile(optimizer="adam", loss=build(name))
        features = np.random.default_rng(1).normal(size=(4, 7, 3)).astype(np.float32)
        history = model.fit(features, LABELS, epochs=2, verbose=0)
        assert np.isfinite(history.history["loss"]).all()
    finally:
        tf.keras.mixed_precision.set_global_policy("float32")
