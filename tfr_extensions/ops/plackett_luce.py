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

Numerics: every denominator is a log-sum-exp over the documents still to be
placed (plus one for the documents a top-n ranking leaves out), so scores of
any finite magnitude (|s| = 1e30, 3e38 in float32) give finite values and
gradients. For rankings of up to 256 positions each term is computed as
:math:`(f_j - m_j) - \log\sum_{b} e^{f_b - m_j}` with :math:`m_j` the largest
remaining logit, which is exact at any magnitude (two documents tied at 1e30
give :math:`-\log 2`, where ``f - reduce_logsumexp(f)`` gives 0) and whose
gradient is a plain softmax (exactly zero for a one-document list); longer
rankings use ``tf.math.cumulative_logsumexp`` (O(n) memory), whose terms have
an absolute error of about |s| times the machine epsilon. Excluded documents
(padded, already placed) enter those log-sum-exps with the finite constant
``dtype.min`` (:func:`_excluded_logit`) selected by ``tf.where``, so they
receive exactly zero gradient.

Randomness: uniform noise comes from ``tf.random.stateless_uniform`` as raw
uint32 bits, converted to floats here, so a seed gives the same rankings in
graph mode and under XLA (TF's float conversion differs between the two).

>>> scores = tf.constant([[2.0, 1.0, 0.0]])
>>> rankings = sample_rankings(scores, num_samples=2, seed=0)
>>> rankings.shape.as_list()
[1, 2, 3]
>>> probs = tf.exp(plackett_luce_log_prob(scores, tf.constant([[0, 1, 2]])))
>>> round(float(probs[0]), 4)  # e^2/(e^2+e+1) * e/(e+1)
0.4863
"""
from typing import Optional

import numpy as np
import tensorflow as tf

from tfr_extensions.ops import lists
from tfr_extensions.ops import screening
from tfr_extensions.ops import validation


def _excluded_logit(dtype: tf.DType) -> tf.Tensor:
    """The finite logit of a document outside a log-sum-exp: exp() of it minus
    any real score underflows to 0, and it never reaches arithmetic with a
    real score's gradient (it is chosen by ``tf.where``)."""
    return tf.constant(dtype.min, dtype)


def uniform_noise(shape, seed: tf.Tensor, dtype: tf.DType = tf.float32) -> tf.Tensor:
    """Uniform noise in the open interval (0, 1), identical in graph mode and XLA.

    Drawn as uint32 bits by a stateless op (TF's own float conversion differs
    between graph mode and XLA; the bits do not). float32 keeps the top 24
    bits, ``u = (b + 1/2) / 2^24``; float64 all 32, ``u = (b + 1/2) / 2^32``;
    so ``0 < u < 1`` exactly and ``log(u)``, ``log(-log(u))`` are finite.
    """
    bits = tf.random.stateless_uniform(shape, seed=seed, minval=None, maxval=None,
                                       dtype=tf.uint32, alg=lists.RNG_ALG)
    if dtype == tf.float64:
        return (tf.cast(bits, tf.float64) + 0.5) * (2.0 ** -32)
    top = tf.bitwise.right_shift(bits, tf.constant(8, tf.uint32))
    return tf.cast((tf.cast(top, tf.float32) + 0.5) * (2.0 ** -24), dtype)


def gumbel_noise(shape, seed: tf.Tensor, dtype: tf.DType = tf.float32) -> tf.Tensor:
    """Standard Gumbel noise :math:`g = -\\log(-\\log u)`, u from :func:`uniform_noise`."""
    return -tf.math.log(-tf.math.log(uniform_noise(shape, seed, dtype)))


# Up to this many positions, the denominators are log-sum-exps over a
# triangular mask (O(n^2) memory; gradients are plain softmaxes, exact at
# |x| = 1e30); beyond it, ``tf.math.cumulative_logsumexp`` (O(n) memory, but its
# log-space terms have absolute errors of about |score| * machine epsilon).
_PAIRWISE_MAX_POSITIONS = 256


def _shifted_logsumexp(x: tf.Tensor):
    r"""``(m, t)`` with :math:`\log\sum_i e^{x_i} = m + t` over the last axis
    (kept): ``m`` the (constant, stop-gradient) maximum and ``t`` the
    log-sum-exp of ``x - m``, in ``[0, log n]``. Not adding them keeps
    ``t`` exact at any magnitude of x, where ``m + t`` rounds to ``m`` once
    ``|m|`` passes about ``t / epsilon`` (``1e10 + log 2 == 1e10`` in float32)."""
    top = tf.stop_gradient(tf.reduce_max(x, axis=-1, keepdims=True))
    return top, tf.math.log(tf.reduce_sum(tf.exp(x - top), axis=-1, keepdims=True))


def _reverse_log_softmax(values: tf.Tensor, log_weights: tf.Tensor, count: int) -> tf.Tensor:
    r""":math:`v_j - \log\sum_{i \ge j} w_i e^{v_i}` for the first ``count``
    positions j of the last axis, ``w = exp(log_weights)``.

    For up to ``_PAIRWISE_MAX_POSITIONS`` entries: a masked log-sum-exp per
    position (the masked argument is the finite excluded logit), shifted by the
    largest remaining value :math:`m_j`, as :math:`(v_j - m_j) - \log\sum_{i \ge
    j} w_i e^{v_i - m_j}`: exact at any magnitude (scores tied at 1e30 give
    :math:`-\log 2`), and its derivative :math:`w_i e^{v_i - o_j}` is a plain
    softmax (a one-document list gets 0 exactly). Longer: ``tf.math.cumulative_logsumexp``.
    """
    size = values.shape[-1]
    if size is None or size > _PAIRWISE_MAX_POSITIONS:
        totals = tf.math.cumulative_logsumexp(values + log_weights, axis=-1, reverse=True)
        return (values - totals)[..., :count]
    later = np.arange(size)[None, :] >= np.arange(count)[:, None]  # [j, i]: i >= j
    masked = tf.where(tf.constant(later), values[..., None, :], _excluded_logit(values.dtype))
    top, log_total = _shifted_logsumexp(masked + log_weights[..., None, :])
    return (values[..., :count] - top[..., 0]) - log_total[..., 0]


def _static_list_size(scores: tf.Tensor) -> Optional[int]:
    return scores.shape[-1] if scores.shape.rank is not None else None


def sample_rankings(scores, mask=None, num_samples: int = 1, seed: lists.Seed = None,
                    temperature: float = 1.0, topn: Optional[int] = None) -> tf.Tensor:
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
        stateless seed tensor.
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
    scores, mask = screening.prepare_scores(scores, mask)
    order, _, _ = _gumbel_order(_logits(scores, temperature), mask, num_samples, seed, topn)
    return order


def _logits(scores: tf.Tensor, temperature: float) -> tf.Tensor:
    """f / T (no op at T = 1)."""
    return scores if temperature == 1.0 else scores / tf.constant(temperature, scores.dtype)


def _gumbel_order(logits, mask, num_samples, seed, topn):
    """The Gumbel-perturbed order ``[B, S, n]``, bool ``placed`` (a valid
    document at the position) and bool ``left_out`` ``[B, S, L]`` (valid
    documents beyond the first n), from one ``top_k`` (or a sort)."""
    seed_t = lists.fresh_seed() if seed is None else lists.seed_tensor(seed)
    shape = tf.concat([tf.shape(logits)[:1], [num_samples], tf.shape(logits)[1:]], axis=0)
    keys = logits[:, None, :] + gumbel_noise(shape, seed_t, logits.dtype)  # [B, S, L]
    # -inf is a sort key only: padded documents go after every valid one.
    keys = tf.where(mask[:, None, :], keys, tf.constant(-float("inf"), keys.dtype))
    list_size = _static_list_size(logits)
    if topn is None or (list_size is not None and topn >= list_size):
        order = tf.argsort(keys, axis=-1, direction="DESCENDING", stable=True)
        order = order if topn is None else order[..., :topn]
        return order, tf.gather(mask, order, batch_dims=1), tf.zeros_like(keys, tf.bool)
    if list_size is None:
        order = tf.argsort(keys, axis=-1, direction="DESCENDING", stable=True)[..., :topn]
        placed = tf.gather(mask, order, batch_dims=1)
        return order, placed, _left_out(mask, order, placed)
    values, order = tf.math.top_k(keys, k=topn, sorted=True)
    placed = values > -float("inf")
    # (Comparing ``keys`` with the n-th value would also find the left-out
    # documents, but XLA on CPU then runs much slower than with a one-hot.)
    return order, placed, _left_out(mask, order, placed)


def _with_sample_axis(rankings: tf.Tensor):
    """Rankings as ``[B, S, n]`` and whether the caller gave ``[B, n]``."""
    rankings = tf.cast(tf.convert_to_tensor(rankings), tf.int32)
    if rankings.shape.rank == 2:
        return rankings[:, None, :], True
    if rankings.shape.rank != 3:
        raise ValueError("`rankings` must have shape [batch, n] or [batch, num_samples, n]; "
                         f"got {rankings.shape}.")
    return rankings, False


def ranking_mask(rankings, mask) -> tf.Tensor:
    """Bool, shaped like ``rankings``: the position holds a valid document."""
    rankings, squeeze = _with_sample_axis(rankings)
    valid = tf.gather(tf.cast(mask, tf.bool), rankings, batch_dims=1)
    return valid[:, 0, :] if squeeze else valid


def plackett_luce_position_log_probs(scores, rankings, mask=None, topn: Optional[int] = None,
                                     temperature: float = 1.0) -> tf.Tensor:
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
    scores, mask = screening.prepare_scores(scores, mask)
    rankings, squeeze = _with_sample_axis(rankings)
    if topn is not None:
        rankings = rankings[..., :topn]
    placed = tf.gather(mask, rankings, batch_dims=1)  # [B, S, n]
    terms = _position_terms(_logits(scores, temperature), rankings, placed,
                            _left_out(mask, rankings, placed))
    return terms[:, 0, :] if squeeze else terms


def sample_rankings_with_log_probs(scores, mask=None, num_samples: int = 1,
                                   seed: lists.Seed = None, temperature: float = 1.0,
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
    scores, mask = screening.prepare_scores(scores, mask)
    logits = _logits(scores, temperature)
    order, placed, left_out = _gumbel_order(
        tf.stop_gradient(logits), mask, num_samples, seed, topn)
    return order, _position_terms(logits, order, placed, left_out)


# Up to this many ranked positions, documents left out of a ranking are found
# with a one-hot count (B*S*n*L memory, few ops); beyond it, with a scatter.
_ONE_HOT_MAX_POSITIONS = 64


def _left_out(mask, rankings, placed):
    """Bool ``[B, S, L]``: valid documents the rankings never place."""
    num_positions = rankings.shape[-1]
    if num_positions is not None and num_positions <= _ONE_HOT_MAX_POSITIONS:
        hits = tf.one_hot(rankings, tf.shape(mask)[1], on_value=True, off_value=False,
                          dtype=tf.bool)  # [B, S, n, L]
        times_placed = tf.reduce_any(tf.logical_and(hits, placed[..., None]), axis=-2)
        return tf.logical_and(mask[:, None, :], tf.logical_not(times_placed))
    shape = tf.shape(rankings)
    batch_idx = tf.broadcast_to(tf.range(shape[0])[:, None, None], shape)
    sample_idx = tf.broadcast_to(tf.range(shape[1])[None, :, None], shape)
    indices = tf.stack([batch_idx, sample_idx, rankings], axis=-1)  # [B, S, n, 3]
    counts_shape = tf.stack([shape[0], shape[1], tf.shape(mask)[1]])
    times_placed = tf.tensor_scatter_nd_add(
        tf.zeros(counts_shape, tf.int32), indices, tf.cast(placed, tf.int32))
    return tf.logical_and(mask[:, None, :], times_placed == 0)


def _position_terms(logits, rankings, placed, left_out):
    """Eq. 12's per-position log-probabilities ``[B, S, n]`` (0 where not placed);
    ``left_out`` ``[B, S, L]``: the valid documents the rankings never place,
    which stay in every denominator."""
    excluded = _excluded_logit(logits.dtype)
    ranked_logits = tf.where(placed, lists.batch_gather(logits, rankings), excluded)
    # The left-out documents enter as one more entry: their largest logit,
    # weighted by the log-sum-exp of the others relative to it (exact, see
    # _shifted_logsumexp). Without left-out documents that entry is the
    # excluded logit, whose exp vanishes next to any real logit.
    left_out_top, left_out_total = _shifted_logsumexp(
        tf.where(left_out, logits[:, None, :], excluded))
    values = tf.concat([ranked_logits, left_out_top], axis=-1)  # [B, S, n + 1]
    log_weights = tf.concat([tf.zeros_like(ranked_logits), left_out_total], axis=-1)
    count = rankings.shape[-1] if rankings.shape[-1] is not None else tf.shape(rankings)[-1]
    terms = _reverse_log_softmax(values, log_weights, count)
    return tf.where(placed, terms, tf.zeros_like(ranked_logits))


def plackett_luce_log_prob(scores, rankings, mask=None, topn: Optional[int] = None,
                           temperature: float = 1.0) -> tf.Tensor:
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
    return tf.reduce_sum(terms, axis=-1)
