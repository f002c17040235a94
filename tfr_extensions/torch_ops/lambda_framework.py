"""LambdaLoss's PyTorch-native body: :func:`tfr_extensions.losses.lambda_loss`'s math (in
``keras.ops``) under the PyTorch bad-input screening, whose generic form's Python overhead is
a tenth of a step at 64 lists of 32. ``KERAS_BACKEND=torch python -m benchmarks.allrank_losses
--cases lambda_loss lambda_ranknet --sizes 32 --threads 1 --clock cpu``: 1.09 / 1.01x allRank
1.4.3 with the generic one, ``docs/speed.md``'s here.
"""
from tfr_extensions.losses import lambda_framework


def lambda_loss(labels, scores, *, mask, weighting="ndcg_loss2pp", sigma=1.0, mu=10.0,
                topn=None):
    """``(losses, weights)`` of :func:`tfr_extensions.losses.lambda_loss` on screened
    inputs and checked options."""
    return lambda_framework.lambda_loss_of(labels, scores, mask, weighting, sigma, mu, topn)
