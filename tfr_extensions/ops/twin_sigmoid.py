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

Numerics: :math:`\sigma_b(z)(1-\sigma_b(z))` is computed as
``sigmoid(a z) * sigmoid(-a z)``, and :math:`1-\sigma_b(z)` as ``sigmoid(-a z)``,
so no cancellation occurs and every derivative is finite and bounded by
:math:`2\alpha_b` for any z, including |z| = 1e4.

Ranks (Eq. 12): :math:`r_i = 1 + \sum_{j \ne i} (1 - \sigma^+(s_i - s_j))`. Their
forward value is computed by a sort in O(L log L); only the backward pass forms
the L x L pairwise derivatives (Eq. 17-18 / 27-28) and their two row sums. Every
derivative is a function of the pair's logistic :math:`e_j / (e_i + e_j)`,
:math:`e = e^{\alpha_b s}`: one ``exp`` per document (one ``tanh`` per pair
for lists whose scores spread too far for that), and XLA compiles the
backward pass in every mode (graph and eager too), so the chain that builds
the pairs runs as one fused loop and is stored once at most.
"""
import contextlib
import math
import threading
from typing import Optional

import tensorflow as tf

from tfr_extensions.ops import lists
from tfr_extensions.ops import rank_metrics
from tfr_extensions.ops import sorting
from tfr_extensions.ops import validation
from tfr_extensions.ops.vocabulary import GRADIENT_TYPES


def twin_sigmoid_derivative(z, alpha_b: float = 1.0, gradient: str = "type1",
                            label_signs=None) -> tf.Tensor:
    """The back-propagated derivative d sigma+ / dz of Eq. 11, 20 or 21.

    Args:
      z: float tensor, the argument of the twin-sigmoid (a score difference).
      alpha_b: the backward sigmoid's steepness, > 0.
      gradient: ``"type1"``, ``"type2"`` or ``"type3"``.
      label_signs: ``u_ij`` in {-1, 0, 1}, broadcastable to ``z``; required for
        type2 and type3.

    Returns:
      A tensor shaped like ``z``.
    """
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


# Padded documents enter the tanh form of the backward pass with a score at
# least this far (in units of alpha_b * score / 2) below the list's lowest
# valid score, and at least as far again as that score's magnitude
# (_far_below: at 1e30 a gap of 1e3 alone rounds away).
# tanh saturates to exactly -1/+1 there (|x| > 20 is enough in float64), so
# every pair with a padded document gets derivative 0 without a [B, L, L]
# mask. Finite, so no inf - inf.
_PADDED_SCORE_GAP = 1e3

#: Largest spread ``alpha_b * (max - min)`` of a list's valid scores for which
#: the backward pass takes the logistic of each pair from one ``exp`` per
#: document (:class:`_LogisticsByExp`); a batch with a wider list takes one
#: ``tanh`` per pair. Then ``exp(x - max x) >= e^-60`` (e^-600 in float64).
_EXP_SPREAD_LIMIT = {tf.float32: 60.0, tf.float64: 600.0}
# Added to e_i + e_j (>= e^-60, resp. e^-600, for valid pairs: a relative
# change below 1e-11), so that two padded documents give 0 / tiny = 0.
_TINY = {tf.float32: 1e-37, tf.float64: 1e-300}

#: Inside a caller's XLA program, lists of a static length up to this take
#: the tanh form unconditionally: on short lists the spread check and XLA's
#: conditional cost more than the exps save (``benchmarks/loss_throughput.py``
#: measures both forms). A program that checks the spread itself and reruns
#: with the tanh form where the exp form is not exact traces the loss under
#: :func:`short_lists_by_exp` instead.
XLA_TANH_MAX_LIST_SIZE = 32
# Set by short_lists_by_exp, per thread: replicas of a distribution strategy trace
# their programs in threads of their own.
_short_list_form = threading.local()


@contextlib.contextmanager
def short_lists_by_exp():
    """While tracing an XLA program in this context, lists up to
    ``XLA_TANH_MAX_LIST_SIZE`` documents take the exp form with no spread check
    and no conditional; the program must check :func:`exp_is_exact` on the
    same scores and mask and recompute the gradient in the tanh form where it
    is False (as :class:`tfr_extensions.losses.TwinSigmoidLoss` does for short
    lists in graph mode)."""
    outer = getattr(_short_list_form, "by_exp", False)
    _short_list_form.by_exp = True
    try:
        yield
    finally:
        _short_list_form.by_exp = outer


def _far_below(values: tf.Tensor, gap: float) -> tf.Tensor:
    """``values - gap - |values|`` (at least ``dtype.min``): at least ``gap``
    below ``values`` also where ``gap`` is below their rounding unit (``-5e29 -
    1e3 == -5e29`` in float32, which would tie a padded document with the
    lowest valid one)."""
    return tf.maximum(values - gap - tf.abs(values), values.dtype.min)


def _below_valid(values: tf.Tensor, mask: tf.Tensor, gap: float) -> tf.Tensor:
    """``values`` with padded entries replaced by a value at least ``gap`` below
    the lowest valid value (:func:`_far_below`)."""
    big = tf.constant(float("inf"), values.dtype)
    lowest = tf.reduce_min(tf.where(mask, values, big), axis=-1, keepdims=True)
    lowest = tf.where(tf.math.is_finite(lowest), lowest, tf.constant(0, lowest.dtype))
    return tf.where(mask, values, _far_below(lowest, gap))


class _LogisticsByExp:
    r"""The logistic :math:`q_{ij} = \sigma(x_j - x_i)` of every pair as
    ``(a, b, d)``, :math:`q = a / d` and :math:`1 - q = b / d`, from one ``exp``
    per document: :math:`e_i = e^{x_i - \max x}`, ``a`` = :math:`e_j`, ``b`` =
    :math:`e_i`, ``d`` = :math:`e_i + e_j` (+ tiny). Padded documents get
    :math:`e = 0`, so every pair with one has q or 1 - q = 0 (two padded
    documents: 0 / tiny). Exact to rounding while each list's valid spread
    is within ``_EXP_SPREAD_LIMIT``."""

    @staticmethod
    def per_document(x, mask):
        """The per-document values ``[B, L]`` that :meth:`pairs` combines."""
        highest = tf.reduce_max(tf.where(mask, x, tf.constant(-float("inf"), x.dtype)),
                                axis=-1, keepdims=True)
        return tf.where(mask, tf.exp(tf.minimum(x - highest, 0.0)), tf.constant(0, x.dtype))

    @staticmethod
    def padded_value(values):
        """The value of a padded document (the fill of padded columns)."""
        return tf.constant(0, values.dtype)

    @staticmethod
    def pairs(e_i, e_j):
        return e_j, e_i, e_i + e_j + tf.constant(_TINY[e_i.dtype], e_i.dtype)


class _LogisticsByTanh:
    r""":class:`_LogisticsByExp` for any spread, with one ``tanh`` per pair:
    :math:`\tau_{ij} = \tanh((x_j - x_i)/2)`, ``(1 + tau, 1 - tau, 2)``.
    Padded documents sit ``_PADDED_SCORE_GAP`` below the lowest valid score,
    where tau is exactly -1, so again q or 1 - q = 0 for every pair with one."""

    @staticmethod
    def per_document(x, mask):
        return _below_valid(0.5 * x, mask, _PADDED_SCORE_GAP)

    @staticmethod
    def padded_value(values):
        return _far_below(tf.reduce_min(values), _PADDED_SCORE_GAP)

    @staticmethod
    def pairs(half_i, half_j):
        tau = tf.tanh(half_j - half_i)
        return 1.0 + tau, 1.0 - tau, tf.constant(2, tau.dtype)


def _pair_derivatives(logistics, labels_i, labels_j, alpha_b, gradient):
    r"""G: :math:`g_{ij} = \sigma^{+\prime}(s_i - s_j)` of Eq. 11, 20 or 21, with
    :math:`\sigma_b(s_i - s_j) = 1 - q_{ij} = b / d` and :math:`1 - \sigma_b =
    q_{ij} = a / d` (``logistics`` = ``(a, b, d)``) and :math:`u_{ij}` from the
    labels of the rows and columns (padded ones below every valid label)."""
    a, b, d = logistics
    if gradient != "type3":  # (a / d) (b / d): a b and d^2 can underflow, the ratios not
        pair_grads = alpha_b * (a / d) * (b / d)  # Eq. 11
    if gradient == "type1":
        return pair_grads
    higher, lower = labels_i > labels_j, labels_i < labels_j  # u_ij = 1, u_ij = -1
    zero = tf.constant(0, a.dtype)
    if gradient == "type3":  # Eq. 21: 2a(1 - sigma_b) if u = 1, -2a sigma_b if u = -1
        return (2.0 * alpha_b) * tf.where(higher, a, tf.where(lower, -b, zero)) / d
    return tf.where(higher, pair_grads, tf.where(lower, -pair_grads, zero))  # Eq. 20


def exp_is_exact(scores, mask, alpha_b) -> tf.Tensor:
    """Whether every list's valid spread fits ``_EXP_SPREAD_LIMIT`` (bool scalar):
    then the exp form of the backward pass is exact to rounding."""
    x = scores * alpha_b
    big = tf.constant(float("inf"), x.dtype)
    spread = (tf.reduce_max(tf.where(mask, x, -big), axis=-1)
              - tf.reduce_min(tf.where(mask, x, big), axis=-1))  # -inf for empty lists
    return tf.reduce_all(spread <= _EXP_SPREAD_LIMIT[x.dtype])


def _ranks_backward_body(upstream, scores, labels, mask, alpha_b, gradient, logistics):
    r"""d loss / d scores from d loss / d ranks (Eq. 17-18 with Eq. 11/20/21).

    With :math:`g_{kj} = \sigma^{+\prime}(s_k - s_j)` and :math:`\delta =
    \partial L / \partial r`, :math:`\partial L/\partial s_k = \sum_j \delta_j
    g_{jk} - \delta_k \sum_j g_{kj}`. Type1 G is symmetric, type2 and type3 G
    antisymmetric (:math:`u_{jk} = -u_{kj}`), so both sums are one sum over
    row k of G: :math:`\mp\sum_j g_{kj}(\delta_j \pm \delta_k)` (upper signs
    for type2 and type3, lower for type1); the diagonal cancels (type1) or
    vanishes (:math:`u_{kk} = 0`). Every :math:`g_{kj}` is a function of the
    logistic :math:`\sigma(\alpha_b(s_j - s_k))`, from ``logistics``
    (:class:`_LogisticsByExp` or :class:`_LogisticsByTanh`).

    One pass over the pairs with one reduction, not the two sums G 1 and G
    delta (``docs/notes/twin_sigmoid_speed.md``). XLA compiles this body (see
    :func:`_ranks_backward`): G is built in blocks of ``lists.PAIR_BLOCK`` columns,
    ``[B, L, C, PAIR_BLOCK]``, and never stored.
    """
    dtype = scores.dtype
    upstream = tf.where(mask, upstream, tf.constant(0, dtype))
    labels_rows = labels_columns = None
    if gradient != "type1":
        labels = _below_valid(labels, mask, 1.0)
        labels_rows = labels[:, :, None, None]
        labels_columns = lists.column_blocks(labels, tf.reduce_min(labels) - 1.0)
    values = logistics.per_document(scores * alpha_b, mask)
    pairs = logistics.pairs(values[:, :, None, None],
                            lists.column_blocks(values, logistics.padded_value(values)))
    pair_grads = _pair_derivatives(pairs, labels_rows, labels_columns, alpha_b, gradient)
    sign = 1.0 if gradient != "type1" else -1.0
    terms = pair_grads * (lists.column_blocks(upstream, 0.0) + sign * upstream[:, :, None, None])
    grads = -sign * tf.reduce_sum(tf.reduce_sum(terms, -1), -1)
    return tf.where(mask, grads, tf.constant(0, dtype))


@tf.function(jit_compile=True, reduce_retracing=True)
def _compiled_backward_by_exp(upstream, scores, labels, mask, alpha_b, gradient):
    """``(gradient by exp, whether it is exact)``, one XLA program."""
    return (_ranks_backward_body(upstream, scores, labels, mask, alpha_b, gradient,
                                 _LogisticsByExp),
            exp_is_exact(scores, mask, alpha_b))


@tf.function(jit_compile=True, reduce_retracing=True)
def _compiled_backward_by_tanh(upstream, scores, labels, mask, alpha_b, gradient):
    return _ranks_backward_body(upstream, scores, labels, mask, alpha_b, gradient,
                                _LogisticsByTanh)


def bucket_size(size):
    """The list length that :func:`_ranks_backward` pads ``size`` to before XLA
    compiles it: a multiple of 32 up to 128, then the smallest ``m * 2^e >=
    size`` with ``m`` in 4..7, so XLA compiles at most four programs per
    doubling of the list length (per batch size), and pads at most 25% more
    documents past 128 (none at 32, 64, 128, 256, 512, 1024, ...).

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


