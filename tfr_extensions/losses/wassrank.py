r"""WassRank: a listwise loss from entropy-regularized optimal transport.

Yu, Jatowt, Joho, Jose, Yang and Chen, "WassRank: Listwise Document Ranking Using Optimal
Transport Theory" (WSDM 2019). Per list, with n valid documents:

* predicted distribution: the softmax of the scores, :math:`a_i = e^{s_i} / \sum_k e^{s_k}`;
* target distribution: the normalized gains :math:`b_j = (2^{y_j} - 1) / \sum_k (2^{y_k} - 1)`
  (``target="gain"``) or the softmax of the labels (``"softmax"``, PT-Ranking's default);
* ground cost :math:`C_{ij}` between documents i and j: from their labels (``cost_type``);
* loss: the Sinkhorn distance :math:`\langle P_\lambda, C\rangle` of the regularized plan
  :math:`P_\lambda = \arg\min_{P \in U(a, b)} \langle P, C\rangle - \lambda H(P)`,
  :math:`H(P) = -\sum_{ij} P_{ij}(\log P_{ij} - 1)`, after ``sinkhorn_iterations`` iterations
  :math:`g_j = \lambda\log b_j - \lambda\,\mathrm{LSE}_i\big((f_i - C_{ij})/\lambda\big)`,
  :math:`f_i = \lambda\log a_i - \lambda\,\mathrm{LSE}_j\big((g_j - C_{ij})/\lambda\big)`,
  :math:`P_{ij} = \exp\big((f_i + g_j - C_{ij})/\lambda\big)`.

Gradient (the paper's, after Frogner et al., NeurIPS 2015): the dual potential :math:`f` is
the gradient of :math:`\mathrm{OT}_\lambda(a, b)` in :math:`a`; through the softmax,
:math:`\partial \ell / \partial s_i = a_i (f_i - \sum_k a_k f_k)`. The iterations run on
``stop_gradient(scores)``; the gradient enters through a term exactly 0 in value.

``epsilon_scaling=True`` (ours; False is the paper's plain algorithm): at :math:`\lambda = 0.1`
and costs up to :math:`10^2` the kernel :math:`e^{-C/\lambda}` is numerically diagonal and
plain iterations from :math:`f = g = 0` move no mass, so the regularization is annealed from
the list's largest cost down to :math:`\lambda` over the first half (Schmitzer, 2019).

Ground costs (``cost_type``), after PT-Ranking (``ltr_adhoc/listwise/wassrank``), with
:math:`G_i = \beta^{y_i} - 1` (:math:`\beta` = ``gain_base``), 0 on the diagonal:

* ``"eg"`` (explicit grouping, the default): :math:`|G'_i - G'_j|` for different labels,
  :math:`G'_i = G_i` if relevant, :math:`-` ``non_rele_gap`` if not; ``var_penalty`` for one label;
* ``"dg"``: :math:`|G_i - G_j|`; ``"ddg"``: :math:`|G_i - G_j|\,|D_i - D_j|` with
  :math:`D_i = 1/\log_2(1 + \rho_i)` at the ideal 1-based position :math:`\rho_i` (ties by index);
* ``"p1"``, ``"p2"``: :math:`|\rho_i - \rho_j|` and its square.

Numerics: log space throughout, with masked arguments and log-softmaxes shifted by their
maximum and floored at -1000, so any finite scores (:math:`\pm 3 \cdot 10^{38}`) stay finite.
Sinkhorn resolves :math:`(f_i + g_j - C_{ij}) / \lambda` to the rounding unit of
:math:`C_{max}/\lambda`: at the defaults float32 is accurate to about 1e-4 relative for labels
up to 7 (3% off at 8), float64 to about 20; beyond, up to :func:`max_label`, values stay
finite but inexact (use float64, a larger ``regularization`` or a smaller ``gain_base``).
"""
import math

from tfr_extensions import arrays
from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import conventions
from tfr_extensions.ops import validation


