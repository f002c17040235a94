r"""The twin-sigmoid loss in PyTorch: the forward of the ``keras.ops`` body, the
backward as one ``torch.autograd.Function``.

Yu, "Optimize What You Evaluate With" (``twin-sigmoid-direct-metric-optimization.txt``).
The value is the exact metric at the exact ranks (Eq. 12), computed by
:func:`tfr_extensions.keras_ops.twin_sigmoid.exact_forward_ranks` and
:func:`tfr_extensions.keras_ops.rank_metrics.value_and_rank_gradient` (a sort,
O(B L log L); nDCG by :mod:`tfr_extensions.torch_ops.rank_metrics`); the gradient chains the metric's rank derivative
:math:`\delta_d = \partial M / \partial r_d` onto Eq. 17-18:

.. math:: \frac{\partial M}{\partial s_k} = -c \sum_j g_{kj}\,(\delta_j + c\,\delta_k),
   \qquad c = +1 \text{ (type2, type3)}, \; -1 \text{ (type1)},

with :math:`g_{kj} = \sigma^{+\prime}(s_k - s_j)` of Eq. 11, 20 or 21. With
:math:`t_{kj} = \tanh(\alpha_b (s_j - s_k) / 2)` (so :math:`\sigma_b(s_k - s_j) =
(1 - t)/2`) and :math:`u_{kj} = \mathrm{sign}(y_k - y_j)`:

* type1 (Eq. 11): :math:`g = \frac{\alpha_b}{4}(1 - t^2)`;
* type2 (Eq. 20): :math:`g = \frac{\alpha_b}{4}(1 - t^2)\,u`;
* type3 (Eq. 21): :math:`g = \alpha_b (1 + t)` if u = 1, :math:`-\alpha_b(1 - t)` if
  u = -1, 0 if u = 0; that is :math:`g = \alpha_b\, u (1 + t u)`.

Both sums of row k are one batched matrix product, :math:`G [\delta, m]` with
:math:`m` the valid documents (padded columns count for nothing, padded rows get
0), so no ``[B, L, L]`` mask is formed. One ``tanh`` per pair is exact for every
spread, so there is no exp/tanh choice and no data-dependent branch.
"""
import torch

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import rank_metrics
from tfr_extensions.keras_ops import random as keras_random
from tfr_extensions.keras_ops.twin_sigmoid import exact_forward_ranks
from tfr_extensions.ops import vocabulary
from tfr_extensions.torch_ops import pairs
from tfr_extensions.torch_ops.rank_metrics import ndcg_value_and_rank_gradient


def _half_scaled(scores, alpha_b: float):
    r""":math:`\alpha_b s / 2`, clipped to +-``dtype.max / 4`` so that differences of
    two are never NaN (beyond that every ``tanh`` has saturated)."""
    bound = torch.finfo(scores.dtype).max / 4.0
    return torch.clamp(scores * (0.5 * alpha_b), -bound, bound)


