r"""Plackett-Luce rankings: Gumbel sampling and exact log-probabilities.

Yu et al., "Diagnostic Evaluation of Policy-Gradient-Based Ranking"
(``policy-gradient-ranking-diagnostic.txt``), Sections 4.1-4.3. The Plackett-Luce (PL)
model with scores :math:`f(x_i)` (``scores``) and temperature :math:`T` (``temperature``)
gives a ranking :math:`\pi` of the valid documents the probability of Eq. 12:

.. math::
    P(\pi) = \prod_{i=1}^{n} \frac{\exp(f(x_{\pi^{-1}(i)}) / T)}
                                 {\sum_{b \ge i} \exp(f(x_{\pi^{-1}(b)}) / T)},

the denominator over the documents not yet placed; ``n`` is the number of valid documents,
or ``topn`` (whose denominators also hold the documents never placed). :func:`sample_rankings`
draws rankings by the Gumbel trick (Section 4.3.1); :func:`plackett_luce_log_prob` is
:math:`\log P(\pi)` (also ListMLE's Eq. 3, the listwise discriminator's Eq. 14),
:func:`plackett_luce_position_log_probs` its per-position terms (MDPRank's Eq. 7),
:func:`sample_rankings_with_log_probs` both at once.

Shared arguments (bad values raise ``ValueError``): ``scores`` float ``[batch, list_size]``
(:math:`f(x)`); ``mask`` optional bool ``[batch, list_size]``, True = valid; ``temperature``
:math:`T > 0`; ``topn`` None or the number of positions; ``rankings`` int ``[batch,
num_samples, n]`` (or ``[batch, n]``), ``rankings[b, k, i]`` the document at 0-based position
``i`` of sample ``k``, padded documents last (:func:`ranking_mask`); an all-padding list has
log-probability 0.

Numerics: each denominator is a log-sum-exp (plus one term for the documents a top-n ranking
leaves out), finite at any finite score and exact up to 256 positions (longer, the namespace's
``cumulative_logsumexp``: errors of about |s| times epsilon); excluded documents enter as
the finite ``dtype.min`` by ``where``: zero gradient. The Gumbel noise is finite (the
namespace's ``uniform_noise``); a seed reproduces draws on one framework only.

>>> rankings = sample_rankings([[2.0, 1.0, 0.0]], num_samples=2, seed=0)
>>> tuple(rankings.shape)
(1, 2, 3)
>>> log_prob = plackett_luce_log_prob([[2.0, 1.0, 0.0]], [[0, 1, 2]])
>>> round(float(np.exp(float(log_prob[0]))), 4)  # e^2/(e^2+e+1) * e/(e+1)
0.4863
"""
from typing import Any, Optional

import numpy as np

from tfr_extensions import arrays
from tfr_extensions.ops import validation

#: a seed: None (fresh randomness), an int, a pair of ints or a seed tensor ``[2]``
Seed = Any

# Up to these many positions, :func:`_reverse_log_softmax` masks a triangle (O(n^2) memory)
# and :func:`_left_out` counts with a one-hot (B*S*n*L memory, few ops; beyond, a scatter).
_PAIRWISE_MAX_POSITIONS = 256
_ONE_HOT_MAX_POSITIONS = 64


def _excluded_logit(xp, dtype: str):
    """``dtype.min``, the excluded logit, as a 0-d tensor (torch's ``where`` casts to float32)."""
    return xp.constant(float(np.finfo(dtype).min), dtype)


def uniform_noise(shape, seed: Seed, dtype="float32"):
    """Uniform noise ``u = (b + 1/2) / 2^bits`` from integers ``b`` (``xp.uniform_noise``):
    ``0 < u < 1`` exactly, so ``log(u)`` and ``log(-log(u))`` are finite.

    >>> u = uniform_noise((1000,), 4)
    >>> bool(arrays.namespace().all((u > 0.0) & (u < 1.0)))
    True
    """
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None) or str(dtype)
    return arrays.namespace().uniform_noise(shape, seed, name)


def gumbel_noise(shape, seed: Seed, dtype="float32"):
    """Standard Gumbel noise :math:`g = -\\log(-\\log u)`, u from :func:`uniform_noise`."""
    xp = arrays.namespace()
    return -xp.log(-xp.log(uniform_noise(shape, seed, dtype)))


def _shifted_logsumexp(xp, x):
    r"""``(m, t)``, :math:`\log\sum_i e^{x_i} = m + t` over the last axis (kept), ``m`` the
    stop-gradient maximum: apart, ``t`` stays exact where ``m + t`` would round to ``m``."""
    if x.shape[-1] == 0:  # no document: the excluded logit (a max has no identity)
        dtype = xp.dtype_name(x)
        top = xp.full(tuple(xp.shape(x)[:-1]) + (1,), float(np.finfo(dtype).min), dtype)
    else:  # (amax: keras's torch max() mishandles an empty batch)
        top = xp.stop_gradient(xp.amax(x, axis=-1, keepdims=True))
    return top, xp.log(xp.sum(xp.exp(x - top), axis=-1, keepdims=True))


