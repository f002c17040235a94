r"""Per-query feature normalization: the ``keras.ops`` form of
:mod:`tfr_extensions.data.normalization` (the same contract), for the scorers'
:class:`~tfr_extensions.models.QueryZScore` on Keras 3 (TensorFlow, JAX and PyTorch).

.. math::
    z_{qdf} = \frac{x_{qdf} - \mu_{qf}}{\sigma_{qf}},\qquad
    \mu_{qf} = \frac{1}{n_q}\sum_{d} x_{qdf},\qquad
    \sigma_{qf} = \sqrt{\frac{1}{n_q}\sum_{d} (x_{qdf} - \mu_{qf})^2}

over the :math:`n_q` valid documents :math:`d` of list :math:`q` (``features[q, d, f]``
= :math:`x_{qdf}`, ``mask[q, d]`` True; ``ddof=0``), as the papers do (z-score "at a query
level", PT-Ranking's ``StandardScaler``). A feature constant within its list becomes 0,
padded documents stay 0; a valid document with a NaN or infinite feature takes no part in
its list's statistics and comes out NaN in every feature.

>>> z = query_zscore([[[1.0, 5.0], [3.0, 5.0], [9.0, 9.0]]], [[True, True, False]])
>>> ops.convert_to_numpy(z).tolist()
[[[-1.0, 0.0], [1.0, 0.0], [0.0, 0.0]]]
"""
import keras
import numpy as np
from keras import ops

from tfr_extensions.keras_ops import numerics
from tfr_extensions.keras_ops.lists import dtype_name


def query_zscore(features, mask=None):
    r"""Z-scores every feature over the valid documents of each list.

    Numerics: the two-pass variance cannot go negative; "constant" is decided exactly by the
    valid extremes (0, not +-1 from rounding); the square root and the division are masked in
    their arguments (0 with a finite gradient for all-padding lists, constant features).

    Args:
      features: float ``[batch, list_size, num_features]`` (anything at padded documents).
      mask: ``[batch, list_size]``, True (bool) or non-zero (numeric) for valid
        documents; None means all valid.

    Returns:
      ``[batch, list_size, num_features]`` in float32 (float64 for float64 input where the
      backend keeps float64).

    >>> z = query_zscore([[[1.0, 5.0], [3.0, 5.0], [float("nan"), 9.0]]])
    >>> ops.convert_to_numpy(z).tolist()
    [[[-1.0, 0.0], [1.0, 0.0], [nan, nan]]]
    """
    features = ops.convert_to_tensor(features)
    dtype = "float64" if dtype_name(features) == "float64" else "float32"
    features = ops.cast(features, dtype)
    if len(features.shape) != 3:
        raise ValueError("`features` must have shape [batch, list_size, num_features]; got "
                         f"{tuple(features.shape)}.")
    if mask is None:
        present = ops.ones(ops.shape(features)[:2], dtype="bool")
    else:
        present = ops.cast(ops.convert_to_tensor(mask), "bool")
    present = ops.expand_dims(present, -1)  # [B, L, 1]
    finite = ops.all(ops.isfinite(features), axis=-1, keepdims=True)  # [B, L, 1]
    valid = ops.logical_and(present, finite)  # the documents the statistics are over
    zeros, ones = ops.zeros_like(features), ops.ones_like(features)
    count = ops.sum(ops.cast(valid, dtype), axis=1, keepdims=True)  # [B, 1, 1]
    safe_count = ops.where(count > 0, count, ops.ones_like(count))  # all-padding: sums are 0
    mean = ops.sum(ops.where(valid, features, zeros), axis=1, keepdims=True) / safe_count
    centred = ops.where(valid, features - mean, zeros)  # [B, L, F]
    variance = ops.sum(ops.square(centred), axis=1, keepdims=True) / safe_count  # [B, 1, F]
    # "constant", exactly: the largest finite value stands in for +-infinity; one more document
    # at it (and ``initial`` on TensorFlow, for a batch of no list) avoids empty reductions
    largest_finite = float(np.finfo(dtype).max)
    edge = ops.zeros_like(ops.sum(features, axis=1, keepdims=True))  # [B, 1, F]
    identity = {"initial": largest_finite} if keras.backend.backend() == "tensorflow" else {}

    def valid_min(values):  # [B, 1, F]
        return ops.min(ops.concatenate([ops.where(valid, values, largest_finite * ones),
                                        edge + largest_finite], axis=1),
                       axis=1, keepdims=True, **identity)

    largest, smallest = -valid_min(-features), valid_min(features)
    varies = ops.logical_and(largest > smallest, variance > 0)  # [B, 1, F]
    scale = ops.sqrt(ops.where(varies, variance, ops.ones_like(variance)))
    normalized = ops.where(ops.logical_and(valid, varies), centred / scale, zeros)
    nan = numerics.full_like(features, float("nan"))
    return ops.where(ops.logical_and(present, ops.logical_not(finite)), nan, normalized)
