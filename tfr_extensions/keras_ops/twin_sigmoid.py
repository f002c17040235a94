r"""The twin-sigmoid and the exact, differentiable ranks built on it: the
``keras.ops`` form of :mod:`tfr_extensions.ops.twin_sigmoid` (the same
functions, names and contracts).

Yu, "Optimize What You Evaluate With" (``twin-sigmoid-direct-metric-optimization.txt``),
Sections 4.2 and 5, Appendix A-B. The twin-sigmoid :math:`\sigma^+` outputs the
hard step (0 for z < 0, 1/2 at 0, 1 for z > 0) and back-propagates the
derivative of :math:`\sigma_b(z) = 1/(1+e^{-\alpha_b z})`:

* ``"type1"`` (Eq. 11): :math:`\alpha_b \sigma_b(z)(1-\sigma_b(z))`;
* ``"type2"`` (Eq. 20): the same times :math:`u_{ij} = \mathrm{sign}(y_i - y_j)`;
* ``"type3"`` (Eq. 21): :math:`2\alpha_b(1-\sigma_b(z))` if :math:`u_{ij}=1`,
  0 if :math:`u_{ij}=0`, :math:`-2\alpha_b\sigma_b(z)` if :math:`u_{ij}=-1`.

Ranks (Eq. 12): :math:`r_i = 1 + \sum_{j \ne i} (1 - \sigma^+(s_i - s_j))`,
forward by a sort or a count (:mod:`~tfr_extensions.keras_ops.sorting`); the
backward pass sums the L x L pairwise derivatives (Eq. 17-18 / 27-28) with
``keras.ops.custom_gradient``.

Numerics, as in the TensorFlow version: the logistic of every pair comes from
one ``exp`` per document, :math:`\sigma(x_j - x_i) = e_j / (e_i + e_j)` with
:math:`e = e^{x - \max x}`, while every list's valid spread
:math:`\alpha_b (\max s - \min s)` is at most 60 (600 in float64), and from one
``tanh`` per pair beyond that; both are exact to rounding where the exps are,
and every derivative is finite and bounded by :math:`2\alpha_b`, also for
score differences of 1e30. The element-wise :func:`twin_sigmoid` takes one
:math:`e^{-\alpha_b |z|}` per element. The pairs are summed as
:func:`~tfr_extensions.keras_ops.pairs.row_sums` finds fastest on each
backend (never stored on JAX).
"""
from typing import Optional

import keras
import numpy as np
from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics
from tfr_extensions.keras_ops import pairs
from tfr_extensions.keras_ops import sorting
from tfr_extensions.ops import rank_metrics
from tfr_extensions.ops import validation
from tfr_extensions.ops.vocabulary import GRADIENT_TYPES


def _logistic_pair(z):
    r"""``(sigma(z), sigma(-z))`` from one ``exp(-|z|)``: exact to rounding and
    finite for any z (infinite z included)."""
    e = ops.exp(-ops.abs(z))
    big, small = 1.0 / (1.0 + e), e / (1.0 + e)  # sigma(|z|), sigma(-|z|)
    positive = z >= 0
    return ops.where(positive, big, small), ops.where(positive, small, big)


def _derivative_from_logistics(sig, sig_neg, alpha, gradient, u):
    """Eq. 11, 20 or 21 from ``sigma_b(z)`` and ``1 - sigma_b(z)`` (``sig_neg``)."""
    zero = ops.zeros_like(sig)
    if gradient == "type1":
        return alpha * sig * sig_neg  # Eq. 11
    if gradient == "type2":  # Eq. 20
        grads = alpha * sig * sig_neg
        return ops.where(u > 0, grads, ops.where(u < 0, -grads, zero))
    # type3, Eq. 21
    return ops.where(u > 0, (2.0 * alpha) * sig_neg,
                     ops.where(u < 0, (-2.0 * alpha) * sig, zero))


