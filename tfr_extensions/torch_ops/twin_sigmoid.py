r"""The twin-sigmoid loss in PyTorch (Yu, "Optimize What You Evaluate With",
``twin-sigmoid-direct-metric-optimization.txt``): the value is the exact metric at the exact
ranks (Eq. 12; a sort, O(B L log L); nDCG by :mod:`tfr_extensions.torch_ops.rank_metrics`,
others by :func:`tfr_extensions.ops.rank_metrics.value_and_rank_gradient`); the backward, one
``torch.autograd.Function``, chains :math:`\delta_d = \partial M / \partial r_d` onto Eq. 17-18:

.. math:: \frac{\partial M}{\partial s_k} = -c \sum_j g_{kj}\,(\delta_j + c\,\delta_k),
   \qquad c = +1 \text{ (type2, type3)}, \; -1 \text{ (type1)},

with :math:`g_{kj} = \sigma^{+\prime}(s_k - s_j)` of Eq. 11, 20 or 21. With
:math:`t_{kj} = \tanh(\alpha_b (s_j - s_k) / 2)` (so :math:`\sigma_b(s_k - s_j) = (1 - t)/2`)
and :math:`u_{kj} = \mathrm{sign}(y_k - y_j)`:

* type1 (Eq. 11): :math:`g = \frac{\alpha_b}{4}(1 - t^2)`;
* type2 (Eq. 20): :math:`g = \frac{\alpha_b}{4}(1 - t^2)\,u`;
* type3 (Eq. 21): :math:`g = \alpha_b (1 + t)` if u = 1, :math:`-\alpha_b(1 - t)` if
  u = -1, 0 if u = 0; that is :math:`g = \alpha_b\, u (1 + t u)`.

Both sums of row k are one batched product :math:`G [\delta, m]` (:math:`m` the valid
documents: no ``[B, L, L]`` mask; under ``torch.compile`` one reduction fused with the pair
terms). Each pair takes one logistic, :math:`\frac14(1 - t^2) = \sigma(x)\,\sigma(-x)` and
:math:`1 + t u = 2\sigma(u x)`, :math:`x = \alpha_b (s_j - s_k)`: exact at every spread.
"""
import torch

from tfr_extensions import arrays
from tfr_extensions import backend
from tfr_extensions.arrays import tie_keys as shared_tie_keys
from tfr_extensions.keras_ops import lists
from tfr_extensions.ops import rank_metrics
from tfr_extensions.ops.twin_sigmoid import exact_forward_ranks
from tfr_extensions.ops import vocabulary
from tfr_extensions.torch_ops import pairs
from tfr_extensions.torch_ops import screening
from tfr_extensions.torch_ops.rank_metrics import ndcg_value_and_rank_gradient


def _pair_derivatives(x, u, gradient: str):
    r""":math:`g' = g / \alpha_b` up to :data:`_SIGN_AND_SCALE`'s constant, :math:`p = \sigma(x)`:
    :math:`p (1 - p)` (type1), :math:`p (1 - p) u` (type2), :math:`u\,\sigma(u x)` (type3), in
    the pair logits ``x`` (overwritten); label signs ``u`` None for type1."""
    if gradient == "type3":
        return x.mul_(u).sigmoid_().mul_(u)
    p = x.sigmoid_()
    p = p.addcmul_(p, p, value=-1.0)
    return p.mul_(u) if gradient == "type2" else p


#: ``(c, k)`` of each type, with :math:`g'` of :func:`_pair_derivatives`:
#: :math:`\partial L / \partial s_k = -k c \alpha_b \sum_j g'_{kj} (\delta_j + c\,\delta_k m_j)`
_SIGN_AND_SCALE = {"type1": (-1.0, 1.0), "type2": (1.0, 1.0), "type3": (1.0, 2.0)}


def _stored(tensor):
    """``tensor`` as a view Inductor must store (``as_strided`` reads memory): a ``[B, L]`` input
    of the pairs computed once, not in every pair (1.8x the step, 64 lists of 128, CPU)."""
    return tensor.as_strided(tensor.shape, tensor.stride())


def _fused_row_sums(x, labels, delta, weights, sign: float, gradient: str):
    r""":math:`\sum_j g'_{kj} (\delta_j + c\,\delta_k m_j)` ``[B, L]`` as one expression over
    all pairs, which ``torch.compile`` fuses into the reduction."""
    x, labels, delta, weights = map(_stored, (x, labels, delta, weights))
    pair_x = x[:, None, :] - x[:, :, None]
    u = None if gradient == "type1" else torch.sign(labels[:, :, None] - labels[:, None, :])
    if gradient == "type3":
        g = u * torch.sigmoid(u * pair_x)
    else:
        p = torch.sigmoid(pair_x)
        g = p * (1.0 - p) if u is None else p * (1.0 - p) * u
    return (g * (delta[:, None, :] + sign * delta[:, :, None] * weights[:, None, :])).sum(-1)


