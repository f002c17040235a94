"""NeuralNDCG's PyTorch-native body: :func:`tfr_extensions.losses.neural_ndcg_loss`'s math
(NeuralSort and the nDCG, in ``keras.ops``) with the Sinkhorn loop, where its time goes, of
:mod:`tfr_extensions.torch_ops.sinkhorn` (which names the figure that keeps it), under the
PyTorch bad-input screening."""
import functools

from tfr_extensions.losses import relaxed_sorting
from tfr_extensions.torch_ops.sinkhorn import sinkhorn_scaling


def neural_ndcg_loss(labels, scores, *, mask, temperature=1.0, topn=None, transposed=False,
                     sinkhorn_iterations=50, sinkhorn_tolerance=1e-6):
    """``(losses, weights)`` of :func:`tfr_extensions.losses.neural_ndcg_loss` on
    screened inputs and checked options."""
    return relaxed_sorting.neural_ndcg_of(
        labels, scores, mask, temperature, topn, transposed,
        functools.partial(sinkhorn_scaling, iterations=sinkhorn_iterations,
                          tolerance=sinkhorn_tolerance))
