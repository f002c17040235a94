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

from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import conventions
from tfr_extensions.ops import validation


#: the ground costs between positions (module docstring)
COST_TYPES = ("eg", "dg", "ddg", "p1", "p2")
#: the target distributions over the documents
TARGETS = ("gain", "softmax")


def max_label(options) -> float:
    r"""The largest valid label of WassRank with these options: 31
    (:data:`~tfr_extensions.ops.conventions.MAX_LABEL`), lower when ``gain_base``
    :math:`\beta > 4`: :math:`64 / \log_2\beta`, so that the costs stay below
    :math:`2^{64}` (and their ratios to :math:`\lambda` finite).

    >>> max_label({"gain_base": 4.0}), max_label({"gain_base": 2.0 ** 16})
    (31.0, 4.0)
    """
    gain_base = options["gain_base"]
    if gain_base <= 4.0:
        return conventions.MAX_LABEL
    return min(conventions.MAX_LABEL, 64.0 / math.log2(gain_base))


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
    return WASSRANK.apply(labels, scores, mask, regularization=regularization,
                          sinkhorn_iterations=sinkhorn_iterations, cost_type=cost_type,
                          target=target, gain_base=gain_base, non_rele_gap=non_rele_gap,
                          var_penalty=var_penalty, epsilon_scaling=epsilon_scaling)


WASSRANK = base.LossSpec(wassrank_loss, {
    base.TENSORFLOW: "tfr_extensions.ops.losses.wassrank:wassrank_loss",
    base.KERAS_OPS: "tfr_extensions.keras_ops.losses.wassrank:wassrank_loss"}, {
    "regularization": validation.validate_positive,
    "sinkhorn_iterations": validation.integer(minimum=1),
    "cost_type": validation.choice(COST_TYPES),
    "target": validation.choice(TARGETS),
    "gain_base": validation.validate_positive,
    "non_rele_gap": validation.number(minimum=0.0),
    "var_penalty": validation.validate_positive,
    "epsilon_scaling": validation.validate_bool,
}, max_label=max_label)


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

    def __init__(self, regularization=0.1, sinkhorn_iterations=20, cost_type="eg",
                 target="gain", gain_base=4.0, non_rele_gap=100.0, var_penalty=math.e,
                 epsilon_scaling=True, ragged=False, reduction=base.DEFAULT_REDUCTION,
                 name="wassrank"):
        super().__init__(dict(regularization=regularization,
                              sinkhorn_iterations=sinkhorn_iterations, cost_type=cost_type,
                              target=target, gain_base=gain_base, non_rele_gap=non_rele_gap,
                              var_penalty=var_penalty, epsilon_scaling=epsilon_scaling),
                         ragged=ragged, reduction=reduction, name=name)

    def get_config(self):
        config = super().get_config()  # ragged, reduction, name
        options = self.options
        config.update(regularization=options["regularization"],
                      sinkhorn_iterations=options["sinkhorn_iterations"],
                      cost_type=options["cost_type"], target=options["target"],
                      gain_base=options["gain_base"], non_rele_gap=options["non_rele_gap"],
                      var_penalty=options["var_penalty"],
                      epsilon_scaling=options["epsilon_scaling"])
        return config