def _blocked_row_sums(x, labels, delta, weights, sign: float, gradient: str):
    r"""The sums of :func:`_fused_row_sums` eagerly per row block, the pair terms in place in
    two buffers, both sums one product :math:`[\delta, m]^\top G^\top` (faster on a CPU)."""
    logits = pairs.scratch(x)
    signs = None if gradient == "type1" else pairs.scratch(labels)
    columns = torch.stack([delta, weights], dim=1)  # [B, 2, L]
    products = []
    for block in pairs.row_blocks(x):
        u = None if gradient == "type1" else pairs.differences(  # sign(y_k - y_j)
            labels, block, signs, rows_first=True).sign_()
        g = _pair_derivatives(pairs.differences(x, block, logits), u, gradient)
        products.append(torch.bmm(columns, g.transpose(1, 2)))
    both = torch.cat(products, dim=2)  # [B, 2, L]
    return both[:, 0] + sign * delta * both[:, 1]


def ranks_backward(delta, scores, labels, valid, alpha_b: float, gradient: str):
    r""":math:`\partial L / \partial s` ``[B, L]`` from :math:`\delta = \partial L / \partial r`
    ``[B, L]`` (module docstring); ``delta``, ``scores``, ``labels`` any finite value at padding.

    >>> s = torch.tensor([[0.0, 1.0]]); y = torch.tensor([[1.0, 0.0]])
    >>> ranks_backward(torch.tensor([[1.0, 0.0]]), s, y, y >= 0, 1.0, "type3")
    tensor([[-1.4621,  1.4621]])
    """
    zeros = torch.zeros_like(scores)
    delta, weights = torch.where(valid, delta, zeros), valid.to(scores.dtype)
    x = pairs.clip(torch.where(valid, scores, zeros) * alpha_b)  # 0 at padded documents
    sign, scale = _SIGN_AND_SCALE[gradient]
    row_sums = _fused_row_sums if pairs.compiling() else _blocked_row_sums
    return alpha_b * ((-sign * scale) * row_sums(x, labels, delta, weights, sign, gradient)
                      * weights)


#: the keras.ops namespace, loaded now (an import where torch.compile traces breaks its graph)
_KERAS_OPS = arrays.load(backend.KERAS_OPS)


def tie_keys(shape, seed, device):
    """The keys of :mod:`tfr_extensions.arrays.tie_keys` ``[B, L]`` as int64 for ``seed`` (an
    int, a pair or an integer tensor ``[2]``; None: a fresh pair from ``torch.randint``).

    >>> keys = tie_keys((2, 5), 7, "cpu")
    >>> [len(set(row)) for row in keys.tolist()], bool((keys < 2**31).all())
    ([5, 5], True)
    """
    if seed is None:
        seed = torch.randint(0, 2**31 - 1, (2,), dtype=torch.int32, device=device)
    elif isinstance(seed, torch.Tensor) and seed.is_meta:  # Keras's shape inference
        seed = 0
    elif isinstance(seed, torch.Tensor):
        seed = seed.to(device=device)
    return shared_tie_keys.tie_keys(tuple(shape), seed, xp=_KERAS_OPS).to(device, torch.int64)


def forward_ranks(scores, valid, tie_break: bool, seed):
    """``(ranks, positions)`` of :func:`tfr_extensions.ops.twin_sigmoid.exact_forward_ranks`
    with :func:`tie_keys`: float32 scores sort once, on an int64 packing each score's
    order-preserving bits above its tie key; float64 scores sort twice.

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
    """``value`` ``[B]`` with :func:`ranks_backward`'s gradient for ``delta = upstream *
    rank_gradient``, computed in the forward (linear in the upstream, which scales it)."""

    @staticmethod
    def forward(ctx, scores, value, rank_gradient, labels, valid, alpha_b, gradient):
        # pylint: disable=arguments-differ
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(ranks_backward(rank_gradient, scores, labels, valid, alpha_b,
                                                 gradient))
        return value.clone()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, upstream):  # pylint: disable=arguments-differ
        (grads,) = ctx.saved_tensors
        return upstream[:, None] * grads, None, None, None, None, None, None


def twin_sigmoid_loss(labels, scores, *, mask=None, metric="ndcg", topn=None, gradient="type1",
                      alpha_b=1.0, tie_break=True, seed=None):
    r"""Minus a rank metric at twin-sigmoid ranks, per list: the PyTorch-native body
    of :func:`tfr_extensions.losses.twin_sigmoid_loss` (its contract).

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
    return -value, screening.has_relevant(labels, mask).to(scores.dtype)
