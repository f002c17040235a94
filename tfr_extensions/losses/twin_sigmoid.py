r"""Direct optimization of Precision, AP, nDCG and nERR with twin-sigmoid ranks.

Yu, "Optimize What You Evaluate With" (``twin-sigmoid-direct-metric-optimization.txt``):
the loss of a list is minus the metric of Eq. 13-16 evaluated at the ranks of
Eq. 12 (:func:`tfr_extensions.ops.twin_sigmoid_ranks`). Its value is minus the
exact metric; its gradient is the paper's type1/2/3 gradient (Section 5).
"""
import itertools
from typing import Optional

import tensorflow as tf

from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import lists
from tfr_extensions.ops import rank_metrics
from tfr_extensions.ops.twin_sigmoid import (GRADIENT_TYPES, exact_forward_ranks,
                                              with_twin_sigmoid_gradient)

METRIC_NAMES = tuple(rank_metrics.METRICS)  # precision, ap, ndcg, nerr


@register
class TwinSigmoidLoss(base.StepSeeded, base.RankingLoss):
    r"""Minus a rank metric computed on twin-sigmoid ranks, per list.

    :math:`\ell(\mathbf{s}, \mathbf{y}) = -M(\mathbf{y}, \pi^+(\mathbf{s}))` with
    :math:`M` one of Precision@k (Eq. 13), AP (Eq. 14), nDCG (Eq. 15) and
    nERR@k (Eq. 16), :math:`\pi^+` the ranks of Eq. 12 and the gradient of Eq.
    11 (``type1``), 20 (``type2``) or 21 (``type3``).

    Args:
      metric: ``"precision"``, ``"ap"``, ``"ndcg"`` or ``"nerr"``.
      topn: cutoff k of the metric; None = the whole list.
      gradient: ``"type1"``, ``"type2"`` or ``"type3"``.
      alpha_b: backward sigmoid steepness (1.0 in the paper).
      tie_break: random tie breaking of Section 4.2 (on in the paper).
      seed: None, an int or a pair of ints for the tie-breaking permutations.
      ragged: accept ``tf.RaggedTensor`` labels and scores.

    >>> loss = TwinSigmoidLoss("ndcg", gradient="type3", seed=1)
    >>> round(float(loss([[0., 1., 2.]], [[3., 2., 1.]])), 4)  # minus nDCG
    -0.5869
    """

    PRESETS = {
        f"twin_{metric}_{gradient}": {"metric": metric, "gradient": gradient}
        for metric, gradient in itertools.product(METRIC_NAMES, GRADIENT_TYPES)
    }

    def __init__(self, metric: str = "ndcg", topn: Optional[int] = None,
                 gradient: str = "type1", alpha_b: float = 1.0,
                 tie_break: bool = True, seed: lists.Seed = None,
                 ragged: bool = False,
                 reduction: str = tf.keras.losses.Reduction.AUTO,
                 name: str = "twin_sigmoid_loss"):
        super().__init__(reduction=reduction, name=name, ragged=ragged)
        self._metric = lists.validate_choice(metric, METRIC_NAMES, "metric")
        self._topn = lists.validate_topn(topn)
        self._gradient = lists.validate_choice(gradient, GRADIENT_TYPES, "gradient")
        self._alpha_b = lists.validate_positive(alpha_b, "alpha_b")
        self._tie_break = bool(tie_break)
        self._init_seed(seed)

    def per_list(self, labels, scores, mask):
        ranks, positions = exact_forward_ranks(
            scores, mask, self._tie_break, seed=self.next_seed() if self._tie_break else None)
        value, rank_gradient = rank_metrics.value_and_rank_gradient(
            self._metric, labels, ranks, mask, self._topn, positions)
        metric = with_twin_sigmoid_gradient(value, rank_gradient, scores, labels, mask,
                                            self._gradient, self._alpha_b)
        return -metric, tf.cast(lists.has_relevant(labels, mask), scores.dtype)

    def get_config(self):
        config = super().get_config()
        config.update({
            "metric": self._metric, "topn": self._topn, "gradient": self._gradient,
            "alpha_b": self._alpha_b, "tie_break": self._tie_break, "seed": self._seed,
        })
        return config
