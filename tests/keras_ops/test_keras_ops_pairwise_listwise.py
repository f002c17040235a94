"""The keras.ops twins of RankNet, the NDCG-beta hinge, ApproxNDCG and ListNet
(``tfr_extensions/keras_ops/losses/{pairwise,listwise}.py``) against their
TensorFlow bodies (``tfr_extensions/losses/{pairwise,listwise}.py``): per-list
values and gradients on every shared case (padding, ties, no relevant document,
list size 1, long lists, bad input), through the decorator's screening
(``fn.spec.compute(..., "keras_ops")`` against ``"tensorflow"``, the TF body); the Keras classes
compute on the backend; ``model.fit`` trains with them; ``jax.jit`` compiles them.
"""
import numpy as np
import pytest

import keras
from keras import ops

import harness
import tfr_extensions as tfrx

#: (registry key, options): each loss with its defaults and with every option changed
CONFIGS = [
    ("ranknet", {}), ("ranknet", {"sigma": 2.0}),
    ("ndcg_beta_hinge", {}), ("ndcg_beta_hinge", {"margin": 0.5, "squared": True}),
    ("approx_ndcg", {}), ("approx_ndcg", {"temperature": 0.7}),
    ("listnet", {}), ("listnet", {"temperature": 0.3}),
]
CONFIG_IDS = [f"{key}-{'-'.join(map(str, kwargs.values())) or 'defaults'}"
              for key, kwargs in CONFIGS]
KEYS = ["ranknet", "ndcg_beta_hinge", "approx_ndcg", "listnet"]


def function_of(key):
    return tfrx.losses.get(key).spec.function




#: (key, options, case): the defaults on every shared case, changed options on two
BODY_CASES = ([(key, kwargs, case) for key, kwargs in CONFIGS if not kwargs
               for case in sorted(harness.CASES)]
              + [(key, kwargs, case) for key, kwargs in CONFIGS if kwargs
                 for case in ("mixed", "bad_input")])


@pytest.mark.parametrize("key,kwargs,case", BODY_CASES,
                         ids=[f"{key}-{'-'.join(map(str, kwargs.values())) or 'defaults'}-{case}"
                              for key, kwargs, case in BODY_CASES])
def test_values_and_gradients_equal_the_tensorflow_body(key, kwargs, case):
    labels, scores = harness.CASES[case]
    function = function_of(key)
    options = function.spec.check_options(**kwargs)
    value, grad = harness.jit_value_and_grad(
        harness.per_list_loss(function.spec, options, "keras_ops"), labels, scores)
    want_value, want_grad = harness.tf_value_and_grad(
        harness.per_list_loss(function.spec, options, "tensorflow"), labels, scores)
    harness.assert_close(value, want_value, what=f"{key} {case} value")
    harness.assert_close(grad, want_grad, what=f"{key} {case} gradient")
    assert (grad[labels < 0] == 0).all()
    if case == "bad_input":  # lists 0, 1 and 3 are broken: NaN, zero gradient
        assert np.isnan(value[[0, 1, 3]]).all() and (grad[[0, 1, 3]] == 0).all()
        assert np.isfinite(value[2])


@pytest.mark.parametrize("key", KEYS)
def test_extreme_and_tied_scores_equal_the_tensorflow_body(key):
    """Scores near float32's maximum (differences overflow, clipping) and +-1e30."""
    labels = np.array([[1, 0, 2, 0, -1], [0, 1, 0, 2, 1], [2, 0, 1, 0, 0], [1, 1, 0, 0, -1]],
                      np.float32)
    scores = np.array([[3e38, -3e38, 1.0, 0.0, -3e38], [-3e38, -3e38, 3e38, 3e38, 0.5],
                       [1e30, -1e30, 5e29, -5e29, 0.0], [1e30, 1e30, -1e30, 0.0, 7.0]],
                      np.float32)
    function = function_of(key)
    options = function.spec.check_options()
    value, grad = harness.jit_value_and_grad(
        harness.per_list_loss(function.spec, options, "keras_ops"), labels, scores)
    want_value, want_grad = harness.tf_value_and_grad(
        harness.per_list_loss(function.spec, options, "tensorflow"), labels, scores)
    assert np.isfinite(value).all() and np.isfinite(grad).all()
    harness.assert_close(value, want_value)
    harness.assert_close(grad, want_grad)


