r"""WassRank: a listwise loss from entropy-regularized optimal transport.

Yu, Jatowt, Joho, Jose, Yang and Chen, "WassRank: Listwise Document Ranking
Using Optimal Transport Theory" (WSDM 2019), the baseline of the twin-sigmoid
and policy-gradient papers. Per list, with n valid documents:

* the predicted distribution is the softmax of the scores,
  :math:`a_i = e^{s_i} / \sum_k e^{s_k}`;
* the target distribution is the normalized gains
  :math:`b_j = (2^{y_j} - 1) / \sum_k (2^{y_k} - 1)` (``target="gain"``) or the
  softmax of the labels (``target="softmax"``, PT-Ranking's default);
* the ground cost :math:`C_{ij}` between documents i and j comes from their
  labels (``cost_type``, below);
* the loss is the Sinkhorn distance :math:`\langle P_\lambda, C\rangle` of the
  entropy-regularized transport plan
  :math:`P_\lambda = \arg\min_{P \in U(a, b)} \langle P, C\rangle - \lambda H(P)`,
  :math:`H(P) = -\sum_{ij} P_{ij}(\log P_{ij} - 1)`, obtained by
  ``sinkhorn_iterations`` Sinkhorn iterations in log space:
  :math:`g_j = \lambda\log b_j - \lambda\,\mathrm{LSE}_i\big((f_i - C_{ij})/\lambda\big)`,
  :math:`f_i = \lambda\log a_i - \lambda\,\mathrm{LSE}_j\big((g_j - C_{ij})/\lambda\big)`,
  :math:`P_{ij} = \exp\big((f_i + g_j - C_{ij})/\lambda\big)`.

Gradient (as in the paper, after Frogner et al., "Learning with a Wasserstein
Loss", NeurIPS 2015): the dual potential :math:`f` is taken as the gradient
with respect to :math:`a`, which is the exact gradient of the regularized
objective :math:`\mathrm{OT}_\lambda(a, b) = \langle P_\lambda, C\rangle - \lambda
H(P_\lambda)` at convergence; through the softmax,
:math:`\partial \ell / \partial s_i = a_i (f_i - \sum_k a_k f_k)`. It is a
custom gradient: no [B, L, L] tensor is kept per iteration.

Convergence (our addition, ``epsilon_scaling=True``): with the paper's
:math:`\lambda = 0.1` and costs up to :math:`10^2`, the kernel
:math:`e^{-C/\lambda}` is numerically diagonal, so 20 plain Sinkhorn
iterations from :math:`f = g = 0` move no mass: with ``target="softmax"``
the plan stays :math:`\mathrm{diag}(a)`, the value is about 0 whatever the
scores, and the dual gradient reduces to :math:`\lambda\nabla_a \mathrm{KL}(a \| b)`.
Epsilon scaling (Schmitzer, "Stabilized sparse scaling algorithms for entropy
regularized transport problems", 2019) anneals the regularization from the
largest cost of the list down to :math:`\lambda` over the first half of the
iterations, which brings the plan close to the optimum in the same number of
iterations. ``epsilon_scaling=False`` is the plain algorithm of the paper and
of PT-Ranking.

Ground costs (``cost_type``), after PT-Ranking's implementation
(``wildltr/ptranking``, ``ltr_adhoc/listwise/wassrank``), with
:math:`G_i = \beta^{y_i} - 1` (:math:`\beta` = ``gain_base``):

* ``"eg"`` (explicit grouping, the default): :math:`C_{ij} = |G'_i - G'_j|` for
  different labels, with :math:`G'_i = G_i` for relevant documents and
  :math:`-` ``non_rele_gap`` for non-relevant ones; ``var_penalty`` between
  distinct documents of one label; 0 on the diagonal;
* ``"dg"``: :math:`|G_i - G_j|`; ``"ddg"``: :math:`|G_i - G_j|\,|D_i - D_j|`
  with :math:`D_i = 1/\log_2(1 + \rho_i)` at the ideal 1-based position
  :math:`\rho_i` (labels sorted, ties by index);
* ``"p1"``, ``"p2"``: :math:`|\rho_i - \rho_j|` and its square.

Numerics: everything is in log space (log-softmax, log-sum-exp), so scores of
any finite magnitude (:math:`\pm 10^{30}`, :math:`\pm 3 \cdot 10^{38}` in
float32) and costs of :math:`10^2 / \lambda` are finite; the log-softmax is
shifted by the largest score and floored at -1000 (:math:`e^{-1000} = 0`), so
tied scores of :math:`10^{10}` still share their mass exactly; documents
with zero target mass (non-relevant ones under ``target="gain"``) and padded
documents are excluded from the log-sum-exps by masking their arguments.

Large labels: the costs grow as :math:`\beta^y`, and the Sinkhorn iterations
resolve :math:`(f_i + g_j - C_{ij}) / \lambda` only to the rounding unit of
:math:`C_{max}/\lambda`. With the defaults (:math:`\beta = 4`, :math:`\lambda =
0.1`) float32 is accurate to about 1e-4 relative for labels up to 7 (3% off
at 8, 20% at 10); float64 to label 20 or so. Up to the maximum label
(:func:`max_label`: 31, lower for :math:`\beta > 4`) values and gradients stay finite, but past
those labels they are not the entropic transport distance: use float64 scores,
a larger ``regularization`` or a smaller ``gain_base`` there.
"""
import math

