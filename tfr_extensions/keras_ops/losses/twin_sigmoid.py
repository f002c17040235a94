r"""Direct optimization of Precision, AP, nDCG and nERR with twin-sigmoid ranks:
the ``keras.ops`` twin of the body in :mod:`tfr_extensions.losses.twin_sigmoid`.

Yu, "Optimize What You Evaluate With" (``twin-sigmoid-direct-metric-optimization.txt``):
the loss of a list is minus the metric of Eq. 13-16 at the ranks of Eq. 12;
its value is minus the exact metric, its gradient the paper's type1/2/3
gradient (Section 5), see :mod:`tfr_extensions.keras_ops.twin_sigmoid`.
"""
from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops.twin_sigmoid import twin_sigmoid_metric


def twin_sigmoid_loss(labels, scores, *, mask=None, metric="ndcg", topn=None, gradient="type1",
                      alpha_b=1.0, tie_break=True, seed=None):
    r"""Minus a rank metric computed on twin-sigmoid ranks, per list:
    :math:`\ell(\mathbf{s}, \mathbf{y}) = -M(\mathbf{y}, \pi^+(\mathbf{s}))` with
    :math:`M` Precision@k (Eq. 13), AP (Eq. 14), nDCG (Eq. 15) or nERR@k (Eq.
    16), :math:`\pi^+` the ranks of Eq. 12 and the gradient of Eq. 11
    (``type1``), 20 (``type2``) or 21 (``type3``), chained by Eq. 17-18 onto
    Eq. 29, 31-33.

    The body behind :func:`tfr_extensions.losses.twin_sigmoid_loss` on Keras's
    JAX and PyTorch backends: ``labels``, ``scores`` screened, ``mask`` bool
    ``[B, L]`` and the options checked by the shared decorator; ``seed`` is
    None, an int, a pair of ints or a seed tensor (tie breaking draws from
    :mod:`tfr_extensions.keras_ops.random`, a stream other than TensorFlow's).

    Returns:
      ``(losses, weights)``, ``[batch]`` each: minus the metric, and 1 for
      lists with a relevant document (0 otherwise).

    >>> losses, weights = twin_sigmoid_loss(ops.array([[0., 1., 2.]]), ops.array([[3., 2., 1.]]),
    ...                                     gradient="type3", seed=0)
    >>> round(float(losses[0]), 4), float(weights[0])  # minus nDCG
    (-0.5869, 1.0)
    """
    if mask is None:
        labels, scores, mask = lists.prepare_lists(labels, scores)
    value = twin_sigmoid_metric(metric, labels, scores, mask, topn, gradient, alpha_b,
                                tie_break, seed if tie_break else None)
    return -value, ops.cast(lists.has_relevant(labels, mask), scores.dtype)