def _pad_lists(tensors, padding):
    """``[B, L]`` tensors padded with ``padding`` documents along the list axis;
    None entries stay None. Padded entries are 0 (False for masks): padded
    documents, which change no value and get zero gradient."""
    return [None if t is None else tf.pad(t, [[0, 0], [0, padding]]) for t in tensors]


def _pad_to_bucket(tensors, scores):
    """``(tensors padded along the list axis to bucket_size, list size, whether
    they already were)`` (:func:`_pad_lists`)."""
    size = scores.shape[1] if scores.shape[1] is not None else tf.shape(scores)[1]
    padding = bucket_size(size) - size
    on_bucket = isinstance(padding, int) and padding == 0  # (known without graph ops)
    return (list(tensors) if on_bucket else _pad_lists(tensors, padding)), size, on_bucket


def _ranks_backward(upstream, scores, labels, mask, alpha_b, gradient):
    """:func:`_ranks_backward_body`, compiled by XLA in every mode, with one
    ``exp`` per document where that is exact and one ``tanh`` per pair where not.

    Outside an XLA cluster the lists are padded (as padded documents, which
    get exactly zero gradient) to :func:`bucket_size`, so XLA compiles one
    program per batch size and bucket, not one per list length; the first
    call at each new bucket pays the compilation. The choice between the
    two forms is a graph-mode ``cond`` on a flag that the exp program
    computes. Inside a caller's XLA program the choice is an
    XLA conditional, which costs more than the exps save on short lists (see
    ``XLA_TANH_MAX_LIST_SIZE``).
    """
    args = (alpha_b, gradient)
    if lists.compiling_with_xla():
        def body(logistics):
            return lambda: _ranks_backward_body(upstream, scores, labels, mask, *args, logistics)

        size = scores.shape[1]
        if size is not None and size <= XLA_TANH_MAX_LIST_SIZE:
            by_exp = getattr(_short_list_form, "by_exp", False)  # (short_lists_by_exp)
            return body(_LogisticsByExp if by_exp else _LogisticsByTanh)()
        return tf.cond(exp_is_exact(scores, mask, alpha_b), body(_LogisticsByExp),
                       body(_LogisticsByTanh))
    padded, size, on_bucket = _pad_to_bucket((upstream, scores, labels, mask), scores)
    grads, exact = _compiled_backward_by_exp(*padded, *args)
    grads = tf.cond(exact, lambda: grads, lambda: _compiled_backward_by_tanh(*padded, *args))
    return grads if on_bucket else grads[:, :size]


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
        labels, scores, valid = lists.prepare_lists(labels, scores, mask)
    else:
        scores, valid = lists.prepare_scores(scores, mask)
    alpha_b = _validate(alpha_b, gradient, label_signs=labels)
    forward, _ = exact_forward_ranks(scores, valid, tie_break, seed)

    @tf.custom_gradient
    def _ranks(s):
        def grad(upstream):
            return _ranks_backward(upstream, s, labels, valid, alpha_b, gradient)

        return tf.identity(forward), grad

    return _ranks(scores)


