r"""Qin et al.'s smooth ranks in ``keras.ops``: the twin of
:mod:`tfr_extensions.ops.approx_ranks` (the same function, arguments and values;
the math is documented there).

>>> from keras import ops
>>> ops.convert_to_numpy(approx_ranks(ops.array([[0.0, 0.0, 100.0]]))).tolist()
[[2.5, 2.5, 1.0]]
"""
from keras import ops

from tfr_extensions.keras_ops import pairs


def approx_ranks(scores, mask=None, temperature: float = 1.0):
    r"""Smooth ranks, Eq. 5-6: :math:`\hat\pi(i) = 1 + \sum_{j \ne i}
    \sigma((s_j - s_i)/T)` over the valid documents j; ``[B, L]``, 1/2 at padded
    documents; ``mask=None``: all valid. The twin of
    :func:`tfr_extensions.ops.approx_ranks.approx_ranks`."""
    scores = ops.convert_to_tensor(scores)
    mask = ops.ones_like(scores, "bool") if mask is None else mask
    rows = scores[:, :, None]
    weights = ops.cast(mask, scores.dtype)

    def beats(columns, column_weights):  # [B, i, j]: sigma((s_j - s_i)/T) over valid j
        return column_weights * ops.sigmoid((columns - rows) / temperature)

    sums = pairs.row_sums(beats, [scores, weights], [0.0, 0.0])  # (pairs unstored on XLA:CPU)
    return ops.where(mask, sums + 0.5, 0.5)  # sigma(0) = 1/2 on the diagonal: + 1/2
