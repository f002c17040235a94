r"""Plackett-Luce rankings: Gumbel sampling and exact log-probabilities, the
``keras.ops`` twin of :mod:`tfr_extensions.ops.plackett_luce` (the same
functions, arguments, shapes and padding rules).

Yu et al., "Diagnostic Evaluation of Policy-Gradient-Based Ranking", Sections
4.1-4.3. The Plackett-Luce (PL) model with scores :math:`f(x_i)` and temperature
:math:`T` gives a ranking :math:`\pi` of the valid documents the probability of
Eq. 12:

.. math::
    P(\pi) = \prod_{i=1}^{n} \frac{\exp(f(x_{\pi^{-1}(i)}) / T)}
                                 {\sum_{b \ge i} \exp(f(x_{\pi^{-1}(b)}) / T)},

the denominator running over the documents not yet placed (for a top-n
ranking, also those it never places).

* :func:`sample_rankings`: the Gumbel trick (Section 4.3.1), sorting
  :math:`f(x)/T + g` with i.i.d. :math:`g \sim \mathrm{Gumbel}(0, 1)`.
* :func:`plackett_luce_log_prob` (Eq. 12) and
  :func:`plackett_luce_position_log_probs` (its per-position terms, MDPRank's
  Eq. 7); :func:`sample_rankings_with_log_probs` both, for REINFORCE.

Rankings are int32 ``[batch, num_samples, n]``: ``rankings[b, k, i]`` is the
document at 0-based position ``i`` of sample ``k``; trailing positions of lists
with fewer than ``n`` valid documents hold padded documents
(:func:`ranking_mask`). Every denominator is a log-sum-exp shifted by the
largest remaining logit (exact at any finite magnitude; excluded documents
enter with the finite logit ``dtype.min`` selected by ``where``, so they get
exactly zero gradient); rankings longer than 256 positions use a reverse
cumulative log-sum-exp (``ops.associative_scan`` of ``logaddexp``).

Randomness (:mod:`tfr_extensions.keras_ops.random`): uniform noise is drawn as
integers (:func:`~tfr_extensions.keras_ops.random.random_bits`) and mapped into
the open interval (0, 1),
so the Gumbel noise is always finite. The streams differ from TensorFlow's (and
between backends): a seed reproduces draws on one backend.

>>> from keras import ops
>>> rankings = sample_rankings([[2.0, 1.0, 0.0]], num_samples=2, seed=0)
>>> tuple(rankings.shape)
(1, 2, 3)
>>> probs = ops.exp(plackett_luce_log_prob([[2.0, 1.0, 0.0]], [[0, 1, 2]]))
>>> round(float(probs[0]), 4)  # e^2/(e^2+e+1) * e/(e+1)
0.4863
"""
from typing import Optional

import numpy as np

from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics
from tfr_extensions.keras_ops import random as keras_random
from tfr_extensions.keras_ops import screening
from tfr_extensions.ops import validation

# Rankings up to this many positions use the pairwise (triangular-mask)
# log-sum-exps, as in tfr_extensions.ops.plackett_luce.
_PAIRWISE_MAX_POSITIONS = 256
# Up to this many positions, left-out documents come from a one-hot count.
_ONE_HOT_MAX_POSITIONS = 64


def _excluded_logit(dtype: str):
    """The finite logit of a document outside a log-sum-exp (``dtype.min``), a 0-d
    tensor of ``dtype`` (a Python float would be cast to float32 by PyTorch's
    ``where``, where float64's minimum is -inf)."""
    return ops.convert_to_tensor(np.asarray(np.finfo(dtype).min, dtype))


def uniform_noise(shape, seed, dtype: str = "float32"):
    """Uniform noise in the open interval (0, 1).

    Drawn as integers ``b``: float32 from 24 bits, ``u = (b + 1/2) / 2^24``;
    float64 from 30, ``u = (b + 1/2) / 2^30``; so ``0 < u < 1`` exactly and
    ``log(u)``, ``log(-log(u))`` are finite.
    """
    bits = 30 if dtype == "float64" else 24
    draws = keras_random.random_bits(shape, seed, bits)
    return (ops.cast(draws, dtype) + 0.5) * (2.0 ** -bits)


def gumbel_noise(shape, seed, dtype: str = "float32"):
    """Standard Gumbel noise :math:`g = -\\log(-\\log u)`, u from :func:`uniform_noise`."""
    return -ops.log(-ops.log(uniform_noise(shape, seed, dtype)))


def _logits(scores, temperature: float):
    """f / T (no op at T = 1)."""
    return scores if temperature == 1.0 else scores / temperature


