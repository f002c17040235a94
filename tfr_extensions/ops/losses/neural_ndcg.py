"""The TensorFlow body of :mod:`tfr_extensions.losses.neural_ndcg` (the math, the
public function and the Keras class are there); its ``keras.ops`` twin is
:mod:`tfr_extensions.keras_ops.losses.neural_ndcg`."""
import tensorflow as tf

from tfr_extensions.ops import lists
from tfr_extensions.ops import numerics
from tfr_extensions.ops import rank_metrics
from tfr_extensions.ops import screening
from tfr_extensions.ops.losses.pairwise import clip_scores


def scaled_scores(scores, mask, temperature: float):
    r""":math:`x = s / \tau` of the valid documents, 0 at padding, ``[B, L]``.

    Clipped to +-``dtype.max / 4`` before the division and to :math:`\pm b`,
    :math:`b` = ``dtype.max / (8 n)`` (n: the list's valid documents), after it, so
    that every NeuralSort logit (at most :math:`3(n - 1) b` in magnitude) and every
    difference of two is finite; below the bounds nothing changes.
    """
    count = tf.reduce_sum(tf.cast(mask, scores.dtype), axis=-1, keepdims=True)  # [B, 1]
    bound = scores.dtype.max / 8.0 / tf.maximum(count, 1.0)
    x = tf.clip_by_value(clip_scores(scores) / temperature, -bound, bound)
    return tf.where(mask, x, tf.zeros_like(x))


def neural_sort(scores, mask, temperature: float):
    r"""NeuralSort's relaxed sorting matrix :math:`\hat P` ``[B, L, L]`` (positions x
    documents) and the bool ``[B, L]`` of its valid positions (1..n).

    :math:`\hat P[r, :] = \mathrm{softmax}\big(((n + 1 - 2r)\,s - A_s\mathbb 1)/\tau\big)`
    over the valid documents, :math:`(A_s \mathbb 1)_i = \sum_j |s_i - s_j|`; the rows of
    positions r > n and the columns of padded documents are 0, so the valid block is
    the unpadded list's matrix.
    """
    x = scaled_scores(scores, mask, temperature)
    dtype = x.dtype
    count = tf.reduce_sum(tf.cast(mask, dtype), axis=-1, keepdims=True)  # [B, 1]
    pair_mask = tf.logical_and(mask[:, :, None], mask[:, None, :])
    abs_diffs = tf.abs(x[:, :, None] - x[:, None, :])  # [B, i, j]
    spread = tf.reduce_sum(tf.where(pair_mask, abs_diffs, tf.zeros_like(abs_diffs)), axis=-1)
    positions = tf.range(1, tf.shape(x)[1] + 1)[None, :]  # [1, R]
    valid_positions = tf.cast(positions, dtype) <= count  # [B, R]
    coefficients = count + 1.0 - 2.0 * tf.cast(positions, dtype)  # [B, R]
    logits = coefficients[:, :, None] * x[:, None, :] - spread[:, None, :]  # [B, r, i]
    valid = tf.logical_and(valid_positions[:, :, None], mask[:, None, :])
    # the lowest finite logit: below every valid one (whose magnitude is at most
    # 3/8 of dtype.max), so it takes no share where a row has a valid entry
    floor = tf.fill(tf.shape(logits), tf.constant(-dtype.max, dtype))
    probs = tf.nn.softmax(tf.where(valid, logits, floor), axis=-1)
    return tf.where(valid, probs, tf.zeros_like(probs)), valid_positions


def sinkhorn_scaling(matrix, row_mask, column_mask, iterations: int, tolerance: float):
    """Sinkhorn scaling of ``[B, L, L]`` matrices (zero outside their valid rows and
    columns): each iteration divides every column by its sum, then every row by its
    sum. A list stops (its matrix frozen) after the first iteration at which all its
    valid row and column sums are within ``tolerance`` of 1. Runs ``iterations``
    iterations, unrolled, with a hand-written backward (:func:`_step_gradient`, one
    iteration at a time, last first): fewer ops than differentiating the unrolled
    loop. A ``tf.while_loop`` compiles far sooner under XLA but runs slower there on a
    CPU (``docs/speed.md``, NeuralNDCG).
    """
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
    r"""The gradient with respect to ``m`` of one Sinkhorn iteration, given the
    gradient with respect to its output. With column sums :math:`c_j`, :math:`a =
    m / c` and row sums :math:`q_i` of :math:`a`, the iteration gives :math:`b = a / q`,
    so :math:`\bar a = (\bar b - \sum_k \bar b_{ik} b_{ik}) / q_i` and :math:`\bar m
    = (\bar a - \sum_k \bar a_{kj} a_{kj}) / c_j` (0 where a sum is 0, as the
    forward's division is); a stopped list passes the gradient through."""
    columns = tf.reduce_sum(m, axis=1, keepdims=True)
    a = numerics.safe_divide(m, columns)
    rows = tf.reduce_sum(a, axis=2, keepdims=True)
    b = numerics.safe_divide(a, rows)
    gradient_a = numerics.safe_divide(
        gradient - tf.reduce_sum(gradient * b, axis=2, keepdims=True), rows)
    gradient_m = numerics.safe_divide(
        gradient_a - tf.reduce_sum(gradient_a * a, axis=1, keepdims=True), columns)
    return tf.where(done[:, None, None], gradient, gradient_m)


def neural_ndcg_loss(labels, scores, *, mask=None, temperature=1.0, topn=None,
                     transposed=False, sinkhorn_iterations=50, sinkhorn_tolerance=1e-6):
    """The TensorFlow body of :func:`tfr_extensions.losses.neural_ndcg_loss` (the math,
    the arguments and a doctest are there): inputs screened, options checked."""
    probs, valid_positions = neural_sort(scores, mask, temperature)
    probs = sinkhorn_scaling(probs, valid_positions, mask, sinkhorn_iterations,
                             sinkhorn_tolerance)  # [B, r, i]
    positions = tf.range(1, tf.shape(scores)[1] + 1)[None, :]  # [1, R]
    discounts = lists.log2_discount(tf.cast(positions, scores.dtype))
    if topn is not None:
        discounts = tf.where(positions <= topn, discounts, tf.zeros_like(discounts))
    gains = tf.where(mask, lists.gains(labels), tf.zeros_like(labels))
    if transposed:  # each document's expected discount, times its gain
        expected_discounts = tf.einsum("bri,br->bi", probs, tf.broadcast_to(
            discounts, tf.shape(scores)))
        dcg = tf.reduce_sum(gains * expected_discounts, axis=-1)
    else:  # each position's expected gain, times its discount
        expected_gains = tf.einsum("bri,bi->br", probs, gains)
        dcg = tf.reduce_sum(expected_gains * discounts, axis=-1)
    ndcg = numerics.safe_divide(dcg, rank_metrics.ideal_dcg(labels, mask, topn))
    return -ndcg, tf.cast(screening.has_relevant(labels, mask), scores.dtype)
