r"""The twin-sigmoid and the exact, differentiable ranks built on it.

Yu, "Optimize What You Evaluate With: A Simple Yet Effective Framework For
Direct Optimization Of IR Metrics" (``twin-sigmoid-direct-metric-optimization.txt``),
Sections 4.2 and 5, Appendix A-B.

The twin-sigmoid :math:`\sigma^+` outputs the hard step (its forward sigmoid
with :math:`\alpha_f \to \infty`: 0 for z < 0, 1/2 at 0, 1 for z > 0) and
back-propagates the derivative of a soft sigmoid :math:`\sigma_b(z) =
1/(1+e^{-\alpha_b z})`, in one of three variants (``gradient``):

* ``"type1"`` (Eq. 11): :math:`\alpha_b \sigma_b(z)(1-\sigma_b(z))`;
* ``"type2"`` (Eq. 20): the same times :math:`u_{ij}`, the sign of the label
  difference :math:`y^*_i - y^*_j` (``label_signs``);
* ``"type3"`` (Eq. 21): :math:`2\alpha_b(1-\sigma_b(z))` if :math:`u_{ij}=1`,
  0 if :math:`u_{ij}=0`, :math:`-2\alpha_b\sigma_b(z)` if :math:`u_{ij}=-1`.

Every derivative is finite and bounded by :math:`2\alpha_b` for any z.

Ranks (Eq. 12): :math:`r_i = 1 + \sum_{j \ne i} (1 - \sigma^+(s_i - s_j))`: their
forward value is a sort or a count; only the backward pass forms the pairwise
derivatives (Eq. 17-18 / 27-28), in one pass that XLA fuses into a loop over
blocks of ``lists.PAIR_BLOCK`` columns (never stored). In a graph it all runs
under XLA (:func:`_under_xla`): in a caller's XLA program, or as a program of its
own, with the lists padded to :func:`bucket_size`; eagerly, op by op
(``docs/notes/twin_sigmoid_speed.md``).
"""
import math
from typing import Optional

import tensorflow as tf

from tfr_extensions.ops import lists
from tfr_extensions.ops import rank_metrics
from tfr_extensions.ops import screening
from tfr_extensions.ops import sorting
from tfr_extensions.ops import validation
from tfr_extensions.ops.vocabulary import GRADIENT_TYPES


def twin_sigmoid_derivative(z, alpha_b: float = 1.0, gradient: str = "type1",
                            label_signs=None) -> tf.Tensor:
    """The back-propagated derivative d sigma+ / dz of Eq. 11, 20 or 21, shaped like
    ``z`` (a score difference); ``label_signs`` (``u_ij`` in {-1, 0, 1},
    broadcastable to ``z``) is required for type2 and type3."""
    alpha = tf.cast(alpha_b, z.dtype)
    if gradient == "type1":
        return alpha * tf.sigmoid(alpha * z) * tf.sigmoid(-alpha * z)
    u = tf.cast(label_signs, z.dtype)
    if gradient == "type2":
        return u * alpha * tf.sigmoid(alpha * z) * tf.sigmoid(-alpha * z)
    # type3, Eq. 21
    up = 2.0 * alpha * tf.sigmoid(-alpha * z)
    down = -2.0 * alpha * tf.sigmoid(alpha * z)
    return tf.where(u > 0, up, tf.where(u < 0, down, tf.constant(0, z.dtype)))


def _validate(alpha_b, gradient, label_signs) -> float:
    validation.validate_choice(gradient, GRADIENT_TYPES, "gradient")
    if gradient != "type1" and label_signs is None:
        raise ValueError(f"`label_signs` (or `labels`) is required for gradient={gradient!r}.")
    return validation.validate_positive(alpha_b, "alpha_b")


