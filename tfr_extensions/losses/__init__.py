"""Keras ranking losses; :func:`get` builds one by name (ours or TF-Ranking's)."""
from tfr_extensions.losses.base import RankingLoss
from tfr_extensions.losses.pairwise import NDCGBetaHingeLoss, RankNetLoss
from tfr_extensions.losses.registry import get, names
from tfr_extensions.losses.twin_sigmoid import TwinSigmoidLoss