def _shifted_logsumexp(x):
    r"""``(m, t)`` with :math:`\log\sum_i e^{x_i} = m + t` over the last axis (kept):
    ``m`` the stop-gradient maximum and ``t`` the log-sum-exp of ``x - m``."""
    if x.shape[-1] == 0:  # no document: the excluded logit (ops.max has no identity)
        top = numerics.full(tuple(ops.shape(x)[:-1]) + (1,),
                             float(np.finfo(lists.dtype_name(x)).min), lists.dtype_name(x))
    else:  # (amax: keras's torch max() mishandles an empty batch)
        top = ops.stop_gradient(ops.amax(x, axis=-1, keepdims=True))
    return top, ops.log(ops.sum(ops.exp(x - top), axis=-1, keepdims=True))


def _reverse_log_softmax(values, log_weights, count: int):
    r""":math:`v_j - \log\sum_{i \ge j} w_i e^{v_i}` for the first ``count``
    positions j of the last axis, ``w = exp(log_weights)``: a masked log-sum-exp
    per position shifted by the largest remaining value (up to
    ``_PAIRWISE_MAX_POSITIONS``), else a reverse cumulative log-sum-exp."""
    size = values.shape[-1]
    if size > _PAIRWISE_MAX_POSITIONS:
        totals = ops.associative_scan(ops.logaddexp, values + log_weights, reverse=True,
                                      axis=len(values.shape) - 1)  # JAX: no negative axis
        return (values - totals)[..., :count]
    later = np.arange(size)[None, :] >= np.arange(count)[:, None]  # [j, i]: i >= j
    masked = ops.where(later, values[..., None, :], _excluded_logit(lists.dtype_name(values)))
    top, log_total = _shifted_logsumexp(masked + log_weights[..., None, :])
    return (values[..., :count] - top[..., 0]) - log_total[..., 0]


def _gumbel_order(logits, mask, num_samples: int, seed, topn: Optional[int]):
    """The Gumbel-perturbed order ``[B, S, n]``, bool ``placed`` (a valid document
    at the position) and bool ``left_out`` ``[B, S, L]`` (valid documents beyond
    the first n), from one ``top_k`` (or an argsort)."""
    batch, list_size = ops.shape(logits)[0], logits.shape[-1]
    shape = (batch, num_samples, list_size)
    keys = logits[:, None, :] + gumbel_noise(shape, seed, lists.dtype_name(logits))
    # -inf is a sort key only: padded documents go after every valid one.
    keys = ops.where(mask[:, None, :], keys, float("-inf"))
    if topn is None or topn >= list_size:
        order = ops.argsort(-keys, axis=-1)  # stable: padded documents in index order
        order = ops.cast(order if topn is None else order[..., :topn], "int32")
        return order, lists.batch_gather(mask, order), ops.zeros_like(keys, dtype="bool")
    values, order = ops.top_k(keys, topn, sorted=True)
    order = ops.cast(order, "int32")
    placed = values > float("-inf")
    return order, placed, _left_out(mask, order, placed)


def sample_rankings(scores, mask=None, num_samples: int = 1, seed=None,
                    temperature: float = 1.0, topn: Optional[int] = None):
    r"""Plackett-Luce rankings by the Gumbel trick (Section 4.3.1): sorts
    :math:`f(x)/T + g` in decreasing order, padded documents last.

    Args:
      scores: float ``[batch, list_size]``, :math:`f(x)`.
      mask: optional bool ``[batch, list_size]``, True for valid documents.
      num_samples: rankings per list, an int >= 1.
      seed: None (fresh randomness), an int, a pair of ints or a seed tensor
        ``[2]`` (:mod:`tfr_extensions.keras_ops.random`).
      temperature: :math:`T > 0`.
      topn: sample only the first ``topn`` positions (None = full rankings).

    Returns:
      int32 ``[batch, num_samples, n]`` with ``n = min(topn, list_size)``.

    Raises:
      ValueError: for ``num_samples < 1``, ``temperature <= 0`` or a bad ``topn``.
    """
    num_samples = validation.validate_int(num_samples, "num_samples", minimum=1)
    temperature = validation.validate_positive(temperature, "temperature")
    topn = validation.validate_topn(topn)
    scores, mask = screening.prepare_scores(scores, mask)
    order, _, _ = _gumbel_order(_logits(scores, temperature), mask, num_samples, seed, topn)
    return order


def _with_sample_axis(rankings):
    """Rankings as ``[B, S, n]`` and whether the caller gave ``[B, n]``."""
    rankings = ops.cast(ops.convert_to_tensor(rankings), "int32")
    if len(rankings.shape) == 2:
        return rankings[:, None, :], True
    if len(rankings.shape) != 3:
        raise ValueError("`rankings` must have shape [batch, n] or [batch, num_samples, n]; "
                         f"got {tuple(rankings.shape)}.")
    return rankings, False


def ranking_mask(rankings, mask):
    """Bool, shaped like ``rankings``: the position holds a valid document."""
    rankings, squeeze = _with_sample_axis(rankings)
    valid = lists.batch_gather(ops.cast(mask, "bool"), rankings)
    return valid[:, 0, :] if squeeze else valid