def ranks_backward(delta, scores, labels, valid, alpha_b: float, gradient: str):
    r""":math:`\partial L / \partial s` ``[B, L]`` from :math:`\delta = \partial L /
    \partial r` ``[B, L]`` (module docstring). Per block of rows
    (:func:`~tfr_extensions.torch_ops.pairs.row_blocks`): the score differences, the
    label signs for type2 and type3 (type3 then takes
    :math:`u\,t = \tanh(u\,\alpha_b (s_j - s_k)/2)` and :math:`u + u\,(u t)` in place),
    and one batched matrix product with :math:`[\delta, m]`. ``delta``, ``scores`` and
    ``labels`` may hold anything finite at padded documents.

    >>> s = torch.tensor([[0.0, 1.0]]); y = torch.tensor([[1.0, 0.0]])
    >>> ranks_backward(torch.tensor([[1.0, 0.0]]), s, y, y >= 0, 1.0, "type3")
    tensor([[-1.4621,  1.4621]])
    """
    weights = valid.to(scores.dtype)
    delta = torch.where(valid, delta, torch.zeros_like(delta))
    half = _half_scaled(torch.where(valid, scores, torch.zeros_like(scores)), alpha_b)
    columns = torch.stack([delta, weights], dim=-1)  # [B, L, 2]
    sums = []  # G [delta, m], per block of rows
    for block in pairs.row_blocks(scores):
        g = half[:, None, :] - half[:, block, None]  # alpha_b (s_j - s_k) / 2
        if gradient != "type1":  # u_kj = sign(y_k - y_j)
            u = (labels[:, block, None] - labels[:, None, :]).sign_()
        if gradient == "type3":  # u (1 + t u), t u = tanh(u alpha_b (s_j - s_k) / 2)
            g = torch.addcmul(u, u, g.mul_(u).tanh_(), out=g)
        else:  # 1 - t^2 (times u for type2)
            g.tanh_().square_().neg_().add_(1.0)
            if gradient == "type2":
                g.mul_(u)
        sums.append(torch.bmm(g, columns))
    sums = torch.cat(sums, dim=1)
    sign, scale = (1.0, alpha_b) if gradient == "type3" else (
        (-1.0, alpha_b / 4.0) if gradient == "type1" else (1.0, alpha_b / 4.0))
    grads = (-sign * scale) * (sums[..., 0] + sign * delta * sums[..., 1])
    return torch.where(valid, grads, torch.zeros_like(grads))


_MASK32 = 0xFFFFFFFF


def _fmix32(h):
    """MurmurHash3's 32-bit finalizer on int64 tensors holding uint32 values."""
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & _MASK32
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & _MASK32
    return h ^ (h >> 16)


def tie_keys(shape, seed, device):
    """Int64 keys in ``[0, 2^31)``, distinct within each list, that break ties in
    score: random top bits over the reversed index in the low bits, as
    :func:`tfr_extensions.keras_ops.sorting.random_tie_keys` builds them. The random
    bits are a hash of ``seed`` and each entry's index (MurmurHash3's finalizer),
    traced by ``torch.compile`` without a generator (a Keras ``SeedGenerator`` on
    PyTorch is compiled out of the graph), so the stream differs from the
    ``keras.ops`` body's; ``seed=None`` draws ``torch.randint``. ``seed``: None, an
    int, a pair of ints or an integer tensor ``[2]``.

    >>> keys = tie_keys((2, 5), 7, "cpu")
    >>> [len(set(row)) for row in keys.tolist()], bool((keys < 2**31).all())
    ([5, 5], True)
    """
    batch, size = shape
    index_bits = (size - 1).bit_length() if size else 0
    if seed is None:
        draws = torch.randint(0, 2**31 - 1, (batch, size), dtype=torch.int64, device=device)
    else:
        if isinstance(seed, torch.Tensor) and seed.is_meta:  # Keras's shape inference
            base = 0
        elif isinstance(seed, torch.Tensor):
            seed = seed.to(device=device, dtype=torch.int64)
            base = (seed[0] * 1_000_003 + seed[1]) & _MASK32
        else:
            base = keras_random.as_int(seed)
        index = torch.arange(batch * size, dtype=torch.int64, device=device).reshape(batch, size)
        # (index ^ base, not index * constant + base: inductor folds an affine
        # expression of the index into Triton index arithmetic, which is int32)
        draws = _fmix32((_fmix32((index ^ base) & _MASK32) + 0x7F4A7C15) & _MASK32) >> 1
    reversed_index = torch.arange(size - 1, -1, -1, dtype=torch.int64, device=device)
    return ((draws >> index_bits) << index_bits) | reversed_index


