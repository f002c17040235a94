r"""RankNet in PyTorch: the PyTorch-native body of :func:`tfr_extensions.losses.ranknet_loss`.

``ranknet-and-ndcg-beta-report.txt``, Eq. 1-4. The pair cost
:math:`C(o, \bar P) = (1 - \bar P)\,o + \log(1 + e^{-o}) = \mathrm{softplus}(o) - \bar P o`
with :math:`o_{ij} = \sigma (s_i - s_j)` and target :math:`\bar P_{ij} = (1 + u_{ij})/2`,
:math:`u_{ij} = \mathrm{sign}(y_i - y_j)`, is the same for :math:`(i, j)` and
:math:`(j, i)`; so the sum over the unordered pairs is half the sum over all ordered pairs
of valid documents, less the diagonal's :math:`n \log 2`, and, as
:math:`\sum_{ij} m_i m_j o_{ij} = 0`,

.. math:: \sum_{i<j} C_{ij} = \tfrac12\Big[\sum_{ij} m_i m_j\big(\mathrm{softplus}(o_{ij})
   - \tfrac12 u_{ij} o_{ij}\big) - n \log 2\Big], \qquad
   \frac{\partial}{\partial o_k} = m_k \sum_j m_j \big(\sigma(o_{kj}) - \bar P_{kj}\big).

One ``torch.autograd.Function`` forms the pairs once, over row blocks
(:mod:`tfr_extensions.torch_ops.pairs`), for the value and the gradient; the masks enter
as the vectors of batched matrix products. Kept by ``python -m benchmarks.backend_throughput
--backends torch --losses ranknet --with-keras-ops``: 2.0 / 3.5 / 4.8x its ``keras.ops`` body
eagerly at L = 32 / 128 / 512, 1.0 / 1.7 / 1.9x compiled (2-vCPU EPYC, 2026-11-30, e12a853).
"""
import math

import torch

from tfr_extensions.torch_ops import pairs, screening

#: where softplus(o) = o to rounding (e^-o below half an ulp of o): PyTorch's
#: default threshold, 20, is that for float32 only
_LINEAR_ABOVE = {torch.float32: 20.0, torch.float64: 40.0}


class _RankNetMean(torch.autograd.Function):  # pylint: disable=abstract-method
    """``share`` :math:`\\times \\sum_{i<j} C_{ij}` per list ``[B]`` of the scaled scores
    ``x``, each pair's share taken before the sums (which could overflow at extreme gaps)."""

    @staticmethod
    def forward(ctx, x, labels, valid, share):  # pylint: disable=arguments-differ
        mask = valid.to(x.dtype)
        weights = (mask * share[:, None])[:, None, :]  # [B, 1, L]: the sums as w^T C^T
        totals, slopes = [], []
        diff_buffer, sign_buffer = pairs.scratch(x), pairs.scratch(labels)
        for block in pairs.row_blocks(x):
            diffs = pairs.differences(x, block, diff_buffer, rows_first=True)  # o
            signs = pairs.differences(labels, block, sign_buffer,
                                      rows_first=True).sign_()  # u
            costs = torch.nn.functional.softplus(diffs, threshold=_LINEAR_ABOVE[x.dtype])
            totals.append(torch.bmm(weights, costs.addcmul_(signs, diffs, value=-0.5)
                                    .transpose(1, 2)))  # softplus(o) - u o / 2
            if ctx.needs_input_grad[0]:  # sigma(o) - (1 + u) / 2
                slope = diffs.sigmoid_().sub_(signs.add_(1.0).mul_(0.5))
                slopes.append(torch.bmm(weights, slope.transpose(1, 2)))
        total = torch.cat(totals, dim=2)[:, 0]  # [B, L]
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(torch.cat(slopes, dim=2)[:, 0] * mask)
        return 0.5 * ((total * mask).sum(dim=-1) - mask.sum(dim=-1) * share * math.log(2.0))

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, upstream):  # pylint: disable=arguments-differ
        (grads,) = ctx.saved_tensors
        return upstream[:, None] * grads, None, None, None


def ranknet_loss(labels, scores, *, mask=None, sigma=1.0):
    r"""RankNet: the mean of :math:`C_{ij}` over the unordered pairs of valid documents
    (Eq. 1-4, tie targets 1/2), per list; weight 1 for lists with a relevant document.
    Scores clipped as the ``keras.ops`` body clips them.

    >>> losses, _ = ranknet_loss(torch.tensor([[1., 0.]]), torch.tensor([[0., 0.]]),
    ...                          mask=torch.tensor([[True, True]]))
    >>> round(float(losses[0]), 6)  # log 2
    0.693147
    """
    x = pairs.clip(sigma * pairs.clip(scores))  # (sigma * s may overflow)
    x = torch.where(mask, x, 0.0)
    count = mask.to(scores.dtype).sum(dim=-1)
    num_pairs = count * (count - 1.0) / 2.0
    losses = _RankNetMean.apply(x, labels, mask, 1.0 / torch.clamp(num_pairs, min=1.0))
    return losses, screening.has_relevant(labels, mask).to(scores.dtype)