@pytest.mark.parametrize("key", KEYS)
def test_the_keras_class_computes_on_the_backend(key):
    """``tfrx.losses.get(key)``'s reduced loss and gradient on Keras's backend equal
    the TF function's ``sum(losses * weights) / batch``, also with per-list
    sample weights and keras-rs's ``{"labels", "mask"}`` (on JAX under
    ``jax.jit``; eager JAX gives the same, test_jax_jit_gives_the_eager_values...)."""
    labels, scores = harness.CASES["mixed"]
    loss = tfrx.losses.get(key)
    function = function_of(key)
    options = function.spec.check_options()
    sample_weight = np.linspace(0.5, 1.5, len(labels)).astype(np.float32)[:, None]

    def reference(weights):
        def reduced(labels_, scores_):
            import tensorflow as tf  # pylint: disable=import-outside-toplevel
            losses, list_weights, _ = function.spec.compute(labels_, scores_, None, options,
                                                            "tensorflow")
            return tf.reduce_sum(losses * list_weights * weights) / len(labels)
        return harness.tf_value_and_grad(reduced, labels, scores)

    for weights, call in [
            (1.0, lambda l, s: loss(l, s)),
            (sample_weight[:, 0], lambda l, s: loss(l, s, sample_weight=sample_weight)),
            (1.0, lambda l, s: loss({"labels": ops.where(l >= 0, l, 0.0), "mask": l >= 0}, s))]:
        value, grad = harness.jit_value_and_grad(call, labels, scores)  # (eager: below)
        want_value, want_grad = reference(weights)
        harness.assert_close(value, want_value, what=key)
        harness.assert_close(grad, want_grad, what=key)
    out = loss(labels, scores)  # a tensor of Keras's backend (through the keras.ops body)
    assert ops.is_tensor(out) and keras.backend.standardize_dtype(out.dtype) == "float32"
    if harness.BACKEND != "tensorflow":
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        assert not isinstance(out, tf.Tensor)


@pytest.mark.parametrize("key", KEYS)
def test_a_batch_of_zero_lists_or_of_empty_lists_gives_zero(key):
    loss = tfrx.losses.get(key)
    for shape in [(0, 5), (2, 0), (0, 0)]:
        zeros = np.zeros(shape, np.float32)
        value, grad = harness.jit_value_and_grad(lambda l, s: loss(l, s), zeros, zeros)
        assert value == 0.0 and grad.shape == shape and (grad == 0).all()


@pytest.mark.parametrize("key", ["approx_ndcg", "ranknet"])  # one per family
def test_a_tiny_model_fits(key):
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    features = rng.normal(size=(16, 6, 3)).astype(np.float32)
    labels = np.clip(np.round(features[..., 0] + rng.normal(size=(16, 6)) * 0.3), 0, 3)
    labels = labels.astype(np.float32)
    labels[:, 5] = -1.0  # padding
    model = keras.Sequential([keras.Input((6, 3)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(1), keras.layers.Reshape((6,))])
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss=tfrx.losses.get(key))
    history = model.fit(features, labels, batch_size=8, epochs=3, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]


@pytest.mark.skipif(harness.BACKEND != "jax", reason="jax.jit: the JAX backend's suite")
@pytest.mark.parametrize("key", KEYS)
def test_jax_jit_gives_the_eager_values_and_gradients(key):
    """The Keras class's reduced loss and gradient under ``jax.jit`` equal eager
    JAX's (the bodies under ``jax.jit`` on every case, bad input included, are
    held to TensorFlow above)."""
    import jax  # pylint: disable=import-outside-toplevel
    labels, scores = harness.CASES["mixed"]
    loss = tfrx.losses.get(key)
    value_and_grad = jax.value_and_grad(lambda s, l: loss(l, s))
    value, grad = jax.jit(value_and_grad)(scores, labels)
    eager_value, eager_grad = value_and_grad(scores, labels)
    harness.assert_close(harness.to_numpy(value), harness.to_numpy(eager_value))
    harness.assert_close(harness.to_numpy(grad), harness.to_numpy(eager_grad))
