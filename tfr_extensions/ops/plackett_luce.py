r"""Plackett-Luce rankings: Gumbel sampling and exact log-probabilities.

Yu et al., "Diagnostic Evaluation of Policy-Gradient-Based Ranking"
(``policy-gradient-ranking-diagnostic.txt``), Sections 4.1-4.3. The
Plackett-Luce (PL) model with scores :math:`f(x_i)` (``scores``) and temperature
:math:`T` (``temperature``) gives a ranking :math:`\pi` of the valid documents
the probability of Eq. 12:

.. math::
    P(\pi) = \prod_{i=1}^{n} \frac{\exp(f(x_{\pi^{-1}(i)}) / T)}
                                 {\sum_{b \ge i} \exp(f(x_{\pi^{-1}(b)}) / T)},

where the denominator runs over the documents not yet placed. ``n`` is the
list's number of valid documents for a full ranking, or ``topn`` for a top-n
ranking (then the remaining set at position i also holds the documents the
ranking never places).

* :func:`sample_rankings` draws rankings by the Gumbel trick (Section 4.3.1):
  sorting :math:`f(x)/T + g` with i.i.d. :math:`g \sim \mathrm{Gumbel}(0, 1)`
  gives an exact PL sample in O(L log L), or O(L log n) for a top-n ranking.
* :func:`plackett_luce_log_prob` evaluates :math:`\log P(\pi)` (Eq. 12; also
  ListMLE's Eq. 3 and the listwise discriminator's Eq. 14), and
  :func:`plackett_luce_position_log_probs` its per-position terms (MDPRank's
  action log-probabilities, Eq. 7).
* :func:`sample_rankings_with_log_probs` does both in one pass, for REINFORCE.

Rankings are int32 ``[batch, num_samples, n]`` index tensors: ``rankings[b, k,
i]`` is the index of the document at 0-based position ``i`` of sample ``k``.
When a list has fewer valid documents than ``n``, the trailing positions hold
padded documents (never before a valid one); :func:`ranking_mask` tells which
positions are real. An all-padding list gives a ranking of padded documents
only, and log-probability 0 (the empty product).

The math is written once against the array namespace (:mod:`tfr_extensions.arrays`):
TensorFlow's own ops on Keras 2, TF-Ranking and Keras 3's TensorFlow backend,
``keras.ops`` on JAX and PyTorch. Two pieces differ per framework: the uniform noise
(``xp.uniform_noise``) and the reverse cumulative log-sum-exp of long rankings
(``xp.cumulative_logsumexp``).

Numerics: every denominator is a log-sum-exp over the documents still to be
placed (plus one for the documents a top-n ranking leaves out), so scores of
any finite magnitude (|s| = 1e30, 3e38 in float32) give finite values and
gradients. For rankings of up to 256 positions each term is computed as
:math:`(f_j - m_j) - \log\sum_{b} e^{f_b - m_j}` with :math:`m_j` the largest
remaining logit, which is exact at any magnitude (two documents tied at 1e30
give :math:`-\log 2`, where ``f - reduce_logsumexp(f)`` gives 0) and whose
gradient is a plain softmax (exactly zero for a one-document list); longer
rankings use a reverse cumulative log-sum-exp (O(n) memory:
``tf.math.cumulative_logsumexp``, or ``keras.ops.associative_scan`` of
``logaddexp``), whose terms have an absolute error of about |s| times the machine
epsilon. Excluded documents (padded, already placed) enter those log-sum-exps with
the finite constant ``dtype.min`` (:func:`_excluded_logit`) selected by ``where``,
so they receive exactly zero gradient.

Randomness: uniform noise is drawn as integers and mapped into the open interval
(0, 1) (:func:`uniform_noise`), so the Gumbel noise is always finite. On TensorFlow
the bits come from ``tf.random.stateless_uniform`` as raw uint32, so a seed gives the
same rankings in graph mode and under XLA (TF's float conversion differs between the
two); on JAX and PyTorch from :func:`tfr_extensions.keras_ops.random.random_bits`. The
streams differ between frameworks (and between Keras backends): a seed reproduces
draws on one of them.

>>> import math
>>> rankings = sample_rankings([[2.0, 1.0, 0.0]], num_samples=2, seed=0)
>>> tuple(rankings.shape)
(1, 2, 3)
>>> log_prob = plackett_luce_log_prob([[2.0, 1.0, 0.0]], [[0, 1, 2]])
>>> round(math.exp(float(log_prob[0])), 4)  # e^2/(e^2+e+1) * e/(e+1)
0.4863
"""
from typing import Any, Optional