def _reverse_log_softmax(xp, values, log_weights, count):
    r""":math:`v_j - \log\sum_{i \ge j} w_i e^{v_i}` for the first ``count`` positions j of
    the last axis, ``w = exp(log_weights)``; up to ``_PAIRWISE_MAX_POSITIONS`` entries as
    :math:`(v_j - m_j) - \log\sum_{i \ge j} w_i e^{v_i - m_j}`, :math:`m_j` the largest remaining
    value: exact at any magnitude (ties at 1e30 give :math:`-\log 2`)."""
    size = values.shape[-1]
    if size is None or size > _PAIRWISE_MAX_POSITIONS:
        totals = xp.cumulative_logsumexp(values + log_weights, axis=-1, reverse=True)
        return (values - totals)[..., :count]
    later = np.arange(size)[None, :] >= np.arange(count)[:, None]  # [j, i]: i >= j
    masked = xp.where(xp.convert_to_tensor(later), values[..., None, :],
                      _excluded_logit(xp, xp.dtype_name(values)))
    top, log_total = _shifted_logsumexp(xp, masked + log_weights[..., None, :])
    return (values[..., :count] - top[..., 0]) - log_total[..., 0]


def _logits(xp, scores, temperature: float):  # f / T (no op at T = 1)
    return scores if temperature == 1.0 else scores / xp.constant(temperature,
                                                                   xp.dtype_name(scores))


def _sampled(scores, mask, num_samples, seed, temperature, topn):
    """The checked arguments' logits ``f / T`` and their :func:`_gumbel_order`."""
    num_samples = validation.validate_int(num_samples, "num_samples", minimum=1)
    temperature = validation.validate_positive(temperature, "temperature")
    topn = validation.validate_topn(topn)
    xp = arrays.namespace()
    scores, mask = xp.screening.prepare_scores(scores, mask)
    logits = _logits(xp, scores, temperature)
    return logits, _gumbel_order(xp, xp.stop_gradient(logits), mask, num_samples, seed, topn)


def sample_rankings(scores, mask=None, num_samples: int = 1, seed: Seed = None,
                    temperature: float = 1.0, topn: Optional[int] = None):
    r"""Plackett-Luce rankings by the Gumbel trick (Section 4.3.1): :math:`f(x)/T + g`,
    :math:`g \sim \mathrm{Gumbel}(0,1)` i.i.d., sorted in decreasing order (O(L log n)),
    distributed as Eq. 12; padded documents sort last.

    Args:
      scores, mask, temperature, topn: as in the module docstring.
      num_samples: rankings per list, an int >= 1.
      seed: None (fresh randomness), an int, a pair of ints or an int32 ``[2]`` seed tensor.

    Returns:
      int32 ``[batch, num_samples, n]`` with ``n = min(topn, list_size)``.
    """
    return _sampled(scores, mask, num_samples, seed, temperature, topn)[1][0]


def _gumbel_order(xp, logits, mask, num_samples, seed, topn):
    """The Gumbel-perturbed order ``[B, S, n]``, bool ``placed`` (a valid document there)
    and bool ``left_out`` ``[B, S, L]`` (valid documents beyond the first n)."""
    dimensions = xp.shape(logits)  # (a dimension TensorFlow does not know: a tensor)
    shape = (dimensions[0], num_samples, dimensions[1])
    keys = logits[:, None, :] + gumbel_noise(shape, seed, xp.dtype_name(logits))  # [B, S, L]
    # -inf is a sort key only: padded documents go after every valid one.
    keys = xp.where(mask[:, None, :], keys, xp.constant(-float("inf"), xp.dtype_name(keys)))
    list_size = logits.shape[-1]
    if topn is not None and list_size is not None and topn < list_size:
        values, order = xp.top_k(keys, topn, sorted=True)
        order, placed = xp.cast(order, "int32"), values > -float("inf")
        return order, placed, _left_out(xp, mask, order, placed)
    order = xp.cast(xp.argsort(-keys, axis=-1), "int32")  # stable: padding in index order
    if topn is not None:
        order = order[..., :topn]
    placed = xp.lists.batch_gather(mask, order)
    if topn is not None and list_size is None:  # (TensorFlow only: keras.ops shapes are static)
        return order, placed, _left_out(xp, mask, order, placed)
    return order, placed, xp.zeros_like(keys, dtype="bool")


def _with_sample_axis(xp, rankings):
    """Rankings as ``[B, S, n]`` and whether the caller gave ``[B, n]``."""
    rankings = xp.cast(xp.convert_to_tensor(rankings), "int32")
    if len(rankings.shape) == 2:
        return rankings[:, None, :], True
    if len(rankings.shape) != 3:
        raise ValueError("`rankings` must have shape [batch, n] or [batch, num_samples, n]; "
                         f"got {tuple(rankings.shape)}.")
    return rankings, False


def ranking_mask(rankings, mask):
    """Bool, shaped like ``rankings``: the position holds a valid document."""
    xp = arrays.namespace()
    rankings, squeeze = _with_sample_axis(xp, rankings)
    valid = xp.lists.batch_gather(xp.cast(mask, "bool"), rankings)
    return valid[:, 0, :] if squeeze else valid