def twin_sigmoid(x, alpha_b: float = 1.0, gradient: str = "type1",
                 label_signs=None) -> tf.Tensor:
    r"""Element-wise twin-sigmoid :math:`\sigma^+(x)` (Eq. 11, 20, 21).

    Forward: 0 for x < 0, 1/2 at x = 0, 1 for x > 0. Backward: see
    :func:`twin_sigmoid_derivative`.

    >>> x = tf.constant([-2.0, 0.0, 3.0])
    >>> twin_sigmoid(x).numpy().tolist()
    [0.0, 0.5, 1.0]
    """
    alpha_b = _validate(alpha_b, gradient, label_signs)
    x = tf.convert_to_tensor(x)

    @tf.custom_gradient
    def _step(v):
        out = tf.where(v > 0, tf.ones_like(v),
                       tf.where(v < 0, tf.zeros_like(v), tf.fill(tf.shape(v), tf.constant(0.5, v.dtype))))

        def grad(upstream):
            return upstream * twin_sigmoid_derivative(v, alpha_b, gradient, label_signs)

        return out, grad

    return _step(x)


# Padded documents enter the tanh form at least this far (in units of alpha_b * s / 2)
# below the lowest valid score (and its magnitude, _far_below), where tanh is exactly
# -1 or 1: their pairs get derivative 0 without a [B, L, L] mask, and no inf - inf.
_PADDED_SCORE_GAP = 1e3


def _far_below(values: tf.Tensor, gap: float) -> tf.Tensor:
    """``values - gap - |values|`` (at least ``dtype.min``): ``gap`` below also where
    ``gap`` is below their rounding unit (``-5e29 - 1e3 == -5e29`` in float32)."""
    return tf.maximum(values - gap - tf.abs(values), values.dtype.min)


def _below_valid(values: tf.Tensor, mask: tf.Tensor, gap: float) -> tf.Tensor:
    """``values`` with padded entries replaced by a value at least ``gap`` below
    the lowest valid value (:func:`_far_below`)."""
    big = tf.constant(float("inf"), values.dtype)
    lowest = tf.reduce_min(tf.where(mask, values, big), axis=-1, keepdims=True)
    lowest = tf.where(tf.math.is_finite(lowest), lowest, tf.constant(0, lowest.dtype))
    return tf.where(mask, values, _far_below(lowest, gap))


#: Largest spread ``alpha_b * (max - min)`` of a list's valid scores for which the
#: backward pass takes each pair's logistic from one ``exp`` per document
#: (``exp(x - max x) >= e^-60``, e^-600 in float64); a batch with a wider list
#: takes one ``tanh`` per pair.
_EXP_SPREAD_LIMIT = {tf.float32: 60.0, tf.float64: 600.0}
# Added to e_i + e_j (>= e^-60, resp. e^-600, for valid pairs: a relative change
# below 1e-11), so that two padded documents give 0 / tiny = 0.
_TINY = {tf.float32: 1e-37, tf.float64: 1e-300}


def _exp_is_exact(scores, mask, alpha_b) -> tf.Tensor:
    """Whether every list's valid spread fits ``_EXP_SPREAD_LIMIT`` (bool scalar)."""
    x = scores * alpha_b
    big = tf.constant(float("inf"), x.dtype)
    spread = (tf.reduce_max(tf.where(mask, x, -big), axis=-1)
              - tf.reduce_min(tf.where(mask, x, big), axis=-1))  # -inf for empty lists
    return tf.reduce_all(spread <= _EXP_SPREAD_LIMIT[x.dtype])