def twin_sigmoid_derivative(z, alpha_b: float = 1.0, gradient: str = "type1",
                            label_signs=None):
    """The back-propagated derivative d sigma+ / dz of Eq. 11, 20 or 21.

    Args:
      z: float tensor (a score difference).
      alpha_b: the backward sigmoid's steepness, > 0.
      gradient: ``"type1"``, ``"type2"`` or ``"type3"``.
      label_signs: ``u_ij`` in {-1, 0, 1}, broadcastable to ``z``; required for
        type2 and type3.
    """
    z = ops.convert_to_tensor(z)
    alpha = ops.cast(alpha_b, z.dtype)
    sig, sig_neg = _logistic_pair(alpha * z)
    u = None if label_signs is None else ops.cast(label_signs, z.dtype)
    if u is not None:
        u = ops.broadcast_to(u, ops.shape(z))
    return _derivative_from_logistics(sig, sig_neg, alpha, gradient, u)


def _validate(alpha_b, gradient, label_signs) -> float:
    validation.validate_choice(gradient, GRADIENT_TYPES, "gradient")
    if gradient != "type1" and label_signs is None:
        raise ValueError(f"`label_signs` (or `labels`) is required for gradient={gradient!r}.")
    return validation.validate_positive(alpha_b, "alpha_b")


def _upstream(args, upstream):
    """The upstream gradient of a ``keras.ops.custom_gradient`` backward function:
    positional on JAX and TensorFlow, the ``upstream`` keyword on PyTorch."""
    return args[0] if upstream is None else upstream


def with_gradient(value, x, backward, *residuals):
    """``value`` (computed from ``x`` without a gradient) with the gradient
    ``backward(upstream, x, *residuals)`` with respect to ``x``.

    ``residuals`` are the tensors (or None) the backward pass reads. On JAX they are
    arguments of a ``jax.custom_vjp`` (with zero cotangents), never closed over: a
    loss compiled alone and differentiated outside (``jax.grad(jax.jit(loss))``)
    would otherwise leak the compiled program's tracers into its gradient.
    Elsewhere ``keras.ops.custom_gradient``.
    """
    if keras.backend.backend() != "jax":
        @ops.custom_gradient
        def _value(v):
            def grad(*args, upstream=None):
                return backward(_upstream(args, upstream), v, *residuals)
            return ops.copy(value), grad
        return _value(x)
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel

    def zero_cotangent(r):
        if r is None:
            return None
        if jnp.issubdtype(r.dtype, jnp.inexact):
            return jnp.zeros_like(r)
        return np.zeros(r.shape, jax.dtypes.float0)  # (bool and int arguments)

    @jax.custom_vjp
    def _value(v, out, *res):
        del v, res
        return out

    def forward(v, out, *res):
        return out, (v, out, res)

    def backward_pass(saved, upstream):
        v, out, res = saved
        return (backward(upstream, v, *res), jnp.zeros_like(out),
                *[zero_cotangent(r) for r in res])

    _value.defvjp(forward, backward_pass)
    return _value(x, jax.lax.stop_gradient(value), *residuals)


def twin_sigmoid(x, alpha_b: float = 1.0, gradient: str = "type1", label_signs=None):
    r"""Element-wise twin-sigmoid :math:`\sigma^+(x)` (Eq. 11, 20, 21): forward
    0 for x < 0, 1/2 at x = 0, 1 for x > 0; backward
    :func:`twin_sigmoid_derivative`.

    >>> ops.convert_to_numpy(twin_sigmoid(ops.array([-2.0, 0.0, 3.0]))).tolist()
    [0.0, 0.5, 1.0]
    """
    alpha_b = _validate(alpha_b, gradient, label_signs)
    x = ops.convert_to_tensor(x)
    out = ops.where(x > 0, ops.ones_like(x),
                    ops.where(x < 0, ops.zeros_like(x), numerics.full_like(x, 0.5)))
    signs = None if label_signs is None else ops.convert_to_tensor(label_signs)

    def backward(upstream, v, signs):
        return upstream * twin_sigmoid_derivative(v, alpha_b, gradient, signs)

    return with_gradient(out, x, backward, signs)


