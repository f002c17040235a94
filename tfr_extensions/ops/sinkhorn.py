"""Sinkhorn scaling of NeuralNDCG's relaxed permutation matrices in TensorFlow:
``xp.sinkhorn`` of :func:`tfr_extensions.losses.neural_ndcg_loss` (``keras.ops`` form:
:mod:`tfr_extensions.keras_ops.sinkhorn`)."""
import tensorflow as tf

from tfr_extensions.ops import numerics


def sinkhorn_scaling(matrix, row_mask, column_mask, iterations: int, tolerance: float):
    """Sinkhorn scaling of ``[B, L, L]`` matrices (zero outside valid rows and columns): each
    of ``iterations`` unrolled iterations divides every column, then every row by its sum; a
    list freezes once its valid sums are within ``tolerance`` of 1. Hand-written backward
    (:func:`_step_gradient`). Kept per framework by ``python -m benchmarks.loss_throughput
    --cases neural_ndcg`` (``docs/speed.md``)."""
    if not iterations:
        return matrix
    tolerance = tf.constant(tolerance, matrix.dtype)

    def step(m, done):
        """One iteration of the lists not yet stopped, and the new stopped flags [B]."""
        by_columns = numerics.safe_divide(m, tf.reduce_sum(m, axis=1, keepdims=True))
        by_rows = numerics.safe_divide(by_columns,
                                       tf.reduce_sum(by_columns, axis=2, keepdims=True))
        m = tf.where(done[:, None, None], m, by_rows)
        rows_ok = tf.abs(tf.reduce_sum(m, axis=2) - 1.0) < tolerance
        columns_ok = tf.abs(tf.reduce_sum(m, axis=1) - 1.0) < tolerance
        converged = tf.logical_and(
            tf.reduce_all(tf.logical_or(rows_ok, tf.logical_not(row_mask)), axis=-1),
            tf.reduce_all(tf.logical_or(columns_ok, tf.logical_not(column_mask)), axis=-1))
        return m, tf.logical_or(done, converged)

    @tf.custom_gradient
    def scaled(m):
        inputs, flags = [], []
        done = tf.zeros(tf.shape(m)[:1], tf.bool)
        for _ in range(iterations):
            inputs.append(m)
            flags.append(done)
            m, done = step(m, done)

        def grad(upstream):  # each iteration's vector-Jacobian product, last first
            for m_in, done_in in zip(reversed(inputs), reversed(flags)):
                upstream = _step_gradient(m_in, done_in, upstream)
            return upstream

        return m, grad

    return scaled(matrix)


def _step_gradient(m, done, gradient):
    r"""The vector-Jacobian product of one iteration: with column sums :math:`c_j`,
    :math:`a = m / c`, row sums :math:`q_i` of a and :math:`b = a / q`,
    :math:`\bar a = (\bar b - \sum_k \bar b_{ik} b_{ik}) / q_i`,
    :math:`\bar m = (\bar a - \sum_k \bar a_{kj} a_{kj}) / c_j` (0 where a sum is 0); a stopped
    list passes it through."""
    columns = tf.reduce_sum(m, axis=1, keepdims=True)
    a = numerics.safe_divide(m, columns)
    rows = tf.reduce_sum(a, axis=2, keepdims=True)
    b = numerics.safe_divide(a, rows)
    gradient_a = numerics.safe_divide(
        gradient - tf.reduce_sum(gradient * b, axis=2, keepdims=True), rows)
    gradient_m = numerics.safe_divide(
        gradient_a - tf.reduce_sum(gradient_a * a, axis=1, keepdims=True), columns)
    return tf.where(done[:, None, None], gradient, gradient_m)