#: the ground costs between positions (module docstring)
COST_TYPES = ("eg", "dg", "ddg", "p1", "p2")
#: the target distributions over the documents
TARGETS = ("gain", "softmax")


def max_label(options) -> float:
    r"""WassRank's largest valid label: 31 (:data:`~tfr_extensions.ops.conventions.MAX_LABEL`),
    :math:`64 / \log_2\beta` when ``gain_base`` :math:`\beta > 4` (costs below :math:`2^{64}`).

    >>> max_label({"gain_base": 4.0}), max_label({"gain_base": 2.0 ** 16})
    (31.0, 4.0)
    """
    gain_base = options["gain_base"]
    return (conventions.MAX_LABEL if gain_base <= 4.0
            else min(conventions.MAX_LABEL, 64.0 / math.log2(gain_base)))


@base.loss_function(max_label=max_label, examples=[
    # (cost_type "ddg", "p1" and "p2" break label ties by index, so they are not
    # permutation-invariant with tied labels: test_wassrank checks them)
    dict(regularization=0.2, sinkhorn_iterations=7, cost_type="dg", target="softmax",
         gain_base=2.0, non_rele_gap=5.0, var_penalty=0.1, epsilon_scaling=False),
    dict(regularization=0.5, sinkhorn_iterations=7, cost_type="ddg", target="softmax",
         gain_base=2.0, epsilon_scaling=False)])
def wassrank_loss(labels, scores, *, mask=None,
                  regularization: validation.Positive = 0.1,
                  sinkhorn_iterations: validation.Integer(minimum=1) = 20,
                  cost_type: validation.OneOf(COST_TYPES) = "eg",
                  target: validation.OneOf(TARGETS) = "gain", gain_base: validation.Positive = 4.0,
                  non_rele_gap: validation.Number(minimum=0.0) = 100.0,
                  var_penalty: validation.Positive = math.e,
                  epsilon_scaling: validation.Flag = True):
    r"""WassRank's Sinkhorn distance :math:`\ell = \langle P_\lambda, C\rangle` between predicted
    and target distributions (definition, gradient, costs and numerics: module docstring).

    Args:
      regularization: :math:`\lambda`, the entropic regularization, > 0.
      sinkhorn_iterations: number of Sinkhorn iterations, >= 1.
      cost_type: one of :data:`COST_TYPES` (module docstring).
      target: ``"gain"`` (normalized gains) or ``"softmax"`` (of the labels).
      gain_base: :math:`\beta` of the ground cost's gains :math:`\beta^y - 1`.
      non_rele_gap: the gap between relevant and non-relevant documents (``eg``), >= 0.
      var_penalty: the cost between distinct documents of one label (``eg``).
      epsilon_scaling: anneal the regularization (module docstring).

    Returns:
      ``(losses, weights)``, ``[batch]`` each: the transport cost.

    >>> good, _ = wassrank_loss([[0., 1., 2.]], [[-9., 0., 2.]])
    >>> bad, _ = wassrank_loss([[0., 1., 2.]], [[2., 0., -9.]])
    >>> bool(good[0] < bad[0])
    True
    """
    xp = arrays.namespace()
    dtype = xp.dtype_name(scores)
    weights = xp.cast(xp.screening.has_relevant(labels, mask), dtype)
    if 0 in tuple(scores.shape):  # nothing to transport (and ops.max of nothing fails)
        return xp.sum(scores, axis=-1) * 0.0, weights
    cost = cost_matrix(labels, mask, cost_type, gain_base, non_rele_gap, var_penalty)
    if target == "softmax":
        log_b, col_mask = _masked_log_softmax(labels, mask), mask
    else:  # the normalized gains: the softmax of the positive gains' logs
        gains = xp.where(mask, xp.lists.gains(labels), xp.zeros_like(labels))
        col_mask = gains > 0  # where the target is > 0
        log_gains = xp.log(xp.where(col_mask, gains, xp.ones_like(gains)))
        log_b = _masked_log_softmax(log_gains, col_mask)
    row_mask = xp.logical_and(mask, xp.any(col_mask, axis=-1, keepdims=True))  # has a target
    fixed = xp.stop_gradient(scores)  # (the iterations keep no tape)
    log_a = _masked_log_softmax(fixed, row_mask)
    f, g = (xp.stop_gradient(potential) for potential in sinkhorn_potentials(
        log_a, log_b, cost, row_mask, col_mask, regularization, sinkhorn_iterations,
        epsilon_scaling))  # (constants of the backward pass: no gradient through the loop)
    plan = transport_plan(f, g, cost, row_mask, col_mask, regularization)
    value = xp.sum(plan * cost, axis=(1, 2))
    # the paper's gradient a_i (f_i - sum_k a_k f_k), through a term exactly 0 in value
    a = xp.where(row_mask, xp.exp(log_a), xp.zeros_like(log_a))
    centered = f - xp.sum(a * f, axis=-1, keepdims=True)
    grad = xp.stop_gradient(xp.where(row_mask, a * centered, xp.zeros_like(a)))
    return value + xp.sum(grad * (scores - fixed), axis=-1), weights


