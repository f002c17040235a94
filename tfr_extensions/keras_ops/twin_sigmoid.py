r"""The twin-sigmoid and the exact, differentiable ranks built on it: the
``keras.ops`` twin of :mod:`tfr_extensions.ops.twin_sigmoid` (the same
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
forward by a sort; the backward pass forms the L x L pairwise derivatives
(Eq. 17-18 / 27-28) with ``keras.ops.custom_gradient``.

Numerics: every pair takes one ``exp``, :math:`e = e^{-\alpha_b |z|} \in (0, 1]`,
and :math:`\sigma_b(|z|) = 1/(1+e)`, :math:`\sigma_b(-|z|) = e/(1+e)`: both
exact to rounding (no cancellation, no overflow) for any z, so every
derivative is finite and bounded by :math:`2\alpha_b`, also for |z| = 1e4 or
an infinite score difference. The TensorFlow version gets the same values
from one ``exp`` per document (:math:`e_j/(e_i+e_j)`) where the spread allows
and one ``tanh`` per pair elsewhere; its XLA tricks (buckets, fused
programs) have no twin here, which needs none.
"""
from typing import Optional

from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import rank_metrics
from tfr_extensions.keras_ops import sorting
from tfr_extensions.ops import validation

GRADIENT_TYPES = ("type1", "type2", "type3")


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


def twin_sigmoid(x, alpha_b: float = 1.0, gradient: str = "type1", label_signs=None):
    r"""Element-wise twin-sigmoid :math:`\sigma^+(x)` (Eq. 11, 20, 21): forward
    0 for x < 0, 1/2 at x = 0, 1 for x > 0; backward
    :func:`twin_sigmoid_derivative`.

    >>> ops.convert_to_numpy(twin_sigmoid(ops.array([-2.0, 0.0, 3.0]))).tolist()
    [0.0, 0.5, 1.0]
    """
    alpha_b = _validate(alpha_b, gradient, label_signs)
    x = ops.convert_to_tensor(x)

    @ops.custom_gradient
    def _step(v):
        out = ops.where(v > 0, ops.ones_like(v),
                        ops.where(v < 0, ops.zeros_like(v), ops.full_like(v, 0.5)))

        def grad(*args, upstream=None):
            return _upstream(args, upstream) * twin_sigmoid_derivative(
                v, alpha_b, gradient, label_signs)

        return out, grad

    return _step(x)


def _ranks_backward(upstream, scores, labels, mask, alpha_b, gradient):
    r"""d loss / d scores from d loss / d ranks ``upstream`` (Eq. 17-18 with Eq.
    11/20/21).

    With :math:`g_{kj} = \sigma^{+\prime}(s_k - s_j)` and :math:`\delta =
    \partial L / \partial r`, :math:`\partial L/\partial s_k = \sum_j \delta_j
    g_{jk} - \delta_k \sum_j g_{kj}`. Type1 G is symmetric, type2/3 G
    antisymmetric, so both sums are one sum over row k of G:
    :math:`\mp\sum_j g_{kj}(\delta_j \pm \delta_k)` (upper signs for type2 and
    type3, lower for type1). Pairs with a padded document get 0.
    O(B L^2) time and memory (the pairs ``[B, L, L]``).
    """
    dtype = scores.dtype
    zero = ops.zeros_like(scores)
    upstream = ops.where(mask, ops.cast(upstream, dtype), zero)
    scores = ops.where(mask, scores, zero)  # padded entries may hold anything
    alpha = ops.cast(alpha_b, dtype)
    sig, sig_neg = _logistic_pair(alpha * (scores[:, :, None] - scores[:, None, :]))
    u = None
    if gradient != "type1":
        u = ops.sign(labels[:, :, None] - labels[:, None, :])
    pair_grads = _derivative_from_logistics(sig, sig_neg, alpha, gradient, u)
    pair_valid = ops.logical_and(mask[:, :, None], mask[:, None, :])
    pair_grads = ops.where(pair_valid, pair_grads, ops.zeros_like(pair_grads))
    sign = 1.0 if gradient != "type1" else -1.0
    terms = pair_grads * (upstream[:, None, :] + sign * upstream[:, :, None])
    grads = -sign * ops.sum(terms, axis=-1)
    return ops.where(mask, grads, zero)


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

    @ops.custom_gradient
    def _ranks(s):
        def grad(*args, upstream=None):
            return _ranks_backward(_upstream(args, upstream), s, labels, valid, alpha_b,
                                   gradient)

        return ops.copy(forward), grad

    return _ranks(scores)


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

    @ops.custom_gradient
    def _value(s):
        def grad(*args, upstream=None):
            delta = _upstream(args, upstream)[:, None] * rank_gradient
            return _ranks_backward(delta, s, labels, valid, alpha_b, gradient)

        return ops.copy(value), grad

    return _value(scores)
