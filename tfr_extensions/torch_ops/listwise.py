r"""ApproxNDCG in PyTorch: the PyTorch-native body of :func:`tfr_extensions.losses.approx_ndcg_loss`.

ApproxNDCG (``approxndcg-revisited.txt``, Eq. 3-6) is one ``torch.autograd.Function``. With
:math:`x = s / T`, :math:`S_{ij} = \sigma(x_j - x_i)` and :math:`m` the valid documents, the
smooth ranks are :math:`\hat\pi_i = \tfrac12 + (S m)_i` (Eq. 5-6; the diagonal gives the 1/2
that makes them 1-based), the loss :math:`-\frac{1}{IDCG}\sum_i g_i / \log_2(1 + \hat\pi_i)`
(Eq. 3-4). Its gradient, from :math:`c_i = \partial\,\mathrm{nDCG} / \partial \hat\pi_i` and
the symmetric :math:`P = S \odot (1 - S)`:

.. math:: \frac{\partial\,\mathrm{nDCG}}{\partial s_k} = \frac{m_k}{T} [(P c)_k - c_k (P m)_k]

(the diagonal terms cancel). Both come from the forward pass over row blocks
(:mod:`tfr_extensions.torch_ops.pairs`): one in-place ``sigmoid`` per pair and a batched
product for the ranks, and for a gradient once more with ``P`` and :math:`[c, m]`.
"""
import math

import torch

from tfr_extensions.ops.numerics import safe_divide
from tfr_extensions.ops import rank_metrics
from tfr_extensions.torch_ops import screening
from tfr_extensions.torch_ops import pairs


class _ApproxNDCG(torch.autograd.Function):  # pylint: disable=abstract-method
    """Per-list approxNDCG ``[B]`` of ``scores`` with the module docstring's gradient."""

    @staticmethod
    def forward(ctx, scores, gains, inverse_ideal, valid, temperature):
        # pylint: disable=arguments-differ
        weights = valid.to(scores.dtype)
        x = pairs.clip(torch.where(valid, scores, 0.0) / temperature)
        blocks, buffer = pairs.row_blocks(x), pairs.scratch(x)
        ranks = 0.5 + torch.cat([  # 1/2 + S m
            torch.bmm(weights[:, None, :],
                      pairs.differences(x, block, buffer).sigmoid_().transpose(1, 2))
            for block in blocks], dim=2)[:, 0]
        log_ranks = torch.log1p(ranks)  # ln(1 + rank) >= ln 1.5
        ndcg = (gains * (math.log(2.0) / log_ranks)).sum(dim=-1) * inverse_ideal
        if ctx.needs_input_grad[0]:
            rank_grads = -(gains * math.log(2.0) * inverse_ideal[:, None]
                           / ((1.0 + ranks) * log_ranks * log_ranks))  # c
            columns = torch.stack([rank_grads, weights], dim=1)  # [B, 2, L]
            sums = torch.cat([  # the pairs again: P c and P m, P = S (1 - S) in place
                torch.bmm(columns, pair.addcmul_(pair, pair, value=-1.0).transpose(1, 2))
                for pair in (pairs.differences(x, block, buffer).sigmoid_()
                             for block in blocks)], dim=2)
            ctx.save_for_backward(
                weights * (sums[:, 0] - rank_grads * sums[:, 1]) / temperature)
        return ndcg

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, upstream):  # pylint: disable=arguments-differ
        (grads,) = ctx.saved_tensors
        return upstream[:, None] * grads, None, None, None, None


def approx_ndcg_loss(labels, scores, *, mask=None, temperature=0.1):
    r"""ApproxNDCG, per list: minus nDCG at the smooth ranks of Eq. 5-6. Returns ``(losses,
    weights)`` ``[batch]``: weight 1 for lists with a relevant document, else 0 (loss 0).

    >>> losses, _ = approx_ndcg_loss(torch.tensor([[1., 0.]]), torch.tensor([[0.6, 0.8]]),
    ...                              mask=torch.tensor([[True, True]]))
    >>> round(float(losses[0]), 6)  # TF-Ranking's docstring: -0.655107
    -0.655107
    """
    gains = torch.where(mask, torch.exp2(labels) - 1.0, 0.0)
    ideal = rank_metrics.ideal_dcg(labels, mask)
    inverse_ideal = safe_divide(torch.ones_like(ideal), ideal)
    ndcg = _ApproxNDCG.apply(scores, gains, inverse_ideal, mask, float(temperature))
    return -ndcg, screening.has_relevant(labels, mask).to(scores.dtype)

