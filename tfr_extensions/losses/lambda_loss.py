r"""LambdaLoss: pairwise logistic losses weighted by the change of a ranking metric.

Wang, Li, Golbandi, Bendersky and Najork, "The LambdaLoss Framework for Ranking
Metric Optimization" (CIKM 2018; the paper is not in ``../shared/papers``, so the
definitions below follow its weighting schemes as allRank implements them,
``allrank/models/losses/lambdaLoss.py``, which ``tests`` vendor and compare with).
A list's loss is :math:`-\sum_{(i,j)} \log_2 \sigma(\sigma_s (s_i - s_j))^{w_{ij}}`
with weights :math:`w_{ij}` computed at the current ranks (a constant of the
backward pass), so its gradient is LambdaRank's "lambdas" for the chosen scheme.

Extreme scores: the loss sums up to :math:`L^2` terms that grow linearly with
the score gaps, so the scores are clipped to :math:`\pm b`, :math:`b =
\sqrt{\text{dtype.max}}/4` (4.6e18 in float32; the bound of the squared hinge,
:func:`tfr_extensions.ops.losses.pairwise.clip_scores`), before and after the
scaling by :math:`\sigma_s`: each term is at most :math:`2b/\ln 2` times its
weight, and the sum stays finite. Below :math:`b` nothing changes; beyond it
scores saturate: distinct ones tie (ranked by index) and get gradient 0.
"""
from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import validation

#: the weighting schemes :math:`w_{ij}` of :func:`lambda_loss` (allRank's
#: ``rankNet_scheme``, ``lambdaRank_scheme``, ``ndcgLoss1_scheme``,
#: ``ndcgLoss2_scheme`` and ``ndcgLoss2PP_scheme``)
WEIGHTINGS = ("ranknet", "lambdarank", "ndcg_loss1", "ndcg_loss2", "ndcg_loss2pp")


