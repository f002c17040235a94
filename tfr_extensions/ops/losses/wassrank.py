"""The TensorFlow bodies of :mod:`tfr_extensions.losses.wassrank` (the math, the
public functions and the Keras classes are there); their ``keras.ops`` twins are
:mod:`tfr_extensions.keras_ops.losses.wassrank`."""
import math

import tensorflow as tf

from tfr_extensions.ops import lists
from tfr_extensions.ops import screening
from tfr_extensions.ops import sorting


# Stand-in for log(0) in masked log-sum-exp arguments: finite, and so far below
# any real argument that exp() of it is exactly 0 relative to them.
_LOG_ZERO = -1e30


def cost_matrix(labels, mask, cost_type: str = "eg", gain_base: float = 4.0,
                non_rele_gap: float = 100.0, var_penalty: float = math.e) -> tf.Tensor:
    """The ground cost ``[B, L, L]`` between the documents of each list
    (see the module docstring); entries of padded documents are 0."""
    dtype = labels.dtype
    size = tf.shape(labels)[1]
    eye = tf.eye(size, dtype=tf.bool)[None]
    pair_valid = tf.logical_and(mask[:, :, None], mask[:, None, :])
    gains = tf.pow(tf.constant(gain_base, dtype), labels) - 1.0
    if cost_type in ("ddg", "p1", "p2"):
        positions = tf.cast(sorting.exact_ranks(labels, mask), dtype)
    if cost_type == "eg":
        shifted = tf.where(labels > 0, gains, tf.fill(tf.shape(gains), -tf.constant(non_rele_gap, dtype)))
        cost = tf.abs(shifted[:, :, None] - shifted[:, None, :])
        same_label = tf.equal(labels[:, :, None], labels[:, None, :])
        cost = tf.where(same_label, tf.constant(var_penalty, dtype), cost)
    elif cost_type in ("dg", "ddg"):
        cost = tf.abs(gains[:, :, None] - gains[:, None, :])
        if cost_type == "ddg":
            discount = lists.log2_discount(positions)
            cost *= tf.abs(discount[:, :, None] - discount[:, None, :])
    else:
        cost = tf.abs(positions[:, :, None] - positions[:, None, :])
        if cost_type == "p2":
            cost = tf.square(cost)
    cost = tf.where(eye, tf.zeros_like(cost), cost)
    return tf.where(pair_valid, cost, tf.zeros_like(cost))


# Floor of the log-probabilities of the softmaxes: e^-1000 is 0 in float32 and
# float64 alike, so the floor changes no probability, but it keeps log a, the
# potentials f and every (f - C) / lambda finite when scores spread by more
# than 1000 (up to +-3e38, where s - max s would be -inf).
_LOG_PROB_FLOOR = -1000.0


def _masked_log_softmax(x, mask):
    r"""log softmax over the entries where ``mask``, floored at
    ``_LOG_PROB_FLOOR``; 0 elsewhere.

    The entries are shifted by the largest masked one, m, before the
    log-sum-exp: :math:`\max((x - m) - \log\sum e^{x - m}, -1000)`, which keeps
    full precision at any magnitude (``x - reduce_logsumexp(x)`` loses the
    :math:`\log n` of n tied scores next to 1e10 in float32, giving each of
    them probability 1).
    """
    top = tf.reduce_max(tf.where(mask, x, tf.constant(-float("inf"), x.dtype)), axis=-1,
                        keepdims=True)
    top = tf.where(tf.math.is_finite(top), top, tf.zeros_like(top))  # no valid entry
    shifted = tf.where(mask, x - top, tf.fill(tf.shape(x), tf.constant(_LOG_ZERO, x.dtype)))
    log_probs = shifted - tf.reduce_logsumexp(shifted, axis=-1, keepdims=True)
    return tf.where(mask, tf.maximum(log_probs, _LOG_PROB_FLOOR), tf.zeros_like(x))