import numpy as np

from tfr_extensions import arrays
from tfr_extensions.ops import validation

#: a seed: None (fresh randomness), an int, a pair of ints or a seed tensor ``[2]``
Seed = Any

# Up to this many positions, the denominators are log-sum-exps over a
# triangular mask (O(n^2) memory; gradients are plain softmaxes, exact at
# |x| = 1e30); beyond it, a reverse cumulative log-sum-exp (O(n) memory, but its
# log-space terms have absolute errors of about |score| * machine epsilon).
_PAIRWISE_MAX_POSITIONS = 256

# Up to this many ranked positions, documents left out of a ranking are found
# with a one-hot count (B*S*n*L memory, few ops); beyond it, with a scatter.
_ONE_HOT_MAX_POSITIONS = 64


def _dtype_name(dtype) -> str:
    """``"float32"`` for a dtype name, a ``tf.DType`` or a NumPy dtype."""
    return dtype if isinstance(dtype, str) else getattr(dtype, "name", None) or str(dtype)


def _excluded_logit(xp, dtype: str):
    """The finite logit of a document outside a log-sum-exp (``dtype.min``), a 0-d
    tensor of ``dtype``: exp() of it minus any real score underflows to 0, and it
    never reaches arithmetic with a real score's gradient (it is chosen by
    ``where``). (A Python float would be cast to float32 by PyTorch's ``where``,
    where float64's minimum is -inf.)"""
    return xp.constant(float(np.finfo(dtype).min), dtype)


def uniform_noise(shape, seed: Seed, dtype="float32"):
    """Uniform noise in the open interval (0, 1), drawn as integers ``b``
    (``xp.uniform_noise``).

    TensorFlow: uint32 bits of a stateless op (identical in graph mode and XLA);
    float32 keeps the top 24 bits, ``u = (b + 1/2) / 2^24``, float64 all 32,
    ``u = (b + 1/2) / 2^32``. JAX, PyTorch: float32 from 24 bits, float64 from 30.
    So ``0 < u < 1`` exactly and ``log(u)``, ``log(-log(u))`` are finite.

    >>> u = uniform_noise((1000,), 4)
    >>> bool(arrays.namespace().all((u > 0.0) & (u < 1.0)))
    True
    """
    return arrays.namespace().uniform_noise(shape, seed, _dtype_name(dtype))


def gumbel_noise(shape, seed: Seed, dtype="float32"):
    """Standard Gumbel noise :math:`g = -\\log(-\\log u)`, u from :func:`uniform_noise`."""
    xp = arrays.namespace()
    return -xp.log(-xp.log(uniform_noise(shape, seed, dtype)))


def _shifted_logsumexp(xp, x):
    r"""``(m, t)`` with :math:`\log\sum_i e^{x_i} = m + t` over the last axis
    (kept): ``m`` the (constant, stop-gradient) maximum and ``t`` the
    log-sum-exp of ``x - m``, in ``[0, log n]``. Not adding them keeps
    ``t`` exact at any magnitude of x, where ``m + t`` rounds to ``m`` once
    ``|m|`` passes about ``t / epsilon`` (``1e10 + log 2 == 1e10`` in float32)."""
    if x.shape[-1] == 0:  # no document: the excluded logit (a max has no identity)
        dtype = xp.dtype_name(x)
        top = xp.full(tuple(xp.shape(x)[:-1]) + (1,), float(np.finfo(dtype).min), dtype)
    else:  # (amax: keras's torch max() mishandles an empty batch)
        top = xp.stop_gradient(xp.amax(x, axis=-1, keepdims=True))
    return top, xp.log(xp.sum(xp.exp(x - top), axis=-1, keepdims=True))


