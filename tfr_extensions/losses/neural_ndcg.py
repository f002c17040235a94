r"""NeuralNDCG: nDCG at NeuralSort's relaxed sorting, made doubly stochastic by Sinkhorn scaling.

Pobrotyn and Bialobrzeski, "NeuralNDCG: Direct Optimisation of a Ranking Metric via
Differentiable Relaxation of Sorting" (2021; the paper is not in ``shared/papers``, so
no equation numbers are cited), on NeuralSort (Grover, Wang, Zweig and Ermon,
"Stochastic Optimization of Sorting Networks via Continuous Relaxations", ICLR 2019),
and its authors' code in allRank (``allrank/models/losses/neuralNDCG.py``), the deterministic
variant. Per list, with n valid documents, scores :math:`s`, gains :math:`g_i = 2^{y_i} - 1`:

1. NeuralSort's relaxed permutation matrix (positions r = 1..n x documents):
   :math:`\hat P[r, :] = \mathrm{softmax}\big(((n + 1 - 2r)\,s - A_s\mathbb 1)/\tau\big)`,
   :math:`(A_s\mathbb 1)_i = \sum_j |s_i - s_j|`; each row is a distribution over the
   documents, and as :math:`\tau \to 0` row r picks the document of rank r.
2. Sinkhorn scaling: each iteration divides every column of :math:`\hat P` by its sum,
   then every row by its sum; a list stops after the first iteration whose row and
   column sums are all within ``sinkhorn_tolerance`` of 1, or after
   ``sinkhorn_iterations`` (allRank's rule, 50 and 1e-6, applied per list here where
   allRank stops when the whole batch has converged). ``sinkhorn_tolerance=0`` runs
   every iteration.
3. NeuralNDCG@k (k = ``topn``, all positions if None), with
   :math:`D_r = 1/\log_2(1 + r)` for r <= k and 0 beyond:
   :math:`\frac{1}{IDCG@k}\sum_r D_r\,(\hat P g)_r`, the discounted expected gain of
   each position; ``transposed=True``: :math:`\frac{1}{IDCG@k}\sum_i g_i\,(\hat
   P^T D)_i`, each document's gain at its expected discount (allRank's
   ``neuralNDCG_transposed``). Both are the bilinear form :math:`D^T\hat P g`, so the
   two variants are equal up to rounding (allRank's too); they differ in the order of
   the sums only.

The loss is minus NeuralNDCG@k; IDCG@k is the ideal DCG of the labels. The gradient is
the backend's derivative through every Sinkhorn iteration run (as allRank's).

**Padding** takes no part: the matrix is built over the valid documents only (n
counts them, padded rows and columns are 0, and Sinkhorn's sums and its stopping test
run over the valid block), so a padded list has exactly its unpadded list's value and
gradient, and padded documents get exactly zero gradient, wherever the padding sits.
allRank sets padded scores to -1e8, the padded block of :math:`\hat P` to ones (uniform
rows) and masks it after Sinkhorn: the same values when the padding is at the end of the
list, which allRank's masking of the position rows by the documents' padding assumes.

**Numerics.** The scores are clipped to +-``dtype.max / 4``, divided by
:math:`\tau`, and clipped to +-``dtype.max / (8 n)``
(:func:`tfr_extensions.ops.losses.neural_ndcg.scaled_scores`), so every logit and every
difference of two is finite; below those bounds (+-1e30 and far beyond) nothing
changes, beyond them the scores saturate (gradient 0). A logit sums n score
differences, so it carries a rounding error of about :math:`n \max|s| \epsilon / \tau`
(:math:`\epsilon`: the dtype's): scores closer than that tie (0 and 1 beside 1e37 share
their rows), in allRank as here. The softmax shifts by the row's
largest logit; masked logits are the lowest finite number, not a product with a mask.
Every column of :math:`\hat P` has an entry of at least 1/n (row r's largest entry is the
document of rank r), so Sinkhorn never divides by 0 in the valid block; the divisions
are guarded all the same. Tied scores (and all-equal ones) split their rows evenly
(:math:`|s_i - s_j|` has derivative 0 at a tie). Cost: :math:`O(B L^2)` memory per
Sinkhorn iteration, kept for the backward pass.
"""
from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import validation


