"""Keras ranking losses; :func:`get` builds one by name (ours or TF-Ranking's)."""
from tfr_extensions.losses.base import RankingLoss
from tfr_extensions.losses.pairwise import NDCGBetaHingeLoss, RankNetLoss
from tfr_extensions.losses.registry import get, names
from tfr_extensions.losses.twin_sigmoid import TwinSigmoidLoss
from tfr_extensions.losses.policy_gradient import ExpectedUtilityLoss, MDPRankLoss
from tfr_extensions.losses.policy_gradient import SampledRankingMetric
from tfr_extensions.losses.soft_rank import SoftNDCGLoss
from tfr_extensions.losses.wassrank import WassRankLoss