def _tie_seed(seed: lists.Seed) -> tf.Tensor:
    """The stateless seed of the tie-breaking keys: ``seed``'s, or for None a
    fresh one, drawn where this is called (not in a conditional's branch)."""
    return lists.seed_tensor(seed) if seed is not None else lists.fresh_seed()


def _tie_key_draw(scores, seed_t: tf.Tensor, size: Optional[int] = None):
    """A function that draws the tie-breaking keys of ``scores``' lists from the
    seed tensor ``seed_t`` (:data:`sorting.TieKeys`: a count draws them only
    where a list has tied scores). With ``size``, each list's first ``size``
    documents get the keys the unpadded lists get, and the rest (padding added
    for a bucket or a whole block) the keys -2, -3, ...: below every drawn key
    and distinct, so that the count gives the added padding distinct positions
    too (in index order, after the list's own documents)."""
    if size is None:
        return lambda: sorting.random_tie_keys(tf.shape(scores), seed_t)

    def draw():
        keys = sorting.random_tie_keys([tf.shape(scores)[0], size], seed_t)
        added = -2 - tf.range(tf.shape(scores)[1] - size)
        return tf.concat([keys, tf.tile(added[None, :], [tf.shape(scores)[0], 1])], axis=1)

    return draw


def exact_forward_ranks(scores, valid, tie_break: bool, seed: lists.Seed, tie_keys=None):
    """The forward value of :func:`twin_sigmoid_ranks`, without a gradient.

    Returns ``(ranks, positions)``: float ranks (0 at padded documents) and
    int32 positions of the sort, equal to the ranks with tie breaking.
    ``tie_keys`` (:data:`sorting.TieKeys`: int32 ``[B, L]`` from
    :func:`sorting.random_tie_keys`, or a function that draws them) may be
    given in place of ``seed``.
    """
    if tie_break:
        if tie_keys is None:
            tie_keys = _tie_key_draw(scores, _tie_seed(seed))
        positions = sorting.exact_ranks(scores, valid, tie_keys)
        ranks = tf.where(valid, tf.cast(positions, scores.dtype), tf.constant(0, scores.dtype))
    else:
        positions = sorting.exact_ranks(scores, valid)
        ranks = sorting.midranks(scores, valid)
    return ranks, positions