# Padded documents enter the tanh form of the backward pass with a score at
# least this far (in units of alpha_b * score / 2) below the list's lowest valid
# score (and as far again as that score's magnitude, see _far_below), where tanh
# saturates to exactly -1/+1: every pair with a padded document gets derivative 0
# without a [B, L, L] mask. As in the TensorFlow version.
_PADDED_SCORE_GAP = 1e3

#: Largest spread ``alpha_b * (max - min)`` of a list's valid scores for which
#: the backward pass takes the logistic of each pair from one ``exp`` per
#: document (:class:`_LogisticsByExp`); a batch with a wider list takes one
#: ``tanh`` per pair. Then ``exp(x - max x) >= e^-60`` (e^-600 in float64).
_EXP_SPREAD_LIMIT = {"float32": 60.0, "float64": 600.0}
# Added to d = e_i + e_j (>= e^-60, resp. e^-600, for valid pairs, where it
# vanishes), so that two padded documents give 0 / tiny = 0.
_TINY = {"float32": 1e-37, "float64": 1e-300}

#: On JAX, lists of a static length up to this take the tanh form
#: unconditionally: on short lists the spread check and the conditional cost
#: more than the exps save.
TANH_MAX_LIST_SIZE = 32


def _far_below(values, gap: float):
    """``values - gap - |values|`` (at least the dtype's lowest finite value): at
    least ``gap`` below ``values`` also where ``gap`` is below their rounding unit."""
    lowest = float(np.finfo(lists.dtype_name(values)).min)
    return numerics.maximum(values - gap - ops.abs(values), lowest)


def _below_valid(values, mask, gap: float):
    """``values`` with padded entries replaced by a value at least ``gap`` below
    the lowest valid value (:func:`_far_below`)."""
    lowest = ops.min(ops.where(mask, values, numerics.full_like(values, float("inf"))),
                     axis=-1, keepdims=True)
    lowest = ops.where(ops.isfinite(lowest), lowest, ops.zeros_like(lowest))
    return ops.where(mask, values, _far_below(lowest, gap))


class _LogisticsByExp:
    r"""The logistic :math:`q_{ij} = \sigma(x_j - x_i)` of every pair as ``(a, b,
    d)``, :math:`q = a / d` and :math:`1 - q = b / d`, from one ``exp`` per
    document: :math:`e_i = e^{x_i - \max x}`, ``a`` = :math:`e_j`, ``b`` =
    :math:`e_i`, ``d`` = :math:`e_i + e_j` (+ tiny). Padded documents get
    :math:`e = 0`, so every pair with one has q or 1 - q = 0. Exact to rounding
    while each list's valid spread is within ``_EXP_SPREAD_LIMIT``."""

    @staticmethod
    def per_document(x, mask):
        highest = ops.max(ops.where(mask, x, numerics.full_like(x, float("-inf"))), axis=-1,
                          keepdims=True)
        e = ops.exp(numerics.minimum(x - highest, 0.0))
        return ops.where(mask, e, ops.zeros_like(e))

    @staticmethod
    def padded_value(values):
        return 0.0

    @staticmethod
    def pairs(e_i, e_j):  # tiny is added per row (it vanishes beside any valid e)
        return e_j, e_i, (e_i + _TINY[lists.dtype_name(e_i)]) + e_j