import tensorflow as tf

from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import lists
from tfr_extensions.ops import sorting
from tfr_extensions.ops import validation

COST_TYPES = ("eg", "dg", "ddg", "p1", "p2")
TARGETS = ("gain", "softmax")

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


def max_label(options) -> float:
    r"""The largest valid label of WassRank with these options: 31
    (:data:`~tfr_extensions.ops.lists.MAX_LABEL`), lower when ``gain_base``
    :math:`\beta > 4`: :math:`64 / \log_2\beta`, so that the costs stay below
    :math:`2^{64}` (and their ratios to :math:`\lambda` finite)."""
    gain_base = options["gain_base"]
    if gain_base <= 4.0:
        return lists.MAX_LABEL
    return min(lists.MAX_LABEL, 64.0 / math.log2(gain_base))


def wassrank_loss(labels, scores, *, mask=None, regularization=0.1, sinkhorn_iterations=20,
                  cost_type="eg", target="gain", gain_base=4.0, non_rele_gap=100.0,
                  var_penalty=math.e, epsilon_scaling=True):
    r"""WassRank's Sinkhorn distance between predicted and target distributions.

    See the module docstring for the definition, the gradient (the paper's
    dual potential, a custom gradient), the ground costs and the numerics.

    Args:
      labels: float ``[batch, list_size]``, graded relevance; < 0 = padding.
      scores: float ``[batch, list_size]``.
      mask: optional bool ``[batch, list_size]``, True = valid.
      regularization: :math:`\lambda`, the entropic regularization, > 0.
      sinkhorn_iterations: number of Sinkhorn iterations, >= 1.
      cost_type: ``"eg"``, ``"dg"``, ``"ddg"``, ``"p1"`` or ``"p2"``.
      target: ``"gain"`` (normalized gains) or ``"softmax"`` (of the labels).
      gain_base: :math:`\beta` of the ground cost's gains :math:`\beta^y - 1`.
      non_rele_gap: the gap between relevant and non-relevant documents (``eg``), >= 0.
      var_penalty: the cost between distinct documents of one label (``eg``).
      epsilon_scaling: anneal the regularization from the largest cost down to
        ``regularization`` over the first half of the iterations (module docstring).

    Returns:
      ``(losses, weights)``, ``[batch]`` each: the transport cost
      :math:`\langle P_\lambda, C\rangle`, and 1 for lists with a relevant
      document (0 otherwise).

    >>> good, _ = wassrank_loss([[0., 1., 2.]], [[-9., 0., 2.]])
    >>> bad, _ = wassrank_loss([[0., 1., 2.]], [[2., 0., -9.]])
    >>> bool(good[0] < bad[0])
    True
    """
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

    return distance(scores), tf.cast(lists.has_relevant(labels, mask), scores.dtype)


WASSRANK = base.LossSpec(wassrank_loss, "wassrank", {
    "regularization": validation.validate_positive,
    "sinkhorn_iterations": validation.integer(minimum=1),
    "cost_type": validation.choice(COST_TYPES),
    "target": validation.choice(TARGETS),
    "gain_base": validation.validate_positive,
    "non_rele_gap": validation.number(minimum=0.0),
    "var_penalty": validation.validate_positive,
    "epsilon_scaling": validation.validate_bool,
}, max_label=max_label)
wassrank_loss = WASSRANK.function


@register
class WassRankLoss(base.RankingLoss):
    r"""Keras loss of :func:`wassrank_loss`: WassRank's Sinkhorn distance.

    The options are :func:`wassrank_loss`'s; ``ragged`` accepts
    ``tf.RaggedTensor`` labels and scores. Lists without relevant documents
    get weight 0; :attr:`max_label` is :func:`max_label` of the options.

    >>> loss = WassRankLoss()
    >>> good = float(loss([[0., 1., 2.]], [[-9., 0., 2.]]))
    >>> bad = float(loss([[0., 1., 2.]], [[2., 0., -9.]]))
    >>> good < bad
    True
    """

    spec = WASSRANK