#: In graph mode (``tf.function``), lists whose :func:`bucket_size` is at most this
#: run the whole of :func:`twin_sigmoid_metric`, forward pass and gradient, as
#: one XLA program: on short lists the fixed cost of each program launch and
#: of each of dozens of small graph ops outweighs the pairwise work (see
#: ``docs/notes/twin_sigmoid_speed.md``). Longer lists run the forward pass as
#: graph ops (TF's sort is faster than XLA:CPU's there) and the backward pass
#: as its own XLA program, only when a gradient is asked for.
FUSED_MAX_LIST_SIZE = 32


def _metric_forward(metric, labels, scores, valid, tie_keys, topn, tie_break):
    ranks, positions = exact_forward_ranks(scores, valid, tie_break, None, tie_keys)
    return rank_metrics.value_and_rank_gradient(metric, labels, ranks, valid, topn, positions)


@tf.function(jit_compile=True, reduce_retracing=True)
def _compiled_metric_and_gradient(labels, scores, valid, tie_seed, size, metric, topn,
                                  tie_break, alpha_b, gradient):
    """``(value, d value / d ranks, d value / d scores by exp, whether exact)``
    of lists padded from ``size`` documents; ties are broken by keys drawn
    from ``tie_seed`` for lists of ``size`` documents."""
    tie_keys = _tie_key_draw(scores, tie_seed, size) if tie_break else None
    value, rank_gradient = _metric_forward(metric, labels, scores, valid, tie_keys, topn,
                                           tie_break)
    grads = _ranks_backward_body(rank_gradient, scores, labels, valid, alpha_b, gradient,
                                 _LogisticsByExp)
    return value, rank_gradient, grads, exp_is_exact(scores, valid, alpha_b)


