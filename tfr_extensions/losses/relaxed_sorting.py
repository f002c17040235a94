r"""NeuralNDCG: nDCG at NeuralSort's relaxed sorting, made doubly stochastic by Sinkhorn scaling.

Pobrotyn and Bialobrzeski, "NeuralNDCG: Direct Optimisation of a Ranking Metric via
Differentiable Relaxation of Sorting" (2021; not in ``shared/papers``, so no equation
numbers), on NeuralSort (Grover, Wang, Zweig and Ermon, "Stochastic Optimization of Sorting
Networks via Continuous Relaxations", ICLR 2019), and allRank's deterministic variant
(``allrank/models/losses/neuralNDCG.py``). Per list, with n valid documents, scores
:math:`s`, gains :math:`g_i = 2^{y_i} - 1`:

1. NeuralSort's relaxed permutation matrix (positions r = 1..n x documents):
   :math:`\hat P[r, :] = \mathrm{softmax}\big(((n + 1 - 2r)\,s - A_s\mathbb 1)/\tau\big)`,
   :math:`(A_s\mathbb 1)_i = \sum_j |s_i - s_j|`; row r is a distribution over the
   documents, which as :math:`\tau \to 0` picks the document of rank r.
2. Sinkhorn scaling: each iteration divides every column of :math:`\hat P` by its sum, then
   every row; a list stops after the first iteration whose row and column sums are all within
   ``sinkhorn_tolerance`` of 1 (0: never), or after ``sinkhorn_iterations`` (allRank's rule,
   per list).
3. NeuralNDCG@k (k = ``topn``, all positions if None), with :math:`D_r = 1/\log_2(1 + r)` for
   r <= k and 0 beyond: :math:`\frac{1}{IDCG@k}\sum_r D_r\,(\hat P g)_r`; ``transposed=True``
   (allRank's ``neuralNDCG_transposed``) sums :math:`\frac{1}{IDCG@k}\sum_i g_i\,(\hat P^T D)_i`:
   both are :math:`D^T\hat P g`, equal up to rounding.

The loss is minus NeuralNDCG@k; the gradient is the backend's derivative through every
Sinkhorn iteration run (as allRank's), in :math:`O(B L^2)` memory per iteration.

**Padding** takes no part: the matrix and Sinkhorn cover the valid block only, so a padded
list has exactly its unpadded list's value and gradient, wherever the padding sits
(allRank's masking assumes padding at the end).

**Numerics.** Scores are clipped to +-``dtype.max / 4``, divided by :math:`\tau`, and clipped
to +-``dtype.max / (8 n)`` (:func:`scaled_scores`), so every logit and difference of two is
finite (beyond those bounds scores saturate). Scores closer than the logit's rounding error,
about :math:`n \max|s| \epsilon / \tau`, tie (in allRank too) and split their rows evenly. The
softmax shifts by the row's largest logit, masked logits are the lowest finite number, and
every column of :math:`\hat P` has an entry >= 1/n, so Sinkhorn never divides by 0.
"""
import functools

from tfr_extensions import arrays
from tfr_extensions.arrays.extremes import clip_scores, dtype_max
from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import validation


def scaled_scores(scores, mask, temperature: float):
    r""":math:`x = s / \tau`, 0 at padding, ``[B, L]``, clipped (module docstring): every logit
    is at most :math:`3(n - 1) b` in magnitude, :math:`b` = ``dtype.max / (8 n)``."""
    xp = arrays.namespace()
    dtype = xp.dtype_name(scores)
    count = xp.sum(xp.cast(mask, dtype), axis=-1, keepdims=True)  # [B, 1]
    bound = xp.constant(dtype_max(scores) / 8.0, dtype) / xp.maximum(count, 1.0)
    x = clip_scores(scores) / xp.constant(temperature, dtype)
    x = xp.maximum(xp.minimum(x, bound), -bound)
    return xp.where(mask, x, xp.zeros_like(x))


def neural_sort(scores, mask, temperature: float):
    r"""NeuralSort's :math:`\hat P` ``[B, L, L]`` (positions x documents; module docstring,
    step 1), 0 in rows r > n and padded columns, and its valid positions (1..n), bool ``[B, L]``."""
    xp = arrays.namespace()
    x = scaled_scores(scores, mask, temperature)
    dtype = xp.dtype_name(x)
    count = xp.sum(xp.cast(mask, dtype), axis=-1, keepdims=True)  # [B, 1]
    pair_mask = xp.logical_and(mask[:, :, None], mask[:, None, :])
    abs_diffs = xp.abs(x[:, :, None] - x[:, None, :])  # [B, i, j]
    spread = xp.sum(xp.where(pair_mask, abs_diffs, xp.zeros_like(abs_diffs)), axis=-1)
    positions = xp.cast(xp.arange(1, xp.shape(x)[1] + 1), dtype)[None, :]  # [1, R]
    valid_positions = positions <= count  # [B, R]
    coefficients = count + 1.0 - 2.0 * positions  # [B, R]
    logits = coefficients[:, :, None] * x[:, None, :] - spread[:, None, :]  # [B, r, i]
    valid = xp.logical_and(valid_positions[:, :, None], mask[:, None, :])
    # the lowest finite logit: below every valid one (at most 3/8 dtype.max), so no share
    logits = xp.where(valid, logits, xp.full_like(logits, -dtype_max(x)))
    # the row softmax, shifted by its largest logit (keras.ops's warns on one-document lists)
    exps = xp.exp(logits - xp.stop_gradient(xp.amax(logits, axis=-1, keepdims=True)))
    probs = exps / xp.sum(exps, axis=-1, keepdims=True)  # (the sum is >= 1)
    return xp.where(valid, probs, xp.zeros_like(probs)), valid_positions


