r"""WassRank, a listwise loss from entropy-regularized optimal transport: the
``keras.ops`` twin of :mod:`tfr_extensions.losses.wassrank` (the same body,
the same options, the same numerics).

Yu, Jatowt, Joho, Jose, Yang and Chen, "WassRank: Listwise Document Ranking
Using Optimal Transport Theory" (WSDM 2019). Per list: the predicted
distribution :math:`a = \mathrm{softmax}(s)`, the target :math:`b_j = (2^{y_j}
- 1) / \sum_k (2^{y_k} - 1)` (``target="gain"``) or the softmax of the labels
(``"softmax"``), the ground cost :math:`C_{ij}` from the labels
(``cost_type``, :func:`cost_matrix`), and the loss is the Sinkhorn distance
:math:`\langle P_\lambda, C\rangle` of the entropy-regularized plan, from
``sinkhorn_iterations`` log-space Sinkhorn iterations

.. math:: g_j = \lambda\log b_j - \lambda\,\mathrm{LSE}_i\big((f_i - C_{ij})/\lambda\big),\quad
          f_i = \lambda\log a_i - \lambda\,\mathrm{LSE}_j\big((g_j - C_{ij})/\lambda\big),\quad
          P_{ij} = e^{(f_i + g_j - C_{ij})/\lambda}.

Gradient (the paper's, after Frogner et al. 2015): the dual potential f as
the gradient with respect to a, through the softmax :math:`\partial\ell/\partial
s_i = a_i (f_i - \sum_k a_k f_k)`. The TF body uses ``tf.custom_gradient``;
here the iterations run on ``stop_gradient(scores)`` and the gradient enters
as :math:`\sum_i \bar g_i (s_i - \bar s_i)` (bars: no gradient), exactly 0 in
value: no tape of the iterations either way.

``epsilon_scaling=True`` anneals the regularization geometrically from the
list's largest cost down to :math:`\lambda` over the first half of the
iterations (see the TF module for why).
"""
import math

from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics
from tfr_extensions.keras_ops import screening


# Stand-in for log(0) in masked log-sum-exp arguments.
_LOG_ZERO = -1e30

# Floor of the log-probabilities of the softmaxes (e^-1000 is 0).
_LOG_PROB_FLOOR = -1000.0


def _ideal_positions(labels, mask):
    """1-based positions of the documents sorted by descending label, ties by
    the lower index, padded documents last (in index order): what
    ``tfr_extensions.ops.sorting.exact_ranks(labels, mask)`` gives, by counting
    (``[B, L, L]`` comparisons, the size of the cost matrix)."""
    size = labels.shape[1]
    index = ops.arange(size)
    before = (index[None, :] < index[:, None])[None]  # [1, i, j]: j before i
    valid_i, valid_j = mask[:, :, None], mask[:, None, :]
    greater = labels[:, None, :] > labels[:, :, None]
    tied_before = ops.logical_and(labels[:, None, :] == labels[:, :, None], before)
    ahead_of_valid = ops.logical_and(valid_j, ops.logical_or(greater, tied_before))
    ahead_of_padded = ops.logical_or(valid_j, ops.logical_and(ops.logical_not(valid_j), before))
    ahead = ops.where(valid_i, ahead_of_valid, ahead_of_padded)
    return 1 + ops.sum(ops.cast(ahead, "int32"), axis=-1)


def cost_matrix(labels, mask, cost_type: str = "eg", gain_base: float = 4.0,
                non_rele_gap: float = 100.0, var_penalty: float = math.e):
    """The ground cost ``[B, L, L]`` between the documents of each list (see
    :mod:`tfr_extensions.losses.wassrank`); entries of padded documents are 0."""
    dtype = lists.dtype_name(labels)
    size = labels.shape[1]
    index = ops.arange(size)
    eye = (index[:, None] == index[None, :])[None]
    pair_valid = ops.logical_and(mask[:, :, None], mask[:, None, :])
    gains = ops.power(numerics.constant(gain_base, dtype), labels) - 1.0
    if cost_type in ("ddg", "p1", "p2"):
        positions = ops.cast(_ideal_positions(labels, mask), dtype)
    if cost_type == "eg":
        shifted = ops.where(labels > 0, gains, numerics.constant(-non_rele_gap, dtype))
        cost = ops.abs(shifted[:, :, None] - shifted[:, None, :])
        same_label = labels[:, :, None] == labels[:, None, :]
        cost = ops.where(same_label, numerics.constant(var_penalty, dtype), cost)
    elif cost_type in ("dg", "ddg"):
        cost = ops.abs(gains[:, :, None] - gains[:, None, :])
        if cost_type == "ddg":
            discount = lists.log2_discount(positions)
            cost = cost * ops.abs(discount[:, :, None] - discount[:, None, :])
    else:
        cost = ops.abs(positions[:, :, None] - positions[:, None, :])
        if cost_type == "p2":
            cost = ops.square(cost)
    cost = ops.where(eye, ops.zeros_like(cost), cost)
    return ops.where(pair_valid, cost, ops.zeros_like(cost))


def _masked_log_softmax(x, mask):
    r"""log softmax over the entries where ``mask``, floored at -1000; 0
    elsewhere; shifted by the largest masked entry first (full precision at
    any magnitude)."""
    dtype = lists.dtype_name(x)
    top = ops.max(ops.where(mask, x, numerics.constant(-float("inf"), dtype)), axis=-1,
                  keepdims=True)
    top = ops.where(ops.isfinite(top), top, ops.zeros_like(top))  # no valid entry
    shifted = ops.where(mask, x - top, numerics.constant(_LOG_ZERO, dtype))
    log_probs = shifted - ops.logsumexp(shifted, axis=-1, keepdims=True)
    return ops.where(mask, numerics.maximum(log_probs, _LOG_PROB_FLOOR), ops.zeros_like(x))