def _pair_logistics(scores, mask, alpha_b, by_exp: bool):
    r"""``(a, b, d)`` of every pair, ``[B, L, C, PAIR_BLOCK]``: :math:`q_{ij} =
    \sigma(\alpha_b (s_j - s_i)) = a / d` and :math:`1 - q_{ij} = b / d`.

    ``by_exp``: one ``exp`` per document, :math:`e = e^{x - \max x}`, ``(e_j, e_i,
    e_i + e_j)``; padded documents get e = 0. Else one ``tanh`` per pair,
    :math:`\tau = \tanh((x_j - x_i) / 2)`, ``(1 + tau, 1 - tau, 2)``, exact for any
    spread; padded documents sit ``_PADDED_SCORE_GAP`` below the lowest valid
    score, where tau is exactly -1. Either way every pair with a padded document
    has q or 1 - q = 0, so its derivative is 0 without a ``[B, L, L]`` mask."""
    x = alpha_b * scores
    if by_exp:
        highest = tf.reduce_max(tf.where(mask, x, tf.constant(-float("inf"), x.dtype)),
                                axis=-1, keepdims=True)
        e = tf.where(mask, tf.exp(tf.minimum(x - highest, 0.0)), tf.constant(0, x.dtype))
        e_i, e_j = e[:, :, None, None], lists.column_blocks(e, 0.0)
        return e_j, e_i, e_i + e_j + tf.constant(_TINY[x.dtype], x.dtype)
    half = _below_valid(0.5 * x, mask, _PADDED_SCORE_GAP)
    fill = _far_below(tf.reduce_min(half), _PADDED_SCORE_GAP)
    tau = tf.tanh(lists.column_blocks(half, fill) - half[:, :, None, None])
    return 1.0 + tau, 1.0 - tau, tf.constant(2, x.dtype)


def _pair_derivatives(logistics, labels_i, labels_j, alpha_b, gradient):
    r"""G: :math:`g_{ij} = \sigma^{+\prime}(s_i - s_j)` of Eq. 11, 20 or 21, with
    :math:`\sigma_b(s_i - s_j) = 1 - q_{ij} = b / d` and :math:`1 - \sigma_b =
    q_{ij} = a / d` (``logistics`` = ``(a, b, d)``) and :math:`u_{ij}` from the
    labels of the rows and columns (padded ones below every valid label)."""
    a, b, d = logistics
    zero = tf.constant(0, a.dtype)
    if gradient == "type3":  # Eq. 21: 2a(1 - sigma_b) if u = 1, -2a sigma_b if u = -1
        return (2.0 * alpha_b) * tf.where(labels_i > labels_j, a,
                                          tf.where(labels_i < labels_j, -b, zero)) / d
    pair_grads = alpha_b * (a / d) * (b / d)  # Eq. 11 (a b and d^2 can underflow, the ratios not)
    if gradient == "type1":
        return pair_grads
    return tf.where(labels_i > labels_j, pair_grads,  # Eq. 20: times u_ij
                    tf.where(labels_i < labels_j, -pair_grads, zero))


def _ranks_backward(upstream, scores, labels, mask, alpha_b, gradient):
    r"""d loss / d scores from d loss / d ranks (Eq. 17-18 with Eq. 11/20/21).

    With :math:`g_{kj} = \sigma^{+\prime}(s_k - s_j)` and :math:`\delta =
    \partial L / \partial r`, :math:`\partial L/\partial s_k = \sum_j \delta_j
    g_{jk} - \delta_k \sum_j g_{kj}`. Type1 G is symmetric, type2 and type3 G
    antisymmetric (:math:`u_{jk} = -u_{kj}`), so both sums are one sum over
    row k of G: :math:`\mp\sum_j g_{kj}(\delta_j \pm \delta_k)` (upper signs
    for type2 and type3, lower for type1); the diagonal cancels (type1) or
    vanishes (:math:`u_{kk} = 0`). One pass over the pairs, in blocks of
    ``lists.PAIR_BLOCK`` columns, ``[B, L, C, PAIR_BLOCK]``, which XLA fuses
    into one loop: G is never stored.

    Lists longer than one block take the logistics from one ``exp`` per document
    where every list's spread allows (:func:`_pair_logistics`), an XLA conditional;
    shorter ones, where the conditional costs more than it saves, one ``tanh`` per pair.
    """
    dtype = scores.dtype
    upstream = tf.where(mask, upstream, tf.constant(0, dtype))
    labels_rows = labels_columns = None
    if gradient != "type1":
        labels = _below_valid(labels, mask, 1.0)
        labels_rows = labels[:, :, None, None]
        labels_columns = lists.column_blocks(labels, tf.reduce_min(labels) - 1.0)
    sign = 1.0 if gradient != "type1" else -1.0

    def in_form(by_exp):  # (the pairs built inside each branch: never stored)
        logistics = _pair_logistics(scores, mask, alpha_b, by_exp)
        pair_grads = _pair_derivatives(logistics, labels_rows, labels_columns, alpha_b, gradient)
        deltas = lists.column_blocks(upstream, 0.0) + sign * upstream[:, :, None, None]
        grads = -sign * tf.reduce_sum(tf.reduce_sum(pair_grads * deltas, -1), -1)
        return tf.where(mask, grads, tf.constant(0, dtype))

    size = scores.shape[1]
    if size is not None and size <= lists.PAIR_BLOCK:
        return in_form(False)
    return tf.cond(_exp_is_exact(scores, mask, alpha_b), lambda: in_form(True),
                   lambda: in_form(False))