def neural_ndcg_of(labels, scores, mask, temperature: float, topn, transposed: bool,
                   scaling):
    """:func:`neural_ndcg_loss`'s math with Sinkhorn scaling ``scaling(matrix, row_mask,
    column_mask)`` (:mod:`tfr_extensions.torch_ops.relaxed_sorting` passes its own)."""
    xp = arrays.namespace()
    dtype = xp.dtype_name(scores)
    weights = xp.cast(xp.screening.has_relevant(labels, mask), dtype)
    if 0 in tuple(scores.shape):  # no list or no document (a max of nothing fails)
        return xp.sum(scores, axis=-1) * 0.0, weights
    probs, valid_positions = neural_sort(scores, mask, temperature)
    probs = scaling(probs, valid_positions, mask)  # [B, r, i], doubly stochastic
    positions = xp.cast(xp.arange(1, xp.shape(scores)[1] + 1), dtype)[None, :]  # [1, R]
    discounts = xp.lists.log2_discount(positions)
    if topn is not None:
        discounts = xp.where(positions <= topn, discounts, xp.zeros_like(discounts))
    gains = xp.where(mask, xp.lists.gains(labels), xp.zeros_like(labels))
    if transposed:  # each document's expected discount, times its gain
        expected_discounts = xp.sum(probs * discounts[:, :, None], axis=1)  # [B, i]
        dcg = xp.sum(gains * expected_discounts, axis=-1)
    else:  # each position's expected gain, times its discount
        expected_gains = xp.sum(probs * gains[:, None, :], axis=-1)  # [B, r]
        dcg = xp.sum(expected_gains * discounts, axis=-1)
    return -xp.safe_divide(dcg, xp.rank_metrics.ideal_dcg(labels, mask, topn)), weights


# (above the decorator, which imports the PyTorch-native body that takes them from here)
@base.loss_function(torch="tfr_extensions.torch_ops.relaxed_sorting:neural_ndcg_loss",
                    presets={"neural_ndcg_transposed": {"transposed": True}},
                    examples=[dict(temperature=0.5, topn=3, transposed=True, sinkhorn_iterations=7,
                                   sinkhorn_tolerance=1e-3),
                              dict(temperature=0.4, topn=2, transposed=True,
                                   sinkhorn_iterations=7, sinkhorn_tolerance=0.0)])
def neural_ndcg_loss(labels, scores, *, mask=None,
                     temperature: validation.Positive = 1.0, topn: validation.TopN = None,
                     transposed: validation.Flag = False,
                     sinkhorn_iterations: validation.Integer(minimum=1) = 50,
                     sinkhorn_tolerance: validation.Number(minimum=0.0) = 1e-6):
    r"""NeuralNDCG: minus nDCG@k at NeuralSort's Sinkhorn-scaled relaxed sorting.

    :math:`-\frac{1}{IDCG@k}\sum_{r \le k} \frac{(\mathrm{sinkhorn}(\hat P) g)_r}{\log_2(1 + r)}`
    per list (definition, transposed variant, numerics: module docstring).

    Args:
      temperature: NeuralSort's :math:`\tau > 0`; smaller is closer to the true sort.
      topn: the cutoff k of nDCG@k; None uses every position.
      transposed: the transposed variant (each document's expected discount).
      sinkhorn_iterations, sinkhorn_tolerance: the stopping rule's most iterations (>= 1) and
        tolerance (>= 0) (module docstring, step 2).

    Returns:
      ``(losses, weights)``, ``[batch]`` each: minus NeuralNDCG (0 at weight 0).

    >>> losses, _ = neural_ndcg_loss([[0., 1., 2.]], [[3., 2., 1.]], temperature=1e-3)
    >>> round(float(losses[0]), 4)  # minus the exact nDCG
    -0.5869
    >>> losses, _ = neural_ndcg_loss([[1., 0.]], [[0.6, 0.8]])
    >>> round(float(losses[0]), 6)
    -0.797073
    """
    xp = arrays.namespace()
    return neural_ndcg_of(labels, scores, mask, temperature, topn, transposed,
                          functools.partial(xp.sinkhorn.sinkhorn_scaling,
                                            iterations=sinkhorn_iterations,
                                            tolerance=sinkhorn_tolerance))


@register
class NeuralNDCGLoss(base.RankingLoss):
    r"""Keras loss of :func:`neural_ndcg_loss`.

    ``get("neural_ndcg_transposed")`` is the transposed variant.

    >>> loss = NeuralNDCGLoss(temperature=1e-3)
    >>> round(float(loss([[0., 1., 2.]], [[3., 2., 1.]])), 4)  # -nDCG
    -0.5869
    """

    function = neural_ndcg_loss

    def __init__(self, temperature=1.0, topn=None, transposed=False, sinkhorn_iterations=50,
                 sinkhorn_tolerance=1e-6, ragged=False, reduction=base.DEFAULT_REDUCTION,
                 name="neural_ndcg"):
        super().__init__(locals())

