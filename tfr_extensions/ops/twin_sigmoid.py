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
the L x L pairwise derivatives (Eq. 17-18 / 27-28), through one ``tanh`` per pair
and one batched matrix product (under XLA, two fused row reductions).
"""
from typing import Optional

import tensorflow as tf

from tfr_extensions.ops import lists
from tfr_extensions.ops import sorting

GRADIENT_TYPES = ("type1", "type2", "type3")


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
    lists.validate_choice(gradient, GRADIENT_TYPES, "gradient")
    if gradient != "type1" and label_signs is None:
        raise ValueError(f"`label_signs` (or `labels`) is required for gradient={gradient!r}.")
    return lists.validate_positive(alpha_b, "alpha_b")


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


def label_sign_matrix(labels: tf.Tensor) -> tf.Tensor:
    """``u_ij = sign(y_i - y_j)``, ``[B, L, L]`` (Eq. 20)."""
    return tf.sign(labels[:, :, None] - labels[:, None, :])


# Padded documents enter the backward pass with a score this far (in units of
# alpha_b * score / 2) below the list's lowest valid score, and a label 1 below
# its lowest valid label. tanh saturates to exactly -1/+1 there (|x| > 20 is
# enough in float64), so every pair with a padded document gets derivative 0
# without a [B, L, L] mask. Finite, so no inf - inf.
_PADDED_SCORE_GAP = 1e3


def _below_valid(values: tf.Tensor, mask: tf.Tensor, gap: float) -> tf.Tensor:
    """``values`` with padded entries replaced by (lowest valid value - gap)."""
    big = tf.constant(float("inf"), values.dtype)
    lowest = tf.reduce_min(tf.where(mask, values, big), axis=-1, keepdims=True)
    lowest = tf.where(tf.math.is_finite(lowest), lowest, tf.constant(0, lowest.dtype))
    return tf.where(mask, values, lowest - gap)


#: Lists of a static length up to this take the two backward sums as row
#: reductions instead of one batched matrix product: under XLA, which fuses
#: them with the element-wise chain that builds G (1.05-1.2x faster at
#: L = 32-512 on CPU, slower at 1024), and in graph mode up to
#: ``GRAPH_REDUCE_MAX_LIST_SIZE``, where small batched products are slow.
REDUCE_MAX_LIST_SIZE = 512
GRAPH_REDUCE_MAX_LIST_SIZE = 64


def _reduce_is_faster(pair_grads: tf.Tensor) -> bool:
    size = pair_grads.shape[-1]
    if size is None:
        return False
    if lists.compiling_with_xla():
        return size <= REDUCE_MAX_LIST_SIZE
    return size <= GRAPH_REDUCE_MAX_LIST_SIZE


def _ranks_backward(upstream, scores, labels, mask, alpha_b, gradient):
    r"""d loss / d scores from d loss / d ranks (Eq. 17-18 with Eq. 11/20/21).

    With :math:`g_{ij} = \sigma^{+\prime}(s_i - s_j)`,
    :math:`\partial L/\partial s_k = \sum_i \delta_i g_{ik} - \delta_k \sum_j g_{kj}`,
    :math:`\delta = \partial L / \partial r`. All three derivatives are written with
    :math:`\tau_{ij} = \tanh(\alpha_b (s_j - s_i)/2) = 1 - 2\sigma_b(s_i - s_j)`:
    type1 :math:`g = \tfrac{\alpha_b}{4}(1 - \tau^2)` (symmetric), type2
    :math:`g = u\,\tfrac{\alpha_b}{4}(1 - \tau^2)` and type3
    :math:`g = \alpha_b\,u\,(u\tau + 1)` (both antisymmetric), so both sums come
    from one batched product :math:`G\,[\delta, 1]`. The diagonal cancels
    (type1) or vanishes (:math:`u_{ii} = 0`). Peak memory in graph mode: two
    ``[B, L, L]`` buffers (tau, and the label signs for type2/3; TF reuses
    them in place along the chain); under XLA, up to ``REDUCE_MAX_LIST_SIZE``
    documents, the chain fuses into two row reductions and G is never stored.
    """
    upstream = tf.where(mask, upstream, tf.constant(0, upstream.dtype))
    half_scaled = _below_valid(scores * (0.5 * alpha_b), mask, _PADDED_SCORE_GAP)
    tau = tf.tanh(half_scaled[:, None, :] - half_scaled[:, :, None])  # [B, L, L]
    if gradient == "type3":
        signs = label_sign_matrix(_below_valid(labels, mask, 1.0))
        pair_grads = signs * (signs * tau + 1.0)
        scale, symmetric = alpha_b, False
    else:
        pair_grads = 1.0 - tf.square(tau)
        if gradient == "type2":
            pair_grads = label_sign_matrix(_below_valid(labels, mask, 1.0)) * pair_grads
        scale, symmetric = 0.25 * alpha_b, gradient == "type1"
    if _reduce_is_faster(pair_grads):  # under XLA both sums fuse with G's chain
        weighted = tf.reduce_sum(pair_grads * upstream[:, None, :], axis=-1)  # G delta
        row_sums = tf.reduce_sum(pair_grads, axis=-1)  # G 1
    else:
        both = tf.linalg.matmul(pair_grads, tf.stack([upstream, tf.ones_like(upstream)], -1))
        weighted, row_sums = both[..., 0], both[..., 1]
    from_others = weighted if symmetric else -weighted  # sum_i delta_i g_ik
    grads = scale * (from_others - upstream * row_sums)
    return tf.where(mask, grads, tf.constant(0, grads.dtype))


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
    return ranks_and_positions(scores, labels, mask, gradient, alpha_b, tie_break, seed)[0]


def ranks_and_positions(scores, labels=None, mask=None, gradient: str = "type1",
                        alpha_b: float = 1.0, tie_break: bool = True,
                        seed: lists.Seed = None):
    """:func:`twin_sigmoid_ranks` plus the integer positions of the forward
    pass (int32 ``[B, L]``; equal to the ranks with tie breaking, ties by index
    without), which the rank metrics reuse instead of sorting again."""
    if labels is not None:
        labels, scores, valid = lists.prepare_lists(labels, scores, mask)
    else:
        scores, valid = lists.prepare_scores(scores, mask)
    alpha_b = _validate(alpha_b, gradient, label_signs=labels)
    return prepared_ranks_and_positions(scores, labels, valid, gradient, alpha_b,
                                        tie_break, seed)


def exact_forward_ranks(scores, valid, tie_break: bool, seed: lists.Seed):
    """The forward value of :func:`twin_sigmoid_ranks`, without a gradient.

    Returns ``(ranks, positions)``: float ranks (0 at padded documents) and
    int32 positions of the sort, equal to the ranks with tie breaking.
    """
    if tie_break:
        seed_t = lists.seed_tensor(seed) if seed is not None else lists.fresh_seed()
        tie_keys = sorting.random_tie_keys(tf.shape(scores), seed_t)
        positions = sorting.exact_ranks(scores, valid, tie_keys)
        ranks = tf.where(valid, tf.cast(positions, scores.dtype), tf.constant(0, scores.dtype))
    else:
        positions = sorting.exact_ranks(scores, valid)
        ranks = sorting.midranks(scores, valid)
    return ranks, positions


def prepared_ranks_and_positions(scores, labels, valid, gradient, alpha_b, tie_break, seed):
    """:func:`ranks_and_positions` on inputs already through
    :func:`lists.prepare_lists` and validated."""
    forward, positions = exact_forward_ranks(scores, valid, tie_break, seed)

    @tf.custom_gradient
    def _ranks(s):
        def grad(upstream):
            return _ranks_backward(upstream, s, labels, valid, alpha_b, gradient)

        return tf.identity(forward), grad

    return _ranks(scores), positions


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