def _fused_metric(metric, labels, scores, valid, tie_seed, topn, tie_break, gradient, alpha_b):
    """:func:`twin_sigmoid_metric` for short lists outside XLA: one XLA program
    computes the value and its gradient with respect to the scores (a tanh
    program replaces the gradient where the exp form is not exact); the
    backward pass only scales that gradient by the upstream."""
    # No gradient flows into the program (the custom gradient below gives it), so
    # that a recording tape does not make TF compile a different program (with the
    # intermediates of a backward pass as outputs), whose rounding may differ.
    padded, size, on_bucket = _pad_to_bucket((labels, tf.stop_gradient(scores), valid), scores)
    labels_p, scores_p, valid_p = padded
    value, rank_gradient, grads, exact = _compiled_metric_and_gradient(
        labels_p, scores_p, valid_p, tie_seed, size, metric, topn, tie_break, alpha_b, gradient)
    grads = tf.cond(exact, lambda: grads, lambda: _compiled_backward_by_tanh(
        rank_gradient, scores_p, labels_p, valid_p, alpha_b, gradient))
    if not on_bucket:
        grads = grads[:, :size]

    @tf.custom_gradient
    def _value(s):
        del s  # the gradient is already known
        return tf.identity(value), lambda upstream: upstream[:, None] * grads

    return _value(scores)


