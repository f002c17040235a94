r"""NeuralNDCG in ``keras.ops``: the twin of :mod:`tfr_extensions.ops.losses.neural_ndcg`
(the same functions, names and contracts; the math, the Sinkhorn stopping rule, the
padding rule and the numerics are documented in :mod:`tfr_extensions.losses.neural_ndcg`).

The Sinkhorn loop always runs ``sinkhorn_iterations`` iterations (``ops.fori_loop``;
JAX cannot differentiate a loop whose trip count depends on the data), each list's
matrix frozen once it has converged, as the TensorFlow body does (unrolled there).
On PyTorch ``torch.compile`` unrolls that loop into one graph (no graph break; about 80 s
to compile the default 50 iterations on 2 vCPUs).

>>> from keras import ops
>>> losses, _ = neural_ndcg_loss(ops.array([[1., 0.]]), ops.array([[0.6, 0.8]]),
...                              mask=ops.array([[True, True]]))
>>> round(float(ops.convert_to_numpy(losses)[0]), 6)
-0.797073
"""
from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics
from tfr_extensions.keras_ops import rank_metrics
from tfr_extensions.keras_ops import screening
from tfr_extensions.keras_ops.losses.pairwise import clip_scores, dtype_max


def scaled_scores(scores, mask, temperature: float):
    r""":math:`x = s / \tau` of the valid documents, 0 at padding, ``[B, L]``: clipped to
    +-``dtype.max / 4`` before the division and to +-``dtype.max / (8 n)`` after it (n:
    the list's valid documents); the twin of
    :func:`tfr_extensions.ops.losses.neural_ndcg.scaled_scores`."""
    dtype = lists.dtype_name(scores)
    count = ops.sum(ops.cast(mask, dtype), axis=-1, keepdims=True)  # [B, 1]
    bound = numerics.constant(dtype_max(scores) / 8.0, dtype) / numerics.maximum(count, 1.0)
    x = clip_scores(scores) / numerics.constant(temperature, dtype)
    x = numerics.maximum(numerics.minimum(x, bound), -bound)
    return ops.where(mask, x, ops.zeros_like(x))


def neural_sort(scores, mask, temperature: float):
    r"""NeuralSort's :math:`\hat P` ``[B, L, L]`` (positions x documents), 0 outside the
    valid rows (positions 1..n) and columns, and the bool ``[B, L]`` of valid positions;
    the twin of :func:`tfr_extensions.ops.losses.neural_ndcg.neural_sort`."""
    x = scaled_scores(scores, mask, temperature)
    dtype = lists.dtype_name(x)
    count = ops.sum(ops.cast(mask, dtype), axis=-1, keepdims=True)  # [B, 1]
    pair_mask = ops.logical_and(mask[:, :, None], mask[:, None, :])
    abs_diffs = ops.abs(x[:, :, None] - x[:, None, :])  # [B, i, j]
    spread = ops.sum(ops.where(pair_mask, abs_diffs, ops.zeros_like(abs_diffs)), axis=-1)
    positions = ops.arange(1, x.shape[1] + 1, dtype=dtype)[None, :]  # [1, R]
    valid_positions = positions <= count  # [B, R]
    coefficients = count + 1.0 - 2.0 * positions  # [B, R]
    logits = coefficients[:, :, None] * x[:, None, :] - spread[:, None, :]  # [B, r, i]
    valid = ops.logical_and(valid_positions[:, :, None], mask[:, None, :])
    # the lowest finite logit: below every valid one (at most 3/8 of dtype.max in magnitude)
    floor = numerics.full_like(logits, -dtype_max(x))
    # the row softmax, shifted by the row's largest logit (written out: ops.softmax warns
    # on an axis of size 1, a list of one document)
    logits = ops.where(valid, logits, floor)
    shifted = logits - ops.stop_gradient(ops.amax(logits, axis=-1, keepdims=True))
    exps = ops.exp(shifted)
    probs = exps / ops.sum(exps, axis=-1, keepdims=True)  # (the sum is >= 1)
    return ops.where(valid, probs, ops.zeros_like(probs)), valid_positions


