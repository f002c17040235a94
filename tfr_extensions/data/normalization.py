r"""Per-query feature normalization: one formula shared by datasets and models.

The papers' protocol (policy-gradient-ranking-diagnostic, Sec. 5: "the raw
features per query-document pair ... were normalized using the z-score method at
a query level"; PT-Ranking does it with scikit-learn's ``StandardScaler``):

.. math::
    z_{qdf} = \frac{x_{qdf} - \mu_{qf}}{\sigma_{qf}},\qquad
    \mu_{qf} = \frac{1}{n_q}\sum_{d} x_{qdf},\qquad
    \sigma_{qf} = \sqrt{\frac{1}{n_q}\sum_{d} (x_{qdf} - \mu_{qf})^2}

over the ``n_q`` valid documents ``d`` of list ``q`` (population standard
deviation, ``ddof=0``). A feature that is constant within a list becomes 0
(StandardScaler's convention), and padded documents stay 0.

Non-finite features (served data; training data is checked when it is read or
batched): a valid document with a NaN or infinite feature takes no part in its
list's statistics and gets NaN in every feature, so a model scores it NaN while
every other document of the list gets exactly what it would get without it.
"""
import tensorflow as tf


def query_zscore(features, mask=None) -> tf.Tensor:
    r"""Z-scores every feature over the valid documents of each list.

    Numerics: the two-pass variance (centre first, then square) cannot go
    negative; "constant within the list" is decided exactly from the valid
    minimum and maximum, not from a rounded standard deviation, so a constant
    feature gives exactly 0 rather than +-1 from rounding noise. The division is
    masked in its argument (the denominator is 1 where the result is not used),
    so all-padding lists and constant features give 0 with zero gradient. A
    valid document with a non-finite feature is left out of its list's
    statistics and comes out as NaN in every feature (see the module docstring).

    Args:
      features: float ``[batch, list_size, num_features]``.
      mask: bool ``[batch, list_size]``, True for valid documents; None means
        all valid.

    Returns:
      ``[batch, list_size, num_features]`` in float32 (float64 for float64
      input; half-precision input is normalized in float32).

    >>> features = tf.constant([[[1.0, 5.0], [3.0, 5.0], [9.0, 9.0]]])
    >>> query_zscore(features, tf.constant([[True, True, False]])).numpy().tolist()
    [[[-1.0, 0.0], [1.0, 0.0], [0.0, 0.0]]]
    >>> query_zscore([[[1.0, 5.0], [3.0, 5.0], [float("nan"), 9.0]]]).numpy().tolist()
    [[[-1.0, 0.0], [1.0, 0.0], [nan, nan]]]
    """
    features = tf.convert_to_tensor(features)
    dtype = tf.float64 if features.dtype == tf.float64 else tf.float32
    features = tf.cast(features, dtype)
    if features.shape.rank is not None and features.shape.rank != 3:
        raise ValueError(
            f"`features` must have shape [batch, list_size, num_features]; got {features.shape}.")
    if mask is None:
        mask = tf.ones(tf.shape(features)[:2], tf.bool)
    present = tf.cast(mask, tf.bool)[..., tf.newaxis]  # [B, L, 1]
    finite = tf.reduce_all(tf.math.is_finite(features), axis=-1, keepdims=True)
    valid = tf.logical_and(present, finite)  # the documents the statistics are over
    weights = tf.cast(valid, dtype)
    count = tf.reduce_sum(weights, axis=1, keepdims=True)  # [B, 1, 1]
    safe_count = tf.maximum(count, 1.0)  # all-padding lists: sums are 0 anyway
    zeros = tf.zeros_like(features)
    masked = tf.where(valid, features, zeros)
    mean = tf.reduce_sum(masked, axis=1, keepdims=True) / safe_count  # [B, 1, F]
    centred = tf.where(valid, features - mean, zeros)
    std = tf.sqrt(tf.reduce_sum(tf.square(centred), axis=1, keepdims=True) / safe_count)
    # Exact test of "constant over the valid documents" (dtype.max is a finite
    # stand-in for +-infinity that padded entries never win).
    largest = tf.reduce_max(tf.where(valid, features, tf.fill(tf.shape(features), dtype.min)),
                            axis=1, keepdims=True)
    smallest = tf.reduce_min(tf.where(valid, features, tf.fill(tf.shape(features), dtype.max)),
                             axis=1, keepdims=True)
    varies = tf.logical_and(largest > smallest, std > 0)  # [B, 1, F]
    scale = tf.where(varies, std, tf.ones_like(std))
    normalized = tf.where(tf.logical_and(valid, varies), centred / scale, zeros)
    return tf.where(tf.logical_and(present, tf.logical_not(finite)),
                    tf.constant(float("nan"), dtype), normalized)
