r"""Listwise losses: ApproxNDCG and ListNet, TF-Ranking's two listwise baselines as our own.

Equation numbers refer to ``approxndcg-revisited.txt`` (Bruch et al., "Revisiting
Approximate Metric Optimization in the Age of Deep Neural Networks", on Qin et al.'s
ApproxNDCG). ListNet is Cao et al., "Learning to Rank: From Pairwise Approach to Listwise
Approach" (ICML 2007). Both equal TF-Ranking 0.5.5's ``ApproxNDCGLoss`` and ``SoftmaxLoss``
(``tests/losses/test_listwise.py``), but padding is exactly absent here where TF-Ranking
approximates it with finite constants (see each function).
"""
from tfr_extensions import arrays
from tfr_extensions.arrays.extremes import clip_scores, dtype_max
from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import validation


@base.loss_function(torch="tfr_extensions.torch_ops.listwise:approx_ndcg_loss",
                    examples=[dict(temperature=0.5), dict(temperature=0.7)])
def approx_ndcg_loss(labels, scores, *, mask=None,
                     temperature: validation.Positive = 0.1):
    r"""ApproxNDCG: minus nDCG at the smooth ranks of Eq. 5-6.

    Per list :math:`-\frac{1}{DCG(\pi^*, y)}\sum_i \frac{2^{y_i} - 1}{\log_2(1 + \hat\pi(i))}`
    (Eq. 3-4), :math:`DCG(\pi^*, y)` the ideal DCG, with
    :math:`\hat\pi(i) = 1 + \sum_{j \ne i} \sigma((s_j - s_i)/T)` over the valid documents
    (:func:`tfr_extensions.ops.approx_ranks.approx_ranks`, Eq. 6 with :math:`\alpha = 1/T`).
    Only saturating sigmoids of score differences enter: no clipping is needed. TF-Ranking's
    padded logits (1000 below the list's minimum) get sigmoid 0 in float32, as here.

    Args:
      temperature: :math:`T > 0` (TF-Ranking's default 0.1); smaller is closer to true ranks.

    Returns:
      ``(losses, weights)``, ``[batch]`` each: minus the smooth nDCG (0 at weight 0).

    >>> losses, _ = approx_ndcg_loss([[1., 0.]], [[0.6, 0.8]])
    >>> round(float(losses[0]), 6)  # TF-Ranking's docstring: -0.655107
    -0.655107
    """
    xp = arrays.namespace()
    ranks = xp.approx_ranks.approx_ranks(scores, mask, temperature)
    dcg = xp.sum(xp.lists.gains(labels) * xp.lists.log2_discount(ranks), axis=-1)
    ndcg = xp.safe_divide(dcg, xp.rank_metrics.ideal_dcg(labels, mask))
    return -ndcg, xp.cast(xp.lists.has_relevant(labels, mask), xp.dtype_name(scores))


@base.loss_function(examples=[dict(temperature=0.5), dict(temperature=0.3)])
def listnet_loss(labels, scores, *, mask=None,
                 temperature: validation.Positive = 1.0):
    r"""ListNet: cross entropy of the top-one probabilities, weighted by the label sum.

    Per list, loss :math:`-\sum_i \frac{y_i}{\sum_k y_k} \log\frac{e^{s_i/T}}{\sum_j e^{s_j/T}}`
    over the valid documents and weight :math:`\sum_k y_k`, so ``losses * weights`` is
    TF-Ranking's per-list :math:`-\sum_i y_i \log \mathrm{softmax}(s/T)_i` (``SoftmaxLoss``).
    Unlike TF-Ranking, a per-item ``sample_weight`` does not multiply the labels (conventions:
    :mod:`~tfr_extensions.losses.base`), and padding is absent (TF-Ranking's logit is
    :math:`\log 10^{-10}`).

    Numerics: :math:`x = s/T` is clipped to ``dtype.max / 4`` before and after the division;
    with :math:`m` the list's largest valid :math:`x`,
    :math:`-\log\mathrm{softmax}(x)_i = \log\sum_j e^{x_j - m} - (x_i - m)`: ``exp`` arguments
    are <= 0, the sum >= 1, and the value exact where :math:`x_i - m` is (two relevant
    documents tied at :math:`10^{30}` give :math:`\log 2` each).

    Args:
      temperature: :math:`T > 0`, dividing the scores.

    Returns:
      ``(losses, weights)``, ``[batch]`` each: the cross entropy, the sum of the valid labels.

    >>> losses, weights = listnet_loss([[1., 0.]], [[0.6, 0.8]])
    >>> round(float(losses[0] * weights[0]), 6)  # TF-Ranking's docstring: 0.7981389
    0.798139
    """
    xp = arrays.namespace()
    logits = clip_scores(clip_scores(scores) / temperature)  # (s / T may overflow)
    floor = -dtype_max(scores) / 4.0  # the lowest clipped logit
    floored = xp.where(mask, logits, xp.full_like(logits, floor))
    # the max of no documents is the floor (JAX's and PyTorch's max refuse an empty axis)
    top = (floored[:, :1] if 0 in tuple(logits.shape)
           else xp.max(floored, axis=-1, keepdims=True))
    top = xp.stop_gradient(xp.maximum(top, floor))
    shifted = xp.where(mask, logits - top, xp.zeros_like(logits))  # in [-max/2, 0]
    total = xp.sum(xp.where(mask, xp.exp(shifted), xp.zeros_like(shifted)), axis=-1,
                   keepdims=True)  # >= 1 where the list has a valid document
    log_total = xp.log(xp.where(total > 0, total, xp.ones_like(total)))
    label_sum = xp.sum(labels, axis=-1)  # padded labels are 0
    targets = xp.safe_divide(labels, label_sum[:, None])
    # -log softmax = log(total) - (x - top), exact where x - top is (tied scores of 1e30)
    terms = xp.where(mask, targets * (log_total - shifted), xp.zeros_like(logits))
    return xp.sum(terms, axis=-1), label_sum


@register
class ApproxNDCGLoss(base.RankingLoss):
    r"""Keras loss of :func:`approx_ndcg_loss`.

    >>> round(float(ApproxNDCGLoss()([[1., 0.]], [[0.6, 0.8]])), 6)
    -0.655107
    """

    function = approx_ndcg_loss

    def __init__(self, temperature=0.1, ragged=False, reduction=base.DEFAULT_REDUCTION,
                 name="approx_ndcg"):
        super().__init__(locals())


@register
class ListNetLoss(base.RankingLoss):
    r"""Keras loss of :func:`listnet_loss`.

    >>> round(float(ListNetLoss()([[1., 0.]], [[0.6, 0.8]])), 6)
    0.798139
    """

    function = listnet_loss

    def __init__(self, temperature=1.0, ragged=False, reduction=base.DEFAULT_REDUCTION,
                 name="listnet"):
        super().__init__(locals())

