"""Adversarial learning to rank: IRGAN (pointwise, pairwise) and its listwise version."""
from tfr_extensions.adversarial.irgan import IRGAN

#: the public names
__all__ = ["IRGAN"]