def lambda_loss(labels, scores, *, mask=None, weighting="ndcg_loss2pp", sigma=1.0, mu=10.0,
                topn=None):
    r"""LambdaLoss: the metric-weighted pairwise logistic loss of the LambdaLoss paper.

    Per list,

    .. math::
        \ell = \sum_{(i,j) \in P} w_{ij}\,\log_2\bigl(1 + e^{-\sigma (s_i - s_j)}\bigr)
             = -\sum_{(i,j) \in P} \log_2 \Bigl(\frac{1}{1 + e^{-\sigma(s_i - s_j)}}
               \Bigr)^{w_{ij}}

    over the ordered pairs P of valid documents with :math:`y_i > y_j` (for
    ``ndcg_loss1``: all ordered pairs, :math:`i = j` included, as allRank sums
    them) whose predicted ranks are both within ``topn`` (allRank's ``k``: pairs
    whose positions are both in the top k; every pair without ``topn``).
    :math:`\sigma` is ``sigma``. With :math:`r_i` the rank of document i in the
    list sorted by score (ties to the lower index), :math:`D_i = \log_2(1 + r_i)`,
    :math:`G_i = (2^{y_i} - 1)/\mathrm{maxDCG@k}` (the ideal DCG at ``topn``) and
    :math:`\delta_{ij} = |1/\log_2(1 + |r_i - r_j|) - 1/\log_2(2 + |r_i - r_j|)|`
    (0 for :math:`i = j`), the weights are (``weighting``):

    * ``"ranknet"``: :math:`w_{ij} = 1` (RankNet without tied pairs);
    * ``"lambdarank"``: :math:`|G_i - G_j|\,|1/D_i - 1/D_j|`;
    * ``"ndcg_loss1"``: :math:`G_i / D_i`;
    * ``"ndcg_loss2"``: :math:`|G_i - G_j|\,\delta_{ij}`;
    * ``"ndcg_loss2pp"``: :math:`|G_i - G_j|\,(\mu\,\delta_{ij} + |1/D_i - 1/D_j|)`,
      ``mu`` :math:`= \mu` (NDCG-Loss2++: :math:`\mu` times NDCG-Loss2 plus LambdaRank).

    The weights are constants of the backward pass (the ranks come from a
    sort). ``-log2(sigmoid(x))`` is computed as ``softplus(-x) / ln 2``, exact for
    any gap where allRank clamps the sigmoid at 1e-10 (a pair's term saturates
    at 33.2 there). Without ``topn``, TF-Ranking's ``PairwiseLogisticLoss`` with
    ``temperature = 1/sigma`` and ``NDCGLambdaWeight(smooth_fraction=1/(1+mu))``
    (``ndcg_loss2pp``), ``NDCGLambdaWeightV2()`` (``ndcg_loss2``) or
    ``NDCGLambdaWeight(smooth_fraction=1)`` (``lambdarank``) gives per list this
    loss times :math:`L \ln 2` (natural log; L the padded list size, its weight
    heuristic), divided by :math:`1 + \mu` for ``ndcg_loss2pp``; with ``topn`` it
    keeps other pairs (``tests/losses/test_lambda_loss.py``).

    Args:
      labels: float ``[batch, list_size]``, graded relevance; < 0 = padding.
      scores: float ``[batch, list_size]``.
      mask: optional bool ``[batch, list_size]``, True = valid.
      weighting: one of :data:`WEIGHTINGS`.
      sigma: the scale :math:`\sigma > 0` of the score differences.
      mu: :math:`\mu \ge 0`, the weight of :math:`\delta_{ij}` in ``ndcg_loss2pp``
        (unused by the other schemes).
      topn: the cutoff k: None (the whole list) or an int >= 1.

    Returns:
      ``(losses, weights)``, ``[batch]`` each; weight 1 for lists with a relevant
      document, 0 (and loss 0) otherwise.

    >>> losses, _ = lambda_loss([[1., 0.]], [[0., 0.]], weighting="ranknet")
    >>> float(losses[0])  # -log2(1/2)
    1.0
    """
    return LAMBDA.apply(labels, scores, mask, weighting=weighting, sigma=sigma, mu=mu,
                        topn=topn)


LAMBDA = base.LossSpec(lambda_loss, {
    base.TENSORFLOW: "tfr_extensions.ops.losses.lambda_loss:lambda_loss",
    base.KERAS_OPS: "tfr_extensions.keras_ops.losses.lambda_loss:lambda_loss",
}, {
    "weighting": validation.choice(WEIGHTINGS),
    "sigma": validation.validate_positive,
    "mu": validation.number(minimum=0.0),
    "topn": validation.validate_topn,
}, presets={"lambda_loss": {},  # the paper's name, as DESIGN.md spells the registry name
            **{f"lambda_{weighting}": {"weighting": weighting} for weighting in WEIGHTINGS}})


@register
class LambdaLoss(base.RankingLoss):
    r"""Keras loss of :func:`lambda_loss`: LambdaLoss's weighted pairwise logistic loss.

    Registered as ``lambda`` (its key) and ``lambda_loss`` (the paper's name; the
    defaults), and as ``lambda_<weighting>`` for each of :data:`WEIGHTINGS`.

    >>> float(LambdaLoss(weighting="ranknet")([[1., 0.]], [[0., 0.]]))  # -log2(1/2)
    1.0
    """

    spec = LAMBDA

    def __init__(self, weighting="ndcg_loss2pp", sigma=1.0, mu=10.0, topn=None, ragged=False,
                 reduction=base.DEFAULT_REDUCTION, name="lambda"):
        super().__init__(dict(weighting=weighting, sigma=sigma, mu=mu, topn=topn),
                         ragged=ragged, reduction=reduction, name=name)

    def get_config(self):
        config = super().get_config()  # ragged, reduction, name
        options = self.options
        config.update(weighting=options["weighting"], sigma=options["sigma"],
                      mu=options["mu"], topn=options["topn"])
        return config