def sinkhorn_potentials(log_a, log_b, cost, row_mask, col_mask, regularization: float,
                        iterations: int, epsilon_scaling: bool = False):
    r"""Log-space Sinkhorn: dual potentials ``(f, g)``, each ``[B, L]``.

    Rows where ``row_mask`` and columns where ``col_mask`` take part; the
    other potentials are 0. With ``epsilon_scaling`` the regularization of
    iteration k is :math:`\lambda_k = \max(\lambda, c_{max} q^{k})`, from the
    list's largest cost down to :math:`\lambda` over the first half of the
    iterations. (No gradient is taken through the iterations.)
    """
    dtype = lists.dtype_name(cost)
    lam = numerics.constant(regularization, dtype)
    pair_mask = ops.logical_and(row_mask[:, :, None], col_mask[:, None, :])
    log_zero = numerics.constant(_LOG_ZERO, dtype)
    start = numerics.full((ops.shape(cost)[0], 1, 1), regularization, dtype)  # [B, 1, 1]
    ratio = ops.ones_like(start)
    if epsilon_scaling:
        max_cost = ops.max(ops.where(pair_mask, cost, ops.zeros_like(cost)), axis=[1, 2])
        start = numerics.maximum(max_cost, lam)[:, None, None]
        ratio = ops.power(lam / start, numerics.constant(1.0 / max(iterations // 2, 1), dtype))

    def body(k, state):
        f, g = state
        eps = numerics.maximum(start * ops.power(ratio, numerics.constant(k, dtype)),
                               lam)  # [B, 1, 1]
        arg = ops.where(pair_mask, (f[:, :, None] - cost) / eps, log_zero)
        g = eps[:, 0] * (log_b - ops.logsumexp(arg, axis=1))
        g = ops.where(col_mask, g, ops.zeros_like(g))
        arg = ops.where(pair_mask, (g[:, None, :] - cost) / eps, log_zero)
        f = eps[:, 0] * (log_a - ops.logsumexp(arg, axis=2))
        f = ops.where(row_mask, f, ops.zeros_like(f))
        return f, g

    zeros = ops.zeros_like(log_a)
    return ops.fori_loop(0, iterations, body, (zeros, zeros))


def transport_plan(f, g, cost, row_mask, col_mask, regularization: float):
    """:math:`P_{ij} = \\exp((f_i + g_j - C_{ij})/\\lambda)` on the valid pairs, ``[B, L, L]``."""
    dtype = lists.dtype_name(cost)
    pair_mask = ops.logical_and(row_mask[:, :, None], col_mask[:, None, :])
    arg = (f[:, :, None] + g[:, None, :] - cost) / numerics.constant(regularization, dtype)
    return ops.exp(ops.where(pair_mask, arg, numerics.constant(_LOG_ZERO, dtype)))


def target_log_distribution(labels, mask, target: str):
    """``(log_b, col_mask)``: the log target distribution and where it is > 0."""
    if target == "softmax":
        return _masked_log_softmax(labels, mask), mask
    gains = ops.where(mask, lists.gains(labels), ops.zeros_like(labels))
    positive = gains > 0
    log_gains = ops.log(ops.where(positive, gains, ops.ones_like(gains)))
    return _masked_log_softmax(log_gains, positive), positive


def wassrank_loss(labels, scores, *, mask=None, regularization=0.1, sinkhorn_iterations=20,
                  cost_type="eg", target="gain", gain_base=4.0, non_rele_gap=100.0,
                  var_penalty=math.e, epsilon_scaling=True):
    r"""WassRank's Sinkhorn distance between predicted and target distributions:
    the twin of :func:`tfr_extensions.losses.wassrank.wassrank_loss`.

    Returns:
      ``(losses, weights)``, ``[batch]`` each: the transport cost
      :math:`\langle P_\lambda, C\rangle` (gradient :math:`a_i(f_i - \sum_k
      a_k f_k)`), and 1 for lists with a relevant document (0 otherwise).
    """
    dtype = lists.dtype_name(scores)
    weights = ops.cast(screening.has_relevant(labels, mask), dtype)
    if 0 in tuple(scores.shape):  # no list or no document: nothing to transport (and
        # Keras's ops.max of an empty tensor fails on PyTorch and JAX)
        return ops.sum(scores, axis=-1) * 0.0, weights
    cost = cost_matrix(labels, mask, cost_type, gain_base, non_rele_gap, var_penalty)
    log_b, col_mask = target_log_distribution(labels, mask, target)
    has_target = ops.any(col_mask, axis=-1, keepdims=True)
    row_mask = ops.logical_and(mask, has_target)

    fixed = ops.stop_gradient(scores)  # (the iterations keep no tape)
    log_a = _masked_log_softmax(fixed, row_mask)
    f, g = sinkhorn_potentials(log_a, log_b, cost, row_mask, col_mask, regularization,
                               sinkhorn_iterations, epsilon_scaling)
    plan = transport_plan(f, g, cost, row_mask, col_mask, regularization)
    value = ops.sum(plan * cost, axis=[1, 2])
    # The paper's gradient, entering through a term that is exactly 0 in value.
    a = ops.where(row_mask, ops.exp(log_a), ops.zeros_like(log_a))
    centered = f - ops.sum(a * f, axis=-1, keepdims=True)
    grad = ops.stop_gradient(ops.where(row_mask, a * centered, ops.zeros_like(a)))
    value = value + ops.sum(grad * (scores - fixed), axis=-1)
    return value, weights
