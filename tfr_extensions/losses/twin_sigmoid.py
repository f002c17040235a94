r"""Direct optimization of Precision, AP, nDCG and nERR with twin-sigmoid ranks.

Yu, "Optimize What You Evaluate With" (``twin-sigmoid-direct-metric-optimization.txt``),
on the ranks of :func:`tfr_extensions.ops.twin_sigmoid_ranks`.
"""
import importlib
import itertools

from tfr_extensions import arrays
from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import validation
from tfr_extensions.ops import vocabulary
from tfr_extensions.ops.vocabulary import GRADIENT_TYPES

# (the module: tfr_extensions.ops exports its function twin_sigmoid under the same name)
twin_sigmoid_ops = importlib.import_module("tfr_extensions.ops.twin_sigmoid")


@base.loss_function(torch="tfr_extensions.torch_ops.twin_sigmoid:twin_sigmoid_loss", presets={
    f"twin_{metric}_{gradient}": {"metric": metric, "gradient": gradient}
    for metric, gradient in itertools.product(vocabulary.PAPER_METRICS, GRADIENT_TYPES)},
    examples=[dict(metric="ap_min", topn=5, gradient="type2", alpha_b=1.3, tie_break=False,
                   seed=[3, 4]),
              # ties broken by a seed: every framework draws the same keys
              dict(metric="ap_min", topn=3, gradient="type2", alpha_b=1.3, seed=0)])
def twin_sigmoid_loss(labels, scores, *, mask=None,
                      metric: vocabulary.Metric = "ndcg", topn: validation.TopN = None,
                      gradient: validation.OneOf(GRADIENT_TYPES) = "type1",
                      alpha_b: validation.Positive = 1.0, tie_break: validation.Flag = True,
                      seed: validation.Seed = None):
    r"""Minus a rank metric computed on twin-sigmoid ranks, per list.

    :math:`\ell(\mathbf{s}, \mathbf{y}) = -M(\mathbf{y}, \pi^+(\mathbf{s}))` with :math:`M`
    one of Precision@k (Eq. 13), AP (Eq. 14), nDCG (Eq. 15) and nERR@k (Eq. 16),
    :math:`\pi^+` the ranks of Eq. 12 and the gradient of Eq. 11 (``type1``), 20 (``type2``)
    or 21 (``type3``): the paper's closed form (Eq. 17-18 chained onto Eq. 29, 31-33),
    finite for any scores (:mod:`tfr_extensions.ops.twin_sigmoid`).

    Args:
      metric: a name of :mod:`~tfr_extensions.ops.vocabulary` (``"ap"``, ``"ndcg"``, ...).
      topn: cutoff k of the metric; None = the whole list.
      gradient: ``"type1"``, ``"type2"`` or ``"type3"``.
      alpha_b: backward sigmoid steepness :math:`\alpha_b` (1.0 in the paper).
      tie_break: random tie breaking of Section 4.2 (on in the paper).
      seed: the tie-breaking permutations' seed.

    Returns:
      ``(losses, weights)``, ``[batch]`` each: minus the metric.

    >>> losses, weights = twin_sigmoid_loss([[0., 1., 2.]], [[3., 2., 1.]], gradient="type3")
    >>> round(float(losses[0]), 4), float(weights[0])  # minus nDCG
    (-0.5869, 1.0)
    """
    xp = arrays.namespace()
    value = twin_sigmoid_ops.twin_sigmoid_metric(metric, labels, scores, mask, topn, gradient,
                                                 alpha_b, tie_break, seed if tie_break else None)
    return -value, xp.cast(xp.screening.has_relevant(labels, mask), scores.dtype)


@register
class TwinSigmoidLoss(base.RankingLoss):
    r"""Keras loss of :func:`twin_sigmoid_loss`; presets ``twin_<metric>_<type>`` for the paper's
    four metrics and three gradients.

    >>> loss = TwinSigmoidLoss("ndcg", gradient="type3", seed=1)
    >>> round(float(loss([[0., 1., 2.]], [[3., 2., 1.]])), 4)  # minus nDCG
    -0.5869
    """

    function = twin_sigmoid_loss

    def __init__(self, metric="ndcg", topn=None, gradient="type1", alpha_b=1.0, tie_break=True,
                 seed=None, ragged=False, reduction=base.DEFAULT_REDUCTION, name="twin_sigmoid"):
        super().__init__(locals())