def _reverse_log_softmax(xp, values, log_weights, count):
    r""":math:`v_j - \log\sum_{i \ge j} w_i e^{v_i}` for the first ``count``
    positions j of the last axis, ``w = exp(log_weights)``.

    For up to ``_PAIRWISE_MAX_POSITIONS`` entries: a masked log-sum-exp per position (the
    masked argument is the finite excluded logit), shifted by the largest remaining value
    :math:`m_j`, as :math:`(v_j - m_j) - \log\sum_{i \ge j} w_i e^{v_i - m_j}`: exact at any
    magnitude (scores tied at 1e30 give :math:`-\log 2`), and its derivative
    :math:`w_i e^{v_i - o_j}` is a plain softmax (a one-document list gets 0 exactly).
    Longer (or of unknown length): ``xp.cumulative_logsumexp``.
    """
    size = values.shape[-1]
    if size is None or size > _PAIRWISE_MAX_POSITIONS:
        totals = xp.cumulative_logsumexp(values + log_weights, axis=-1, reverse=True)
        return (values - totals)[..., :count]
    later = np.arange(size)[None, :] >= np.arange(count)[:, None]  # [j, i]: i >= j
    masked = xp.where(xp.convert_to_tensor(later), values[..., None, :],
                      _excluded_logit(xp, xp.dtype_name(values)))
    top, log_total = _shifted_logsumexp(xp, masked + log_weights[..., None, :])
    return (values[..., :count] - top[..., 0]) - log_total[..., 0]


def sample_rankings(scores, mask=None, num_samples: int = 1, seed: Seed = None,
                    temperature: float = 1.0, topn: Optional[int] = None):
    r"""Plackett-Luce rankings by the Gumbel trick (Section 4.3.1).

    Sorts :math:`f(x)/T + g`, :math:`g \sim \mathrm{Gumbel}(0,1)` i.i.d. per
    document and sample, in decreasing order: the result is distributed as
    Eq. 12's PL-sampling (pick the next document with probability
    :math:`\propto \exp(f/T)` among the remaining ones). Padded documents sort
    after every valid one.

    Args:
      scores: float ``[batch, list_size]``, :math:`f(x)`.
      mask: optional bool ``[batch, list_size]``, True for valid documents.
      num_samples: rankings per list, an int >= 1.
      seed: None (fresh randomness), an int, a pair of ints or an int32 ``[2]``
        seed tensor (a stateless seed on TensorFlow;
        :mod:`tfr_extensions.keras_ops.random` on JAX and PyTorch).
      temperature: :math:`T > 0`.
      topn: sample only the first ``topn`` positions (None = full rankings).
        Lists shorter than ``topn`` fill the trailing positions with padded
        documents (see :func:`ranking_mask`).

    Returns:
      int32 ``[batch, num_samples, n]`` with ``n = min(topn, list_size)``.

    Raises:
      ValueError: for ``num_samples < 1``, ``temperature <= 0`` or a bad ``topn``.
    """
    num_samples = validation.validate_int(num_samples, "num_samples", minimum=1)
    temperature = validation.validate_positive(temperature, "temperature")
    topn = validation.validate_topn(topn)
    xp = arrays.namespace()
    scores, mask = xp.screening.prepare_scores(scores, mask)
    order, _, _ = _gumbel_order(xp, _logits(xp, scores, temperature), mask, num_samples, seed,
                                topn)
    return order


def _logits(xp, scores, temperature: float):
    """f / T (no op at T = 1)."""
    return scores if temperature == 1.0 else scores / xp.constant(temperature,
                                                                   xp.dtype_name(scores))