def forward_ranks(scores, valid, tie_break: bool, seed):
    """``(ranks, positions)`` of
    :func:`tfr_extensions.keras_ops.twin_sigmoid.exact_forward_ranks`, with the tie
    keys of :func:`tie_keys` and one scatter for the tie-broken positions. Float32
    scores sort once, on an int64 that packs each score's order-preserving bits above
    its tie key; float64 scores sort twice (by tie key, then stably by score).

    >>> s = torch.tensor([[0.5, 2.0, 0.5]])
    >>> forward_ranks(s, s > 0, False, None)[0]
    tensor([[2.5000, 1.0000, 2.5000]])
    """
    if not tie_break:
        return exact_forward_ranks(scores, valid, False, None)
    keys_of_ties = tie_keys(scores.shape, seed, scores.device)  # distinct within a list
    valid_scores = torch.where(valid, scores + 0.0, float("-inf"))  # -0.0 ties +0.0
    if scores.dtype == torch.float32:  # one sort of (score, tie key) packed in an int64
        bits = valid_scores.view(torch.int32)
        ordered = (bits ^ ((bits >> 31) & 0x7FFFFFFF)).to(torch.int64)  # monotone in score
        order = torch.argsort((ordered << 31) | keys_of_ties, dim=-1, descending=True)
    else:  # two sorts: by tie key, then stably by score
        by_tie_key = torch.argsort(-keys_of_ties, dim=-1)
        order = by_tie_key.gather(1, torch.argsort(-valid_scores.gather(1, by_tie_key), dim=-1,
                                                   stable=True))
    ranks = torch.arange(1, scores.shape[1] + 1, dtype=torch.int32, device=scores.device)
    positions = torch.empty_like(order, dtype=torch.int32).scatter_(
        1, order, ranks.expand(order.shape).contiguous())
    return torch.where(valid, positions.to(scores.dtype), 0.0), positions


class _TwinSigmoidGradient(torch.autograd.Function):  # pylint: disable=abstract-method
    """``value`` ``[B]`` with the gradient of :func:`ranks_backward` for ``delta =
    upstream * rank_gradient``: forward copies the value, backward makes the pairs."""

    @staticmethod
    def forward(ctx, scores, value, rank_gradient, labels, valid, alpha_b, gradient):
        # pylint: disable=arguments-differ
        ctx.save_for_backward(scores, rank_gradient, labels, valid)
        ctx.alpha_b, ctx.gradient = alpha_b, gradient
        return value.clone()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, upstream):  # pylint: disable=arguments-differ
        scores, rank_gradient, labels, valid = ctx.saved_tensors
        grads = ranks_backward(upstream[:, None] * rank_gradient, scores, labels, valid,
                               ctx.alpha_b, ctx.gradient)
        return grads, None, None, None, None, None, None


def twin_sigmoid_loss(labels, scores, *, mask=None, metric="ndcg", topn=None, gradient="type1",
                      alpha_b=1.0, tie_break=True, seed=None):
    r"""Minus a rank metric at twin-sigmoid ranks, per list: the PyTorch-native body
    of :func:`tfr_extensions.losses.twin_sigmoid_loss` (the same contract as
    :func:`tfr_extensions.keras_ops.losses.twin_sigmoid.twin_sigmoid_loss`).

    >>> losses, weights = twin_sigmoid_loss(torch.tensor([[0., 1., 2.]]),
    ...                                     torch.tensor([[3., 2., 1.]]), gradient="type3")
    >>> round(float(losses[0]), 4), float(weights[0])  # minus nDCG
    (-0.5869, 1.0)
    """
    if mask is None:
        labels, scores, mask = lists.prepare_lists(labels, scores)
    with torch.no_grad():
        ranks, positions = forward_ranks(scores, mask, tie_break, seed)
        if vocabulary.canonical_metric(metric) == "ndcg":
            value, rank_gradient = ndcg_value_and_rank_gradient(labels, ranks, mask, topn,
                                                                positions)
        else:
            value, rank_gradient = rank_metrics.value_and_rank_gradient(
                metric, labels, ranks, mask, topn, positions)
    value = _TwinSigmoidGradient.apply(scores, value, rank_gradient, labels, mask,
                                       float(alpha_b), gradient)
    return -value, lists.has_relevant(labels, mask).to(scores.dtype)