def _under_xla(function, *args):
    """``function(*args)``: traced into the caller's XLA program; in another graph,
    an XLA program of its own (one per function, shapes and Python values);
    eagerly, op by op (a program per shape would hold memory for good)."""
    if lists.compiling_with_xla() or tf.executing_eagerly():
        return function(*args)
    if function not in _PROGRAMS:
        _PROGRAMS[function] = tf.function(function, jit_compile=True, reduce_retracing=True)
    return _PROGRAMS[function](*args)


_PROGRAMS = {}


def bucket_size(size):
    """The list length that lists of ``size`` documents are padded to (with
    padded documents, which change no value and get zero gradient) before XLA
    compiles them: a multiple of ``lists.PAIR_BLOCK`` (32) up to 128, then the
    smallest ``m * 2^e >= size`` with ``m`` in 4..7, so XLA compiles at most
    four programs per doubling of the list length (per batch size), pads at
    most 25% more documents past 128 (none at 32, 64, 128, 256, 512, 1024, ...),
    and the pairs fill whole blocks of columns.

    >>> [bucket_size(n) for n in (1, 32, 33, 100, 128, 129, 700, 1024, 1251)]
    [32, 32, 64, 128, 128, 160, 768, 1024, 1280]
    >>> int(bucket_size(tf.constant(1251)))  # a tensor (unknown static size) too
    1280
    """
    if isinstance(size, int):  # a static size: no graph ops
        step = max(1 << max(size.bit_length() - 3, 0), lists.PAIR_BLOCK)
        return -(-max(size, 1) // step) * step
    size = tf.maximum(tf.cast(size, tf.int32), 1)
    octave = tf.cast(tf.math.floor(tf.math.log(tf.cast(size, tf.float32)) / math.log(2.0)),
                     tf.int32)
    step = tf.maximum(tf.bitwise.left_shift(1, tf.maximum(octave - 2, 0)), lists.PAIR_BLOCK)
    return (size + step - 1) // step * step


def _pad_to_bucket(tensors, scores):
    """``(tensors padded along the list axis to bucket_size, list size)``; None
    entries stay None. Padded entries are 0 (False for masks)."""
    size = scores.shape[1] if scores.shape[1] is not None else tf.shape(scores)[1]
    padding = bucket_size(size) - size
    if isinstance(padding, int) and padding == 0:
        return list(tensors), size
    return [None if t is None else tf.pad(t, [[0, 0], [0, padding]]) for t in tensors], size


def twin_sigmoid_ranks(scores, labels=None, mask=None, gradient: str = "type1",
                       alpha_b: float = 1.0, tie_break: bool = True,
                       seed: lists.Seed = None) -> tf.Tensor:
    r"""Exact 1-based ranks with twin-sigmoid gradients (Eq. 12).

    :math:`r_i = 1 + \sum_{j \ne i,\, j\ \mathrm{valid}} (1 - \sigma^+(s_i - s_j))`.

    With ``tie_break=True`` (Section 4.2) ties in score are broken by a random
    permutation per list (a stateless draw from ``seed``), so the ranks are a
    permutation of 1..n; without it tied documents share the mean of their
    positions (:math:`\sigma^+(0) = 1/2`). The forward pass is one sort (or, under XLA, a count); the
    backward pass implements Eq. 17-18 (27-28) with the derivative of
    ``gradient``: :math:`\partial r_i/\partial s_i = -\sum_{j} g_{ij}`,
    :math:`\partial r_i/\partial s_j = g_{ij}`, :math:`g_{ij} =
    \sigma^{+\prime}(s_i - s_j)` with :math:`u_{ij}` from the labels.

    Args:
      scores: float ``[B, L]``.
      labels: float ``[B, L]``; labels < 0 mark padding. Required for type2/3.
      mask: optional bool ``[B, L]``, True = valid.
      gradient: ``"type1"`` (Eq. 11), ``"type2"`` (Eq. 20), ``"type3"`` (Eq. 21).
      alpha_b: steepness of the backward sigmoid, > 0.
      tie_break: break score ties randomly (True) or share positions (False).
      seed: int or pair of ints for the tie-breaking permutation; None draws
        a fresh one at every call.

    Returns:
      ``[B, L]`` ranks in the compute dtype (float32, or float64 for float64
      scores); padded documents get rank 0 and zero gradient.

    >>> s = tf.constant([[0.1, 0.7, 0.4, -1.0]])
    >>> twin_sigmoid_ranks(s, labels=tf.constant([[0., 2., 1., -1.]])).numpy()
    array([[3., 1., 2., 0.]], dtype=float32)
    """
    if labels is not None:
        labels, scores, valid = screening.prepare_lists(labels, scores, mask)
    else:
        scores, valid = screening.prepare_scores(scores, mask)
    alpha_b = _validate(alpha_b, gradient, label_signs=labels)
    forward, _ = exact_forward_ranks(scores, valid, tie_break, seed)

    @tf.custom_gradient
    def _ranks(s):
        def grad(upstream):
            padded, size = _pad_to_bucket((upstream, s, labels, valid), s)
            return _under_xla(_ranks_backward, *padded, alpha_b, gradient)[:, :size]

        return tf.identity(forward), grad

    return _ranks(scores)


def _tie_seed(seed: lists.Seed) -> tf.Tensor:
    """The stateless seed of the tie-breaking keys: ``seed``'s, or for None a
    fresh one, drawn where this is called (outside any XLA program)."""
    return lists.seed_tensor(seed) if seed is not None else lists.fresh_seed()


def _tie_key_draw(scores, seed_t: tf.Tensor, size=None):
    """A function that draws the tie keys of ``scores``' lists from ``seed_t``
    (:data:`sorting.TieKeys`). With ``size``, the first ``size`` documents get the
    keys of the unpadded lists, and the padding added for a bucket -2, -3, ...:
    distinct and below every drawn key, so it takes the last positions in order."""
    if size is None:
        return lambda: sorting.random_tie_keys(tf.shape(scores), seed_t)

    def draw():
        keys = sorting.random_tie_keys([tf.shape(scores)[0], size], seed_t)
        added = -2 - tf.range(tf.shape(scores)[1] - size)
        return tf.concat([keys, tf.tile(added[None, :], [tf.shape(scores)[0], 1])], axis=1)

    return draw


def exact_forward_ranks(scores, valid, tie_break: bool, seed: lists.Seed, tie_keys=None):
    """``(ranks, positions)`` of :func:`twin_sigmoid_ranks`'s forward pass: float
    ranks (0 at padded documents) and int32 positions (the ranks with tie breaking);
    ``tie_keys`` (:data:`sorting.TieKeys`) may be given in place of ``seed``."""
    if tie_break:
        if tie_keys is None:
            tie_keys = _tie_key_draw(scores, _tie_seed(seed))
        positions = sorting.exact_ranks(scores, valid, tie_keys)
        ranks = tf.where(valid, tf.cast(positions, scores.dtype), tf.constant(0, scores.dtype))
    else:
        positions = sorting.exact_ranks(scores, valid)
        ranks = sorting.midranks(scores, valid)
    return ranks, positions


def _metric_and_gradient(labels, scores, valid, tie_seed, key_size, metric, topn, tie_break,
                         alpha_b, gradient):
    """``(value [B], d value / d scores [B, L])``; ties broken by keys drawn from
    ``tie_seed`` for lists of ``key_size`` documents (the static length before
    padding; None: the padded length). Run under XLA (:func:`_under_xla`); where
    no gradient is taken inside a caller's program, XLA drops the backward pass."""
    tie_keys = _tie_key_draw(scores, tie_seed, key_size) if tie_break else None
    ranks, positions = exact_forward_ranks(scores, valid, tie_break, None, tie_keys)
    value, rank_gradient = rank_metrics.value_and_rank_gradient(metric, labels, ranks, valid,
                                                                topn, positions)
    return value, _ranks_backward(rank_gradient, scores, labels, valid, alpha_b, gradient)


def twin_sigmoid_metric(metric: str, labels, scores, valid, topn: Optional[int] = None,
                        gradient: str = "type1", alpha_b: float = 1.0, tie_break: bool = True,
                        seed: lists.Seed = None) -> tf.Tensor:
    r"""A rank metric ``[B]`` at the exact ranks of :func:`twin_sigmoid_ranks`,
    with the twin-sigmoid gradient (Eq. 17-18 chained onto Eq. 29, 31-33).

    :math:`\partial v / \partial s_k = \sum_d \frac{\partial v}{\partial r_d}
    \frac{\partial r_d}{\partial s_k}`, with :math:`\partial v / \partial r`
    from :func:`rank_metrics.value_and_rank_gradient` (positions held constant)
    and the rank derivatives of :func:`twin_sigmoid_ranks`: the same gradient as
    differentiating ``v(twin_sigmoid_ranks(scores))``, without autodiff through
    ``v``. Value and gradient come from one XLA program (:func:`_under_xla`: the
    caller's, or one of its own; eagerly, ops), with the gradient also for a
    forward-only call; the backward pass scales that gradient by the upstream.

    Args:
      metric: a metric name of :mod:`~tfr_extensions.ops.vocabulary`.
      labels, scores, valid: as prepared by :func:`screening.prepare_lists`.
      topn: the metric's cutoff; None = the whole list.
      gradient, alpha_b, tie_break, seed: as in :func:`twin_sigmoid_ranks`
        (validated).

    >>> labels, scores = tf.constant([[0., 1., 2.]]), tf.constant([[3., 2., 1.]])
    >>> value = twin_sigmoid_metric("ndcg", labels, scores, labels >= 0, gradient="type3", seed=0)
    >>> round(float(value[0]), 4)  # nDCG of the reversed order
    0.5869
    """
    tie_seed = _tie_seed(seed) if tie_break else None
    # No gradient flows into the program (the custom gradient below gives it), so
    # that a recording tape does not make TF compile a second program.
    (labels_p, scores_p, valid_p), size = _pad_to_bucket(
        (labels, tf.stop_gradient(scores), valid), scores)
    # The tie keys of the unpadded lists (the stream of twin_sigmoid_ranks), but
    # where the length is unknown outside XLA: those of the bucket, so that XLA
    # compiles one program per bucket, not one per length.
    padded = scores_p.shape[1] is None or scores_p.shape[1] != scores.shape[1]
    key_size = size if padded and (isinstance(size, int) or lists.compiling_with_xla()) else None
    value, grads = _under_xla(_metric_and_gradient, labels_p, scores_p, valid_p, tie_seed,
                              key_size, metric, topn, tie_break, alpha_b, gradient)

    @tf.custom_gradient
    def _value(s):
        del s  # the gradient is already known
        return tf.identity(value), lambda upstream: upstream[:, None] * grads[:, :size]

    return _value(scores)