def plackett_luce_position_log_probs(scores, rankings, mask=None, topn: Optional[int] = None,
                                     temperature: float = 1.0):
    r"""Per-position terms of Eq. 12, MDPRank's action log-probabilities (Eq. 7):
    :math:`\log P(a_i | s_i) = f_{\pi^{-1}(i)}/T - \log\sum_{b \ge i} \exp(f_{\pi^{-1}(b)}/T)`,
    0 at positions holding a padded document and at positions ``>= topn``.

    Args:
      scores, rankings, mask, topn, temperature: as in the module docstring.

    Returns:
      ``[batch, num_samples, min(n, topn)]`` (or without the sample axis, as given).
    """
    topn = validation.validate_topn(topn)
    temperature = validation.validate_positive(temperature, "temperature")
    xp = arrays.namespace()
    scores, mask = xp.screening.prepare_scores(scores, mask)
    rankings, squeeze = _with_sample_axis(xp, rankings)
    if topn is not None:
        rankings = rankings[..., :topn]
    placed = xp.lists.batch_gather(mask, rankings)  # [B, S, n]
    terms = _position_terms(xp, _logits(xp, scores, temperature), rankings, placed,
                            _left_out(xp, mask, rankings, placed))
    return terms[:, 0, :] if squeeze else terms


def sample_rankings_with_log_probs(scores, mask=None, num_samples: int = 1,
                                   seed: Seed = None, temperature: float = 1.0,
                                   topn: Optional[int] = None):
    """:func:`sample_rankings` and the differentiable
    :func:`plackett_luce_position_log_probs` of those rankings in one pass (REINFORCE).

    Returns:
      ``(rankings, log_probs)``: int32 and float ``[batch, num_samples, n]``.
    """
    logits, (order, placed, left_out) = _sampled(scores, mask, num_samples, seed,
                                                 temperature, topn)
    return order, _position_terms(arrays.namespace(), logits, order, placed, left_out)


def _left_out(xp, mask, rankings, placed):
    """Bool ``[B, S, L]``: valid documents the rankings never place."""
    num_positions = rankings.shape[-1]
    list_size = xp.shape(mask)[1]
    if num_positions is not None and num_positions <= _ONE_HOT_MAX_POSITIONS:
        hits = xp.one_hot(rankings, list_size, dtype="bool")  # [B, S, n, L]
        times_placed = xp.any(xp.logical_and(hits, placed[..., None]), axis=-2)
        return xp.logical_and(mask[:, None, :], xp.logical_not(times_placed))
    # a scatter-add of the placed documents, O(B S L) memory
    batch, samples, size = xp.shape(rankings)
    batch_idx = xp.broadcast_to(xp.arange(batch, dtype="int32")[:, None, None],
                                (batch, samples, size))
    sample_idx = xp.broadcast_to(xp.arange(samples, dtype="int32")[None, :, None],
                                 (batch, samples, size))
    indices = xp.reshape(xp.stack([batch_idx, sample_idx, rankings], axis=-1), (-1, 3))
    counts = xp.scatter_update(xp.zeros((batch, samples, list_size), "int32"), indices,
                               xp.reshape(xp.cast(placed, "int32"), (-1,)), reduction="add")
    return xp.logical_and(mask[:, None, :], counts == 0)


def _position_terms(xp, logits, rankings, placed, left_out):
    """Eq. 12's per-position log-probabilities ``[B, S, n]`` (0 where not placed); the
    ``left_out`` ``[B, S, L]`` enter every denominator as one entry, their
    :func:`_shifted_logsumexp`."""
    excluded = _excluded_logit(xp, xp.dtype_name(logits))
    ranked_logits = xp.where(placed, xp.lists.batch_gather(logits, rankings), excluded)
    left_out_top, left_out_total = _shifted_logsumexp(
        xp, xp.where(left_out, logits[:, None, :], excluded))
    values = xp.concatenate([ranked_logits, left_out_top], axis=-1)  # [B, S, n + 1]
    log_weights = xp.concatenate([xp.zeros_like(ranked_logits), left_out_total], axis=-1)
    terms = _reverse_log_softmax(xp, values, log_weights, xp.shape(rankings)[-1])
    return xp.where(placed, terms, xp.zeros_like(ranked_logits))


def plackett_luce_log_prob(scores, rankings, mask=None, topn: Optional[int] = None,
                           temperature: float = 1.0):
    r""":math:`\log P(\pi)` of Eq. 12 for full or top-n rankings: the sum of
    :func:`plackett_luce_position_log_probs` over positions.

    Args:
      scores, rankings, mask, topn, temperature: as in the module docstring.

    Returns:
      ``[batch, num_samples]`` (or ``[batch]`` for ``[batch, n]`` rankings).
    """
    terms = plackett_luce_position_log_probs(scores, rankings, mask, topn, temperature)
    return arrays.namespace().sum(terms, axis=-1)