class _LogisticsByTanh:
    r""":class:`_LogisticsByExp` for any spread, with one ``tanh`` per pair:
    :math:`\tau_{ij} = \tanh((x_j - x_i)/2)`, ``(1 + tau, 1 - tau, 2)``. Padded
    documents sit ``_PADDED_SCORE_GAP`` below the lowest valid score, where tau
    is exactly -1, so again q or 1 - q = 0 for every pair with one."""

    @staticmethod
    def per_document(x, mask):
        return _below_valid(0.5 * x, mask, _PADDED_SCORE_GAP)

    @staticmethod
    def padded_value(values):
        return _far_below(ops.min(values), _PADDED_SCORE_GAP)

    @staticmethod
    def pairs(half_i, half_j):
        tau = ops.tanh(half_j - half_i)
        return 1.0 + tau, 1.0 - tau, 2.0


def _pair_derivatives(logistics, labels_i, labels_j, alpha_b: float, gradient: str):
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
    if gradient == "type3":  # Eq. 21: 2a(1 - sigma_b) if u = 1, -2a sigma_b if u = -1
        return (2.0 * alpha_b) * ops.where(higher, a, ops.where(lower, -b, 0.0)) / d
    return ops.where(higher, pair_grads, ops.where(lower, -pair_grads, 0.0))  # Eq. 20


def _exp_is_exact(scores, mask, alpha_b: float):
    """Whether every list's valid spread fits ``_EXP_SPREAD_LIMIT`` (bool scalar)."""
    x = scores * alpha_b
    if 0 in tuple(x.shape):  # no list, or lists of no document (PyTorch's max refuses them)
        return ops.convert_to_tensor(True)
    spread = (ops.max(ops.where(mask, x, numerics.full_like(x, float("-inf"))), axis=-1)
              - ops.min(ops.where(mask, x, numerics.full_like(x, float("inf"))), axis=-1))
    return ops.all(spread <= _EXP_SPREAD_LIMIT[lists.dtype_name(x)])  # -inf: empty lists


def _ranks_backward_body(upstream, scores, labels, mask, alpha_b, gradient, logistics):
    r"""d loss / d scores from d loss / d ranks (Eq. 17-18 with Eq. 11/20/21).

    With :math:`g_{kj} = \sigma^{+\prime}(s_k - s_j)` and :math:`\delta =
    \partial L / \partial r`, :math:`\partial L/\partial s_k = \sum_j \delta_j
    g_{jk} - \delta_k \sum_j g_{kj}`. Type1 G is symmetric, type2 and type3 G
    antisymmetric (:math:`u_{jk} = -u_{kj}`), so both sums are one sum over row
    k of G: :math:`\mp\sum_j g_{kj}(\delta_j \pm \delta_k)` (upper signs for
    type2 and type3, lower for type1); the diagonal cancels (type1) or vanishes
    (:math:`u_{kk} = 0`). Every :math:`g_{kj}` is a function of the logistic
    :math:`\sigma(\alpha_b(s_j - s_k))`, from ``logistics``
    (:class:`_LogisticsByExp` or :class:`_LogisticsByTanh`), which also zero
    the pairs of padded documents, so no ``[B, L, L]`` mask is formed. On JAX
    one pass over the pairs (:func:`pairs.row_sums`: G is never stored); on
    PyTorch, whose eager kernels store every pair tensor, G and then its row
    sums :math:`G\delta` and :math:`G 1` (the fewest passes).
    ``upstream`` is 0 at padded documents (:func:`_ranks_backward` masks it).
    """
    values = logistics.per_document(scores * alpha_b, mask)
    sign = 1.0 if gradient != "type1" else -1.0
    columns, fills = [values, upstream], [logistics.padded_value(values), 0.0]
    if gradient != "type1":
        labels = _below_valid(labels, mask, 1.0)
        columns.append(labels)
        fills.append(ops.min(labels) - 1.0)

    def pair_grads(value_columns, label_columns=None):
        return _pair_derivatives(
            logistics.pairs(values[:, :, None], value_columns),
            None if label_columns is None else labels[:, :, None], label_columns, alpha_b,
            gradient)

    if keras.backend.backend() == "jax":  # one fused pass, G never stored
        def terms(value_columns, upstream_columns, label_columns=None):
            return (pair_grads(value_columns, label_columns)
                    * (upstream_columns + sign * upstream[:, :, None]))

        grads = pairs.row_sums(terms, columns, fills)
    else:  # G once, then its two row sums G delta and G 1
        g = pair_grads(*(c[:, None, :] for c in columns[:1] + columns[2:]))
        grads = ops.sum(g * upstream[:, None, :], axis=-1) + sign * upstream * ops.sum(g, axis=-1)
    return ops.where(mask, -sign * grads, ops.zeros_like(grads))