def sinkhorn_scaling(matrix, row_mask, column_mask, iterations: int, tolerance: float):
    """Sinkhorn scaling of ``[B, L, L]`` matrices (zero outside their valid rows and
    columns): columns then rows divided by their sums, per iteration; a list's matrix is
    frozen after the first iteration at which all its valid row and column sums are within
    ``tolerance`` of 1. Runs ``iterations`` iterations (``ops.fori_loop``: static for
    ``jax.jit``, differentiable); the twin of
    :func:`tfr_extensions.ops.losses.neural_ndcg.sinkhorn_scaling`."""
    tolerance = numerics.constant(tolerance, lists.dtype_name(matrix))

    def scale(m):
        m = numerics.safe_divide(m, ops.sum(m, axis=1, keepdims=True))  # columns
        return numerics.safe_divide(m, ops.sum(m, axis=2, keepdims=True))  # rows

    def converged(m):  # [B]
        rows_ok = ops.abs(ops.sum(m, axis=2) - 1.0) < tolerance
        columns_ok = ops.abs(ops.sum(m, axis=1) - 1.0) < tolerance
        return ops.logical_and(
            ops.all(ops.logical_or(rows_ok, ops.logical_not(row_mask)), axis=-1),
            ops.all(ops.logical_or(columns_ok, ops.logical_not(column_mask)), axis=-1))

    def body(_, state):
        m, done = state
        m = ops.where(done[:, None, None], m, scale(m))
        return m, ops.logical_or(done, converged(m))

    done = ops.zeros((matrix.shape[0],), dtype="bool")
    matrix, _ = ops.fori_loop(0, iterations, body, (matrix, done))
    return matrix


def neural_ndcg_loss(labels, scores, *, mask=None, temperature=1.0, topn=None,
                     transposed=False, sinkhorn_iterations=50, sinkhorn_tolerance=1e-6):
    r"""NeuralNDCG: :math:`-\frac{1}{IDCG@k}\sum_{r \le k}
    \frac{(\mathrm{sinkhorn}(\hat P) g)_r}{\log_2(1 + r)}` (``transposed``: the same
    bilinear form summed per document, :math:`\sum_i g_i (\hat P^T D)_i`); the keras.ops
    twin of :func:`tfr_extensions.losses.neural_ndcg.neural_ndcg_loss`.

    Returns ``(losses, weights)`` ``[batch]``: minus NeuralNDCG, and 1 for lists with a
    relevant document (0, with loss 0, otherwise).
    """
    dtype = lists.dtype_name(scores)
    weights = ops.cast(screening.has_relevant(labels, mask), dtype)
    if 0 in tuple(scores.shape):  # no list or no document (ops.amax of an empty axis fails)
        return ops.sum(scores, axis=-1) * 0.0, weights
    probs, valid_positions = neural_sort(scores, mask, temperature)
    probs = sinkhorn_scaling(probs, valid_positions, mask, sinkhorn_iterations,
                             sinkhorn_tolerance)  # [B, r, i]
    positions = ops.arange(1, scores.shape[1] + 1, dtype=dtype)[None, :]  # [1, R]
    discounts = lists.log2_discount(positions)
    if topn is not None:
        discounts = ops.where(positions <= topn, discounts, ops.zeros_like(discounts))
    gains = ops.where(mask, lists.gains(labels), ops.zeros_like(labels))
    if transposed:  # each document's expected discount, times its gain
        expected_discounts = ops.sum(probs * discounts[:, :, None], axis=1)  # [B, i]
        dcg = ops.sum(gains * expected_discounts, axis=-1)
    else:  # each position's expected gain, times its discount
        expected_gains = ops.sum(probs * gains[:, None, :], axis=-1)  # [B, r]
        dcg = ops.sum(expected_gains * discounts, axis=-1)
    ndcg = numerics.safe_divide(dcg, rank_metrics.ideal_dcg(labels, mask, topn))
    return -ndcg, weights
