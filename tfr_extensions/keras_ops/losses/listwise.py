r"""ApproxNDCG and ListNet in ``keras.ops``: the keras.ops twin of
:mod:`tfr_extensions.losses.listwise` (the same bodies, names and contracts;
the math, TF-Ranking's equivalence and the treatment of extreme scores are
documented there).

Equation numbers refer to ``approxndcg-revisited.txt`` (Eq. 3-6).

>>> from keras import ops
>>> losses, weights = approx_ndcg_loss(ops.array([[1., 0.]]), ops.array([[0.6, 0.8]]),
...                                    mask=ops.array([[True, True]]))
>>> round(float(ops.convert_to_numpy(losses)[0]), 6)  # TF-Ranking's docstring: -0.655107
-0.655107
"""
from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics
from tfr_extensions.keras_ops import rank_metrics
from tfr_extensions.keras_ops.approx_ranks import approx_ranks
from tfr_extensions.keras_ops.losses.pairwise import clip_scores, dtype_max


def approx_ndcg_loss(labels, scores, *, mask=None, temperature=0.1):
    r"""ApproxNDCG: :math:`-\frac{1}{DCG(\pi^*, y)}\sum_i \frac{2^{y_i} - 1}{\log_2(1 +
    \hat\pi(i))}` (Eq. 3-4) at the smooth ranks of
    :func:`tfr_extensions.keras_ops.approx_ranks.approx_ranks` (Eq. 5-6,
    :math:`\alpha = 1/T`); the keras.ops twin of
    :func:`tfr_extensions.losses.listwise.approx_ndcg_loss`.

    Returns ``(losses, weights)`` ``[batch]``: minus approxNDCG, and 1 for lists
    with a relevant document (0, with loss 0, otherwise).
    """
    ranks = approx_ranks(scores, mask, temperature)
    dcg = ops.sum(lists.gains(labels) * lists.log2_discount(ranks), axis=-1)
    ndcg = numerics.safe_divide(dcg, rank_metrics.ideal_dcg(labels, mask))
    return -ndcg, ops.cast(lists.has_relevant(labels, mask), scores.dtype)


def listnet_loss(labels, scores, *, mask=None, temperature=1.0):
    r"""ListNet: per list the cross entropy :math:`-\sum_i \frac{y_i}{\sum_k y_k}
    \log \mathrm{softmax}(s/T)_i` over the valid documents, with weight
    :math:`\sum_k y_k` (TF-Ranking's ``SoftmaxLoss``); the keras.ops twin of
    :func:`tfr_extensions.losses.listwise.listnet_loss`.

    Scores clipped to +-``dtype.max / 4`` before and after the division by T;
    :math:`-\log\mathrm{softmax}(x)_i = \log\sum_j e^{x_j - m} - (x_i - m)` with
    :math:`m` the largest valid logit (a constant of the backward pass); every
    ``exp`` and ``log`` has a masked argument.
    """
    logits = clip_scores(clip_scores(scores) / temperature)  # (s / T may overflow)
    floor = -dtype_max(scores) / 4.0  # the lowest clipped logit
    # One more column at the floor: the identity of the max, also for a list of 0
    # documents (not ops.max's `initial`, which Keras 3.15's PyTorch backend puts on
    # the CPU whatever the device of the scores; it also refuses a batch of 0 lists).
    floored = ops.pad(ops.where(mask, logits, numerics.full_like(logits, floor)),
                      [[0, 0], [0, 1]], constant_values=floor)
    top = (floored[:, :1] if 0 in tuple(floored.shape)
           else ops.max(floored, axis=-1, keepdims=True))
    top = ops.stop_gradient(top)
    shifted = ops.where(mask, logits - top, ops.zeros_like(logits))  # in [-max/2, 0]
    total = ops.sum(ops.where(mask, ops.exp(shifted), ops.zeros_like(shifted)), axis=-1,
                    keepdims=True)  # >= 1 where the list has a valid document
    log_total = ops.log(ops.where(total > 0, total, ops.ones_like(total)))
    label_sum = ops.sum(labels, axis=-1)  # padded labels are 0
    targets = numerics.safe_divide(labels, label_sum[:, None])
    # -log softmax = log(total) - (x - top), exact where x - top is (tied scores of 1e30)
    terms = ops.where(mask, targets * (log_total - shifted), ops.zeros_like(logits))
    return ops.sum(terms, axis=-1), label_sum