# log(0) in masked log-sum-exp arguments: finite, and its exp() is exactly 0 beside them
_LOG_ZERO = -1e30
# floor of the softmaxes' log-probabilities: e^-1000 is 0 in float32 and float64, but keeps
# log a, f and every (f - C) / lambda finite at scores up to +-3e38 (s - max s is -inf)
_LOG_PROB_FLOOR = -1000.0


def cost_matrix(labels, mask, cost_type: str = "eg", gain_base: float = 4.0,
                non_rele_gap: float = 100.0, var_penalty: float = math.e):
    """The ground cost ``[B, L, L]`` between the documents of each list (module docstring);
    entries of padded documents are 0."""
    xp = arrays.namespace()
    dtype = xp.dtype_name(labels)
    eye = xp.eye(xp.shape(labels)[1], dtype="bool")[None]
    pair_valid = xp.logical_and(mask[:, :, None], mask[:, None, :])
    gains = xp.power(xp.constant(gain_base, dtype), labels) - 1.0
    if cost_type in ("ddg", "p1", "p2"):  # 1-based ideal positions, ties by index
        positions = xp.cast(xp.sorting.exact_ranks(labels, mask), dtype)
    if cost_type == "eg":
        shifted = xp.where(labels > 0, gains, xp.constant(-non_rele_gap, dtype))
        cost = xp.abs(shifted[:, :, None] - shifted[:, None, :])
        same_label = xp.equal(labels[:, :, None], labels[:, None, :])
        cost = xp.where(same_label, xp.constant(var_penalty, dtype), cost)
    elif cost_type in ("dg", "ddg"):
        cost = xp.abs(gains[:, :, None] - gains[:, None, :])
        if cost_type == "ddg":
            discount = xp.lists.log2_discount(positions)
            cost = cost * xp.abs(discount[:, :, None] - discount[:, None, :])
    else:
        cost = xp.abs(positions[:, :, None] - positions[:, None, :])
        if cost_type == "p2":
            cost = xp.square(cost)
    return xp.where(xp.logical_and(pair_valid, xp.logical_not(eye)), cost, xp.zeros_like(cost))


def _masked_log_softmax(x, mask):
    r"""Log softmax where ``mask`` (0 elsewhere), :math:`\max((x - m) - \log\sum e^{x - m}, -1000)`
    with m the largest masked entry: exact at any magnitude (``x - logsumexp(x)`` loses the
    :math:`\log n` of n tied scores at 1e10 in float32)."""
    xp = arrays.namespace()
    dtype = xp.dtype_name(x)
    top = xp.max(xp.where(mask, x, xp.constant(-float("inf"), dtype)), axis=-1, keepdims=True)
    top = xp.where(xp.isfinite(top), top, xp.zeros_like(top))  # no valid entry
    shifted = xp.where(mask, x - top, xp.constant(_LOG_ZERO, dtype))
    log_probs = shifted - xp.logsumexp(shifted, axis=-1, keepdims=True)
    return xp.where(mask, xp.maximum(log_probs, _LOG_PROB_FLOOR), xp.zeros_like(x))


