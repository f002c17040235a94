"""Ranking losses: a pure function per loss, its Keras class, and :func:`get` by name.

Each loss is a function ``fn(labels, scores, *, mask=None, <options>) ->
(losses, weights)`` (per list, ``[batch]`` each; see
:mod:`tfr_extensions.losses.base` for the conventions and the bad-input
policy) and a Keras class over it with the same options, which
:func:`get` builds by name (ours or TF-Ranking's).
"""
from tfr_extensions.losses.base import RankingLoss
from tfr_extensions.losses.listwise import (ApproxNDCGLoss, ListNetLoss, approx_ndcg_loss,
                                            listnet_loss)
from tfr_extensions.losses.neural_ndcg import NeuralNDCGLoss, neural_ndcg_loss
from tfr_extensions.losses.pairwise import (NDCGBetaHingeLoss, RankNetLoss, ndcg_beta_hinge_loss,
                                            ranknet_loss)
from tfr_extensions.losses.lambda_loss import LambdaLoss, lambda_loss
from tfr_extensions.losses.registry import get, names
from tfr_extensions.losses.twin_sigmoid import TwinSigmoidLoss, twin_sigmoid_loss
from tfr_extensions.losses.policy_gradient import (ExpectedUtilityLoss, MDPRankLoss,
                                                   expected_utility_loss, mdprank_loss)
from tfr_extensions.losses.policy_gradient import SampledRankingMetric
from tfr_extensions.losses.soft_rank import SoftNDCGLoss, softndcg_loss
from tfr_extensions.losses.wassrank import WassRankLoss, wassrank_loss
