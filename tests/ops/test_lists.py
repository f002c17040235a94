"""lists: the shared helpers of every op and loss."""
import numpy as np
import pytest
import tensorflow as tf

from tfr_extensions.ops import lists


@pytest.mark.parametrize("batch", [3, 0])
@pytest.mark.parametrize("index_shape", [(4,), (2, 4)])
def test_batch_gather_equals_tf_gather_and_its_gradient_fits_an_empty_batch(batch, index_shape):
    """TF's own batch_dims=1 gather gives a [0, K] gradient for [0, L] params
    (so the tape's AddN fails on an empty batch); batch_gather gives [0, L]."""
    rng = np.random.default_rng(0)
    params = tf.constant(rng.normal(size=(batch, 5)))
    indices = tf.constant(rng.integers(0, 5, size=(batch,) + index_shape), tf.int32)
    weights = tf.constant(rng.normal(size=(batch,) + index_shape))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(params)
        ours = lists.batch_gather(params, indices)
        total = tf.reduce_sum(weights * ours) + tf.reduce_sum(params)
    np.testing.assert_array_equal(ours.numpy(), tf.gather(params, indices, batch_dims=1).numpy())
    grad = tape.gradient(total, params).numpy()
    assert grad.shape == (batch, 5)
    want = np.ones((batch, 5))
    for b in range(batch):
        np.add.at(want[b], indices.numpy()[b].ravel(), weights.numpy()[b].ravel())
    np.testing.assert_allclose(grad, want, rtol=1e-12)


def test_max_label_is_31():
    assert lists.MAX_LABEL == 31.0
