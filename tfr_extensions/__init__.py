"""tfr_extensions: learning-to-rank research methods as TF-Ranking components.

    import tfr_extensions as tfrx
    loss = tfrx.losses.get("twin_ndcg_type3", topn=10)
"""
from tfr_extensions import adversarial, data, losses, metrics, ops
from tfr_extensions import evaluation, models, serving

__version__ = "0.1.0"