def sinkhorn_potentials(log_a, log_b, cost, row_mask, col_mask,
                        regularization: float, iterations: int,
                        epsilon_scaling: bool = False):
    r"""Log-space Sinkhorn: dual potentials ``(f, g)``, each ``[B, L]``.

    Rows (source, ``a``) where ``row_mask`` and columns (target, ``b``) where
    ``col_mask`` take part; the other potentials are 0. After the last
    ``f`` update the plan's row sums equal ``a`` exactly. With
    ``epsilon_scaling`` the regularization of iteration k is
    :math:`\lambda_k = \max(\lambda, c_{max} q^{k})`, decreasing
    geometrically from the list's largest cost :math:`c_{max}` to
    :math:`\lambda` over the first half of the iterations (then constant).
    """
    dtype = cost.dtype
    lam = tf.constant(regularization, dtype)
    pair_mask = tf.logical_and(row_mask[:, :, None], col_mask[:, None, :])
    log_zero = tf.constant(_LOG_ZERO, dtype)
    start = tf.fill([tf.shape(cost)[0], 1, 1], lam)  # [B, 1, 1]
    ratio = tf.ones_like(start)
    if epsilon_scaling:
        max_cost = tf.reduce_max(tf.where(pair_mask, cost, tf.zeros_like(cost)), axis=[1, 2])
        start = tf.maximum(max_cost, lam)[:, None, None]
        ratio = (lam / start) ** (1.0 / max(iterations // 2, 1))

    def body(k, f, g):
        eps = tf.maximum(lam, start * ratio ** tf.cast(k, dtype))  # [B, 1, 1]
        arg = tf.where(pair_mask, (f[:, :, None] - cost) / eps, log_zero)
        g = eps[:, 0] * (log_b - tf.reduce_logsumexp(arg, axis=1))
        g = tf.where(col_mask, g, tf.zeros_like(g))
        arg = tf.where(pair_mask, (g[:, None, :] - cost) / eps, log_zero)
        f = eps[:, 0] * (log_a - tf.reduce_logsumexp(arg, axis=2))
        f = tf.where(row_mask, f, tf.zeros_like(f))
        return k + 1, f, g

    zeros = tf.zeros_like(log_a)
    _, f, g = tf.while_loop(lambda k, f, g: True, body, (tf.constant(0), zeros, zeros),
                            maximum_iterations=iterations)
    return f, g


def transport_plan(f, g, cost, row_mask, col_mask, regularization: float) -> tf.Tensor:
    """:math:`P_{ij} = \\exp((f_i + g_j - C_{ij})/\\lambda)` on the valid pairs, ``[B, L, L]``."""
    pair_mask = tf.logical_and(row_mask[:, :, None], col_mask[:, None, :])
    arg = (f[:, :, None] + g[:, None, :] - cost) / tf.constant(regularization, cost.dtype)
    return tf.exp(tf.where(pair_mask, arg, tf.fill(tf.shape(arg), tf.constant(_LOG_ZERO, arg.dtype))))


def target_log_distribution(labels, mask, target: str):
    """``(log_b, col_mask)``: the log target distribution and where it is > 0."""
    if target == "softmax":
        return _masked_log_softmax(labels, mask), mask
    gains = tf.where(mask, lists.gains(labels), tf.zeros_like(labels))
    positive = gains > 0
    log_gains = tf.math.log(tf.where(positive, gains, tf.ones_like(gains)))
    return _masked_log_softmax(log_gains, positive), positive


def wassrank_loss(labels, scores, *, mask=None, regularization=0.1, sinkhorn_iterations=20,
                  cost_type="eg", target="gain", gain_base=4.0, non_rele_gap=100.0,
                  var_penalty=math.e, epsilon_scaling=True):
    """The TensorFlow body of :func:`tfr_extensions.losses.wassrank_loss` (the math,
    the arguments and a doctest are there): inputs screened, options checked."""
    cost = cost_matrix(labels, mask, cost_type, gain_base, non_rele_gap, var_penalty)
    log_b, col_mask = target_log_distribution(labels, mask, target)
    has_target = tf.reduce_any(col_mask, axis=-1, keepdims=True)
    row_mask = tf.logical_and(mask, has_target)

    @tf.custom_gradient
    def distance(s):
        log_a = _masked_log_softmax(s, row_mask)
        f, g = sinkhorn_potentials(log_a, log_b, cost, row_mask, col_mask,
                                   regularization, sinkhorn_iterations, epsilon_scaling)
        plan = transport_plan(f, g, cost, row_mask, col_mask, regularization)
        value = tf.reduce_sum(plan * cost, axis=[1, 2])

        def grad(upstream):
            a = tf.where(row_mask, tf.exp(log_a), tf.zeros_like(log_a))
            centered = f - tf.reduce_sum(a * f, axis=-1, keepdims=True)
            return upstream[:, None] * tf.where(row_mask, a * centered, tf.zeros_like(a))

        return value, grad

    return distance(scores), tf.cast(screening.has_relevant(labels, mask), scores.dtype)