def _left_out(mask, rankings, placed):
    """Bool ``[B, S, L]``: valid documents the rankings never place."""
    list_size = mask.shape[-1]
    if rankings.shape[-1] <= _ONE_HOT_MAX_POSITIONS:
        hits = ops.one_hot(rankings, list_size, dtype="bool")  # [B, S, n, L]
        times_placed = ops.any(ops.logical_and(hits, placed[..., None]), axis=-2)
    else:  # a scatter-add of the placed documents, O(B S L) memory
        batch, samples, size = (ops.shape(rankings)[i] for i in range(3))
        batch_idx = ops.broadcast_to(ops.arange(batch, dtype="int32")[:, None, None],
                                     (batch, samples, size))
        sample_idx = ops.broadcast_to(ops.arange(samples, dtype="int32")[None, :, None],
                                      (batch, samples, size))
        indices = ops.reshape(ops.stack([batch_idx, sample_idx, rankings], axis=-1), (-1, 3))
        counts = ops.scatter_update(ops.zeros((batch, samples, list_size), "int32"), indices,
                                    ops.reshape(ops.cast(placed, "int32"), (-1,)),
                                    reduction="add")
        times_placed = counts > 0
    return ops.logical_and(mask[:, None, :], ops.logical_not(times_placed))


def _position_terms(logits, rankings, placed, left_out):
    """Eq. 12's per-position log-probabilities ``[B, S, n]`` (0 where not placed);
    the left-out documents stay in every denominator, as one more entry: their
    largest logit weighted by the log-sum-exp of the others relative to it."""
    excluded = _excluded_logit(lists.dtype_name(logits))
    ranked_logits = ops.where(placed, lists.batch_gather(logits, rankings), excluded)
    left_out_top, left_out_total = _shifted_logsumexp(
        ops.where(left_out, logits[:, None, :], excluded))
    values = ops.concatenate([ranked_logits, left_out_top], axis=-1)  # [B, S, n + 1]
    log_weights = ops.concatenate([ops.zeros_like(ranked_logits), left_out_total], axis=-1)
    terms = _reverse_log_softmax(values, log_weights, rankings.shape[-1])
    return ops.where(placed, terms, ops.zeros_like(terms))


def plackett_luce_position_log_probs(scores, rankings, mask=None, topn: Optional[int] = None,
                                     temperature: float = 1.0):
    r"""Per-position terms of Eq. 12,
    :math:`\log P(a_i | s_i) = f_{\pi^{-1}(i)}/T - \log\sum_{b \ge i} \exp(f_{\pi^{-1}(b)}/T)`
    (MDPRank's action log-probabilities, Eq. 7); 0 at positions holding a padded
    document and at positions ``>= topn``.

    Args:
      scores: float ``[batch, list_size]``.
      rankings: int ``[batch, num_samples, n]`` or ``[batch, n]`` document indices.
      mask: optional bool ``[batch, list_size]``.
      topn: use only the first ``topn`` positions (None = all ``n``).
      temperature: :math:`T > 0`.

    Returns:
      ``[batch, num_samples, min(n, topn)]`` (or without the sample axis, as given).
    """
    topn = validation.validate_topn(topn)
    temperature = validation.validate_positive(temperature, "temperature")
    scores, mask = screening.prepare_scores(scores, mask)
    rankings, squeeze = _with_sample_axis(rankings)
    if topn is not None:
        rankings = rankings[..., :topn]
    placed = lists.batch_gather(mask, rankings)
    terms = _position_terms(_logits(scores, temperature), rankings, placed,
                            _left_out(mask, rankings, placed))
    return terms[:, 0, :] if squeeze else terms


def sample_rankings_with_log_probs(scores, mask=None, num_samples: int = 1, seed=None,
                                   temperature: float = 1.0, topn: Optional[int] = None):
    """:func:`sample_rankings` and :func:`plackett_luce_position_log_probs` of
    those rankings in one pass (what a REINFORCE loss needs): the rankings carry
    no gradient, the log-probabilities are differentiable in ``scores``.

    Returns:
      ``(rankings, log_probs)``: int32 and float ``[batch, num_samples, n]``.
    """
    num_samples = validation.validate_int(num_samples, "num_samples", minimum=1)
    temperature = validation.validate_positive(temperature, "temperature")
    topn = validation.validate_topn(topn)
    scores, mask = screening.prepare_scores(scores, mask)
    logits = _logits(scores, temperature)
    order, placed, left_out = _gumbel_order(
        ops.stop_gradient(logits), mask, num_samples, seed, topn)
    return order, _position_terms(logits, order, placed, left_out)


def plackett_luce_log_prob(scores, rankings, mask=None, topn: Optional[int] = None,
                           temperature: float = 1.0):
    r""":math:`\log P(\pi)` of Eq. 12 for full or top-n rankings: the sum of
    :func:`plackett_luce_position_log_probs` over positions.

    Returns:
      ``[batch, num_samples]`` (or ``[batch]`` for ``[batch, n]`` rankings).
    """
    terms = plackett_luce_position_log_probs(scores, rankings, mask, topn, temperature)
    return ops.sum(terms, axis=-1)