def neural_ndcg_loss(labels, scores, *, mask=None, temperature=1.0, topn=None,
                     transposed=False, sinkhorn_iterations=50, sinkhorn_tolerance=1e-6):
    r"""NeuralNDCG: minus nDCG@k at NeuralSort's Sinkhorn-scaled relaxed sorting.

    Per list, :math:`-\frac{1}{IDCG@k}\sum_{r \le k} \frac{(\mathrm{sinkhorn}(\hat P)
    g)_r}{\log_2(1 + r)}` with :math:`\hat P[r, :] = \mathrm{softmax}(((n + 1 - 2r)\,s
    - A_s\mathbb 1)/\tau)` and :math:`g = 2^y - 1`; the module docstring has the
    definition, the Sinkhorn stopping rule, the transposed variant and the numerics.

    Args:
      labels: float ``[batch, list_size]``, graded relevance; < 0 = padding.
      scores: float ``[batch, list_size]``.
      mask: optional bool ``[batch, list_size]``, True = valid.
      temperature: NeuralSort's :math:`\tau > 0`; smaller is closer to the true sort.
      topn: the cutoff k of nDCG@k; None uses every position.
      transposed: the transposed variant (each document's expected discount).
      sinkhorn_iterations: the most Sinkhorn iterations, >= 1.
      sinkhorn_tolerance: a list stops once its row and column sums are within this
        of 1, >= 0 (0: every iteration runs).

    Returns:
      ``(losses, weights)``, ``[batch]`` each: minus NeuralNDCG, and 1 for lists with
      a relevant document (0, with loss 0, otherwise).

    >>> losses, _ = neural_ndcg_loss([[0., 1., 2.]], [[3., 2., 1.]], temperature=1e-3)
    >>> round(float(losses[0]), 4)  # minus the exact nDCG
    -0.5869
    >>> losses, _ = neural_ndcg_loss([[1., 0.]], [[0.6, 0.8]])
    >>> round(float(losses[0]), 6)
    -0.797073
    """
    return NEURAL_NDCG.apply(labels, scores, mask, temperature=temperature, topn=topn,
                             transposed=transposed, sinkhorn_iterations=sinkhorn_iterations,
                             sinkhorn_tolerance=sinkhorn_tolerance)


NEURAL_NDCG = base.LossSpec(neural_ndcg_loss, {
    base.TENSORFLOW: "tfr_extensions.ops.losses.neural_ndcg:neural_ndcg_loss",
    base.KERAS_OPS: "tfr_extensions.keras_ops.losses.neural_ndcg:neural_ndcg_loss"}, {
    "temperature": validation.validate_positive,
    "topn": validation.validate_topn,
    "transposed": validation.validate_bool,
    "sinkhorn_iterations": validation.integer(minimum=1),
    "sinkhorn_tolerance": validation.number(minimum=0.0),
}, presets={"neural_ndcg_transposed": {"transposed": True}})


@register
class NeuralNDCGLoss(base.RankingLoss):
    r"""Keras loss of :func:`neural_ndcg_loss`: minus NeuralNDCG@k, per list.

    The options are :func:`neural_ndcg_loss`'s; ``ragged`` accepts
    ``tf.RaggedTensor`` labels and scores. ``get("neural_ndcg_transposed")`` is the
    transposed variant.

    >>> loss = NeuralNDCGLoss(temperature=1e-3)
    >>> round(float(loss([[0., 1., 2.]], [[3., 2., 1.]])), 4)  # -nDCG
    -0.5869
    """

    spec = NEURAL_NDCG

    def __init__(self, temperature=1.0, topn=None, transposed=False, sinkhorn_iterations=50,
                 sinkhorn_tolerance=1e-6, ragged=False, reduction=base.DEFAULT_REDUCTION,
                 name="neural_ndcg"):
        super().__init__(dict(temperature=temperature, topn=topn, transposed=transposed,
                              sinkhorn_iterations=sinkhorn_iterations,
                              sinkhorn_tolerance=sinkhorn_tolerance),
                         ragged=ragged, reduction=reduction, name=name)

    def get_config(self):
        config = super().get_config()  # ragged, reduction, name
        options = self.options
        config.update(temperature=options["temperature"], topn=options["topn"],
                      transposed=options["transposed"],
                      sinkhorn_iterations=options["sinkhorn_iterations"],
                      sinkhorn_tolerance=options["sinkhorn_tolerance"])
        return config