def _ranks_backward(upstream, scores, labels, mask, alpha_b, gradient):
    r""":func:`_ranks_backward_body` with one ``exp`` per document where that is
    exact (every list's valid spread within ``_EXP_SPREAD_LIMIT``) and one
    ``tanh`` per pair where not; on JAX, lists up to ``TANH_MAX_LIST_SIZE``
    take the tanh form unconditionally. Padded entries of ``scores`` and
    ``upstream`` may hold anything. O(B L^2) time; O(B L^2) memory on PyTorch,
    O(B L) on JAX (XLA fuses the pairs). On PyTorch the choice of form reads
    one flag from the device.
    """
    dtype = scores.dtype
    zero = ops.zeros_like(scores)
    if 0 in tuple(scores.shape):  # no list, or lists of no document: nothing to sum
        return zero
    upstream = ops.where(mask, ops.cast(upstream, dtype), zero)
    scores = ops.where(mask, scores, zero)
    args = (upstream, scores, labels, mask, alpha_b, gradient)
    size = scores.shape[1]
    if (keras.backend.backend() == "jax" and size is not None
            and size <= TANH_MAX_LIST_SIZE):
        return _ranks_backward_body(*args, _LogisticsByTanh)
    return ops.cond(_exp_is_exact(scores, mask, alpha_b),
                    lambda: _ranks_backward_body(*args, _LogisticsByExp),
                    lambda: _ranks_backward_body(*args, _LogisticsByTanh))


def _tie_keys(scores, seed):
    """The tie-breaking keys of ``scores``' lists, drawn from ``seed``."""
    return sorting.random_tie_keys(ops.shape(scores), seed)


def exact_forward_ranks(scores, valid, tie_break: bool, seed, tie_keys=None):
    """The forward value of :func:`twin_sigmoid_ranks`, without a gradient.

    Returns ``(ranks, positions)``: float ranks (0 at padded documents) and
    int32 positions of the sort, equal to the ranks with tie breaking.
    ``tie_keys`` (int32 ``[B, L]``, from :func:`sorting.random_tie_keys`) may be
    given in place of ``seed``.
    """
    scores = ops.stop_gradient(ops.convert_to_tensor(scores))
    valid = ops.convert_to_tensor(valid)
    if tie_break:
        if tie_keys is None:
            tie_keys = _tie_keys(scores, seed)
        positions = sorting.exact_ranks(scores, valid, tie_keys)
        ranks = ops.where(valid, ops.cast(positions, scores.dtype), ops.zeros_like(scores))
    else:
        positions = sorting.exact_ranks(scores, valid)
        ranks = sorting.midranks(scores, valid)
    return ranks, positions