def twin_sigmoid_metric(metric: str, labels, scores, valid, topn: Optional[int] = None,
                        gradient: str = "type1", alpha_b: float = 1.0, tie_break: bool = True,
                        seed: lists.Seed = None) -> tf.Tensor:
    r"""A rank metric ``[B]`` at the exact ranks of :func:`twin_sigmoid_ranks`,
    with the twin-sigmoid gradient (Eq. 17-18 chained onto Eq. 29, 31-33).

    The value is :func:`rank_metrics.value_and_rank_gradient`'s metric at the
    ranks of :func:`exact_forward_ranks` (ties broken by keys drawn from
    ``seed``, one stream in every mode); the gradient is
    :func:`with_twin_sigmoid_gradient`'s. How it runs:

    * inside a caller's XLA program: as ops of that program (XLA drops the
      backward pass where no gradient is taken), lists longer than
      ``lists.PAIR_BLOCK`` documents padded to a multiple of it
      (:data:`XLA_PAD_TO_BLOCKS`);
    * in graph mode (``tf.function``), lists of a static length whose
      :func:`bucket_size` is at most ``FUSED_MAX_LIST_SIZE``: padded to that
      bucket (padded documents change no value and get zero gradient), value
      and gradient in one XLA program (:func:`_fused_metric`);
    * otherwise (eagerly, longer lists): the forward pass as TF ops, the
      backward pass as an XLA program of its own (:func:`_ranks_backward`),
      compiled only when a gradient is taken.

    Args:
      metric: a metric name of :mod:`~tfr_extensions.ops.vocabulary`.
      labels, scores, valid: as prepared by :func:`lists.prepare_lists`.
      topn: the metric's cutoff; None = the whole list.
      gradient, alpha_b, tie_break, seed: as in :func:`twin_sigmoid_ranks`
        (validated).

    >>> labels, scores = tf.constant([[0., 1., 2.]]), tf.constant([[3., 2., 1.]])
    >>> value = twin_sigmoid_metric("ndcg", labels, scores, labels >= 0, gradient="type3", seed=0)
    >>> round(float(value[0]), 4)  # nDCG of the reversed order
    0.5869
    """
    tie_seed = _tie_seed(seed) if tie_break else None
    size = scores.shape[1]
    if (not tf.executing_eagerly() and not lists.compiling_with_xla() and size is not None
            and bucket_size(size) <= FUSED_MAX_LIST_SIZE):
        return _fused_metric(metric, labels, scores, valid, tie_seed, topn, tie_break,
                             gradient, alpha_b)
    length = size if size is not None else tf.shape(scores)[1]
    padding = _block_padding(length) if lists.compiling_with_xla() else 0
    padded = tf.is_tensor(padding) or padding > 0  # (a tensor where the length is unknown)
    if padded:
        labels, scores, valid = _pad_lists((labels, scores, valid), padding)
    tie_keys = _tie_key_draw(scores, tie_seed, length if padded else None) if tie_break else None
    value, rank_gradient = _metric_forward(metric, labels, scores, valid, tie_keys, topn,
                                           tie_break)
    return with_twin_sigmoid_gradient(value, rank_gradient, scores, labels, valid, gradient,
                                      alpha_b)


