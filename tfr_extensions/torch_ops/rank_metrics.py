r"""nDCG of ranks and its rank derivative in PyTorch, the PyTorch twin-sigmoid's forward
metric: a handful of torch operations equal to the ``keras.ops``
:func:`tfr_extensions.ops.rank_metrics.value_and_rank_gradient` (other metrics' route);
Yu, "Optimize What You Evaluate With", Eq. 15 and 32:

.. math:: M = \frac{1}{DCG^*@k} \sum_{d:\, p_d \le k} \frac{2^{y_d} - 1}{\log_2(1 + r_d)},
   \qquad \frac{\partial M}{\partial r_d} = -\frac{2^{y_d} - 1}{DCG^*@k}\,
   \frac{1}{\ln 2\,(1 + r_d) \log_2^2(1 + r_d)},

with :math:`p_d` the document's integer position (a constant) and 0 for a list
without a relevant document.
"""
import math
from typing import Optional

import torch


def ndcg_value_and_rank_gradient(labels, ranks, mask, topn: Optional[int], positions):
    """nDCG@topn ``[B]`` and :math:`\\partial M / \\partial r` ``[B, L]`` of ``ranks``
    (1-based floats; ``positions`` their integer positions; padded labels 0).

    >>> value, grad = ndcg_value_and_rank_gradient(
    ...     torch.tensor([[1., 0.]]), torch.tensor([[2., 1.]]), torch.tensor([[True, True]]),
    ...     None, torch.tensor([[2, 1]]))
    >>> round(float(value[0]), 4), round(float(grad[0, 0]), 4)  # 1/log2(3); -1/(3 ln2 log2(3)^2)
    (0.6309, -0.1914)
    """
    within = mask if topn is None else mask & (positions <= topn)
    gains = torch.where(mask, torch.exp2(labels) - 1.0, 0.0)
    ideal = torch.sort(gains, dim=-1, descending=True).values[:, :topn]  # (None: all)
    ideal_discounts = 1.0 / torch.log2(torch.arange(2, ideal.shape[1] + 2, dtype=gains.dtype,
                                                    device=gains.device))
    ideal_dcg = ideal @ ideal_discounts
    norm = torch.where(ideal_dcg > 0, 1.0 / torch.where(ideal_dcg > 0, ideal_dcg, 1.0), 0.0)
    weights = torch.where(within, gains, 0.0) * norm[:, None]
    one_plus_ranks = 1.0 + torch.where(mask, ranks, 1.0)  # (1 at padding: finite)
    discounts = 1.0 / torch.log2(one_plus_ranks)
    value = (weights * discounts).sum(dim=-1)
    rank_gradient = weights * discounts.square() * (-1.0 / math.log(2.0)) / one_plus_ranks
    return value, rank_gradient