def twin_sigmoid_ranks(scores, labels=None, mask=None, gradient: str = "type1",
                       alpha_b: float = 1.0, tie_break: bool = True, seed=None):
    r"""Exact 1-based ranks with twin-sigmoid gradients (Eq. 12):
    :math:`r_i = 1 + \sum_{j \ne i,\, j\ \mathrm{valid}} (1 - \sigma^+(s_i - s_j))`.

    With ``tie_break=True`` (Section 4.2) ties are broken by a random
    permutation per list drawn from ``seed``; without it tied documents share
    the mean of their positions. Backward: Eq. 17-18 (27-28),
    :math:`\partial r_i/\partial s_i = -\sum_{j} g_{ij}`, :math:`\partial
    r_i/\partial s_j = g_{ij}`. ``labels`` (< 0 = padding) are required for
    type2/3. Returns ``[B, L]`` ranks in the compute dtype, 0 (and zero
    gradient) at padded documents.

    >>> s = ops.array([[0.1, 0.7, 0.4, -1.0]])
    >>> ranks = twin_sigmoid_ranks(s, labels=ops.array([[0., 2., 1., -1.]]), seed=0)
    >>> ops.convert_to_numpy(ranks).tolist()
    [[3.0, 1.0, 2.0, 0.0]]
    """
    if labels is not None:
        labels, scores, valid = lists.prepare_lists(labels, scores, mask)
    else:
        scores, valid = lists.prepare_scores(scores, mask)
    alpha_b = _validate(alpha_b, gradient, label_signs=labels)
    forward, _ = exact_forward_ranks(scores, valid, tie_break, seed)

    def backward(upstream, s, labels, valid):
        return _ranks_backward(upstream, s, labels, valid, alpha_b, gradient)

    return with_gradient(forward, scores, backward, labels, valid)


def twin_sigmoid_metric(metric: str, labels, scores, valid, topn: Optional[int] = None,
                        gradient: str = "type1", alpha_b: float = 1.0, tie_break: bool = True,
                        seed=None):
    r"""A rank metric ``[B]`` at the exact ranks of :func:`twin_sigmoid_ranks`,
    with the twin-sigmoid gradient (Eq. 17-18 chained onto Eq. 29, 31-33).

    The value is :func:`rank_metrics.value_and_rank_gradient`'s metric at the
    ranks of :func:`exact_forward_ranks` (Eq. 12 forward; ties broken by keys
    drawn from ``seed`` when ``tie_break``); the gradient is
    :func:`with_twin_sigmoid_gradient`'s.

    Args:
      metric: a metric name of :mod:`~tfr_extensions.ops.vocabulary`.
      labels, scores, valid: as prepared by :func:`lists.prepare_lists`.
      topn: the metric's cutoff; None = the whole list.
      gradient, alpha_b, tie_break, seed: as in :func:`twin_sigmoid_ranks`
        (validated).

    >>> labels, scores = ops.array([[0., 1., 2.]]), ops.array([[3., 2., 1.]])
    >>> value = twin_sigmoid_metric("ndcg", labels, scores, labels >= 0, gradient="type3", seed=0)
    >>> round(float(value[0]), 4)  # nDCG of the reversed order
    0.5869
    """
    ranks, positions = exact_forward_ranks(scores, valid, tie_break, seed)
    value, rank_gradient = rank_metrics.value_and_rank_gradient(
        metric, labels, ranks, valid, topn, positions)
    return with_twin_sigmoid_gradient(value, rank_gradient, scores, labels, valid, gradient,
                                      alpha_b)


def with_twin_sigmoid_gradient(value, rank_gradient, scores, labels, valid,
                               gradient: str, alpha_b: float):
    r"""``value`` ``[B]``, a function of the twin-sigmoid ranks of ``scores``,
    with the gradient of Eq. 17-18 chained onto its known rank derivative
    ``rank_gradient`` ``[B, L]``: :math:`\partial v / \partial s_k = \sum_d
    \frac{\partial v}{\partial r_d} \frac{\partial r_d}{\partial s_k}`."""
    value = ops.stop_gradient(ops.convert_to_tensor(value))
    rank_gradient = ops.stop_gradient(ops.convert_to_tensor(rank_gradient))
    scores = ops.convert_to_tensor(scores)

    def backward(upstream, s, rank_gradient, labels, valid):
        return _ranks_backward(upstream[:, None] * rank_gradient, s, labels, valid, alpha_b,
                               gradient)

    return with_gradient(value, scores, backward, rank_gradient, labels, valid)