#: Under XLA, lists longer than ``lists.PAIR_BLOCK`` documents are padded (with
#: padded documents, which change no value and get zero gradient) to a multiple of
#: it: XLA:CPU's pairwise loops over a filled last block of columns ran the whole
#: loss 1.6-3.6x slower per list than padded (``docs/notes/twin_sigmoid_speed.md``,
#: change 11).
XLA_PAD_TO_BLOCKS = True


def _block_padding(size):
    """How many documents pad a list of ``size`` to a multiple of ``lists.PAIR_BLOCK``
    under XLA (0 for a short one). ``size``: an int, or an int32 scalar tensor
    where the static length is unknown (XLA compiles each length as its own
    program, so the tensor is a constant of each program)."""
    if not XLA_PAD_TO_BLOCKS:
        return 0
    if tf.is_tensor(size):
        return tf.where(size > lists.PAIR_BLOCK, -size % lists.PAIR_BLOCK, 0)
    return 0 if size <= lists.PAIR_BLOCK else -size % lists.PAIR_BLOCK


def with_twin_sigmoid_gradient(value, rank_gradient, scores, labels, valid,
                               gradient: str, alpha_b: float) -> tf.Tensor:
    r"""``value`` ``[B]``, a function of the twin-sigmoid ranks of ``scores``,
    with the gradient of Eq. 17-18 chained onto its known rank derivative.

    :math:`\partial v / \partial s_k = \sum_d \frac{\partial v}{\partial r_d}
    \frac{\partial r_d}{\partial s_k}`, with ``rank_gradient`` =
    :math:`\partial v / \partial r` ``[B, L]`` (e.g. from
    :func:`tfr_extensions.ops.rank_metrics.value_and_rank_gradient`) and the
    rank derivatives of :func:`twin_sigmoid_ranks`. The same gradient as
    differentiating ``v(twin_sigmoid_ranks(scores))``, without autodiff
    through ``v``.

    Args:
      value: ``[B]``, computed from :func:`exact_forward_ranks`.
      rank_gradient: ``[B, L]``, 0 at padded documents.
      scores, labels, valid: as prepared by :func:`lists.prepare_lists`.
      gradient, alpha_b: as in :func:`twin_sigmoid_ranks` (validated).
    """
    @tf.custom_gradient
    def _value(s):
        def grad(upstream):
            return _ranks_backward(upstream[:, None] * rank_gradient, s, labels, valid,
                                   alpha_b, gradient)

        return tf.identity(value), grad

    return _value(scores)