def _gumbel_order(xp, logits, mask, num_samples, seed, topn):
    """The Gumbel-perturbed order ``[B, S, n]``, bool ``placed`` (a valid
    document at the position) and bool ``left_out`` ``[B, S, L]`` (valid
    documents beyond the first n), from one ``top_k`` (or a sort)."""
    dimensions = xp.shape(logits)  # (a dimension TensorFlow does not know: a tensor)
    shape = (dimensions[0], num_samples, dimensions[1])
    keys = logits[:, None, :] + gumbel_noise(shape, seed, xp.dtype_name(logits))  # [B, S, L]
    # -inf is a sort key only: padded documents go after every valid one.
    keys = xp.where(mask[:, None, :], keys, xp.constant(-float("inf"), xp.dtype_name(keys)))
    list_size = logits.shape[-1]
    if topn is None or (list_size is not None and topn >= list_size):
        order = xp.cast(xp.argsort(-keys, axis=-1), "int32")  # stable: padding in index order
        order = order if topn is None else order[..., :topn]
        return order, xp.lists.batch_gather(mask, order), xp.zeros_like(keys, dtype="bool")
    if list_size is None:  # (TensorFlow only: keras.ops shapes are static)
        order = xp.cast(xp.argsort(-keys, axis=-1), "int32")[..., :topn]
        placed = xp.lists.batch_gather(mask, order)
        return order, placed, _left_out(xp, mask, order, placed)
    values, order = xp.top_k(keys, topn, sorted=True)
    order = xp.cast(order, "int32")
    placed = values > -float("inf")
    # (Comparing ``keys`` with the n-th value would also find the left-out
    # documents, but XLA on CPU then runs much slower than with a one-hot.)
    return order, placed, _left_out(xp, mask, order, placed)


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
    r"""Per-position terms of Eq. 12:
    :math:`\log P(a_i | s_i) = f_{\pi^{-1}(i)}/T - \log\sum_{b \ge i} \exp(f_{\pi^{-1}(b)}/T)`.

    These are MDPRank's action log-probabilities (Eq. 7). The sum over
    ``b >= i`` covers every valid document not placed before position i,
    including those the (top-n) ranking leaves out. Positions holding a padded
    document, and positions ``>= topn``, contribute 0.

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
    """:func:`sample_rankings` and :func:`plackett_luce_position_log_probs` of
    those rankings in one pass (what a REINFORCE loss needs).

    The rankings carry no gradient; the log-probabilities are differentiable
    in ``scores``. Same arguments, validation and padding rules as
    :func:`sample_rankings`.

    Returns:
      ``(rankings, log_probs)``: int32 and float ``[batch, num_samples, n]``.
    """
    num_samples = validation.validate_int(num_samples, "num_samples", minimum=1)
    temperature = validation.validate_positive(temperature, "temperature")
    topn = validation.validate_topn(topn)
    xp = arrays.namespace()
    scores, mask = xp.screening.prepare_scores(scores, mask)
    logits = _logits(xp, scores, temperature)
    order, placed, left_out = _gumbel_order(
        xp, xp.stop_gradient(logits), mask, num_samples, seed, topn)
    return order, _position_terms(xp, logits, order, placed, left_out)


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
    """Eq. 12's per-position log-probabilities ``[B, S, n]`` (0 where not placed);
    ``left_out`` ``[B, S, L]``: the valid documents the rankings never place,
    which stay in every denominator."""
    excluded = _excluded_logit(xp, xp.dtype_name(logits))
    ranked_logits = xp.where(placed, xp.lists.batch_gather(logits, rankings), excluded)
    # The left-out documents enter as one more entry: their largest logit,
    # weighted by the log-sum-exp of the others relative to it (exact, see
    # _shifted_logsumexp). Without left-out documents that entry is the
    # excluded logit, whose exp vanishes next to any real logit.
    left_out_top, left_out_total = _shifted_logsumexp(
        xp, xp.where(left_out, logits[:, None, :], excluded))
    values = xp.concatenate([ranked_logits, left_out_top], axis=-1)  # [B, S, n + 1]
    log_weights = xp.concatenate([xp.zeros_like(ranked_logits), left_out_total], axis=-1)
    terms = _reverse_log_softmax(xp, values, log_weights, xp.shape(rankings)[-1])
    return xp.where(placed, terms, xp.zeros_like(ranked_logits))


def plackett_luce_log_prob(scores, rankings, mask=None, topn: Optional[int] = None,
                           temperature: float = 1.0):
    r""":math:`\log P(\pi)` of Eq. 12 for full or top-n rankings.

    The sum of :func:`plackett_luce_position_log_probs` over positions. Over
    all permutations of a list, ``exp`` of it sums to 1; over all top-n
    prefixes, too.

    Args:
      scores: float ``[batch, list_size]``.
      rankings: int ``[batch, num_samples, n]`` or ``[batch, n]``.
      mask: optional bool ``[batch, list_size]``.
      topn: use only the first ``topn`` positions (None = all ``n``).
      temperature: :math:`T > 0`.

    Returns:
      ``[batch, num_samples]`` (or ``[batch]`` for ``[batch, n]`` rankings).
    """
    terms = plackett_luce_position_log_probs(scores, rankings, mask, topn, temperature)
    return arrays.namespace().sum(terms, axis=-1)
