"""Sinkhorn scaling of NeuralNDCG's relaxed permutation matrices in ``keras.ops`` for JAX
(``xp.sinkhorn.sinkhorn_scaling``; PyTorch runs :mod:`tfr_extensions.torch_ops.sinkhorn`,
TensorFlow :func:`tfr_extensions.ops.sinkhorn.sinkhorn_scaling`)."""
from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics
from tfr_extensions.ops.numerics import safe_divide


def sinkhorn_scaling(matrix, row_mask, column_mask, iterations: int, tolerance: float):
    """Sinkhorn scaling of ``[B, L, L]`` matrices (zero outside their valid rows and columns):
    per iteration columns then rows divided by their sums; a list is frozen after the first
    iteration with all its valid row and column sums within ``tolerance`` of 1. Always
    ``iterations`` iterations: JAX cannot differentiate a loop of data-dependent length."""
    tolerance = numerics.constant(tolerance, lists.dtype_name(matrix))

    def scale(m):
        m = safe_divide(m, ops.sum(m, axis=1, keepdims=True))  # columns
        return safe_divide(m, ops.sum(m, axis=2, keepdims=True))  # rows

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