def sinkhorn_potentials(log_a, log_b, cost, row_mask, col_mask,
                        regularization: float, iterations: int,
                        epsilon_scaling: bool = False):
    r"""Log-space Sinkhorn: dual potentials ``(f, g)``, each ``[B, L]``.

    Rows (``a``) where ``row_mask`` and columns (``b``) where ``col_mask`` take part; other
    potentials are 0. The plan's row sums equal ``a`` after the last ``f`` update. With
    ``epsilon_scaling`` iteration k regularizes by :math:`\lambda_k = \max(\lambda, c_{max} q^k)`,
    from the list's largest cost :math:`c_{max}` to :math:`\lambda` over the first half.
    """
    xp = arrays.namespace()
    dtype = xp.dtype_name(cost)
    lam = xp.constant(regularization, dtype)
    pair_mask = xp.logical_and(row_mask[:, :, None], col_mask[:, None, :])
    log_zero = xp.constant(_LOG_ZERO, dtype)
    start = xp.full((xp.shape(cost)[0], 1, 1), regularization, dtype)  # [B, 1, 1]
    ratio = xp.ones_like(start)
    if epsilon_scaling:
        max_cost = xp.max(xp.where(pair_mask, cost, xp.zeros_like(cost)), axis=(1, 2))
        start = xp.maximum(max_cost, lam)[:, None, None]
        ratio = xp.power(lam / start, xp.constant(1.0 / max(iterations // 2, 1), dtype))

    def body(_, state):
        f, g, k = state  # (k: the iteration, in the scores' dtype)
        eps = xp.maximum(start * xp.power(ratio, k), lam)  # [B, 1, 1]
        arg = xp.where(pair_mask, (f[:, :, None] - cost) / eps, log_zero)
        g = eps[:, 0] * (log_b - xp.logsumexp(arg, axis=1))
        g = xp.where(col_mask, g, xp.zeros_like(g))
        arg = xp.where(pair_mask, (g[:, None, :] - cost) / eps, log_zero)
        f = eps[:, 0] * (log_a - xp.logsumexp(arg, axis=2))
        f = xp.where(row_mask, f, xp.zeros_like(f))
        return f, g, k + 1.0

    zeros = xp.zeros_like(log_a)
    f, g, _ = xp.fori_loop(0, iterations, body, (zeros, zeros, xp.zeros_like(lam)))
    return f, g


def transport_plan(f, g, cost, row_mask, col_mask, regularization: float):
    """:math:`P_{ij} = \\exp((f_i + g_j - C_{ij})/\\lambda)` on the valid pairs, ``[B, L, L]``."""
    xp = arrays.namespace()
    dtype = xp.dtype_name(cost)
    pair_mask = xp.logical_and(row_mask[:, :, None], col_mask[:, None, :])
    arg = (f[:, :, None] + g[:, None, :] - cost) / xp.constant(regularization, dtype)
    return xp.exp(xp.where(pair_mask, arg, xp.constant(_LOG_ZERO, dtype)))


@register
class WassRankLoss(base.RankingLoss):
    r"""Keras loss of :func:`wassrank_loss`: WassRank's Sinkhorn distance.

    :attr:`max_label` is :func:`max_label` of the options.

    >>> loss = WassRankLoss()
    >>> float(loss([[0., 1., 2.]], [[-9., 0., 2.]])) < float(loss([[0., 1., 2.]], [[2., 0., -9.]]))
    True
    """

    function = wassrank_loss

    def __init__(self, regularization=0.1, sinkhorn_iterations=20, cost_type="eg",
                 target="gain", gain_base=4.0, non_rele_gap=100.0, var_penalty=math.e,
                 epsilon_scaling=True, ragged=False, reduction=base.DEFAULT_REDUCTION,
                 name="wassrank"):
        super().__init__(locals())

