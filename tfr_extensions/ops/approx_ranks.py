r"""Qin et al.'s smooth ranks that ApproxNDCG differentiates (Bruch et al.,
``approxndcg-revisited.txt``, Eq. 5-6): the one definition (losses, pipelines, benchmarks),
checked against TF-Ranking's ``losses_impl.approx_ranks``; pairs summed by ``xp.row_sums``.
"""
from tfr_extensions import arrays


def approx_ranks(scores, mask=None, temperature: float = 1.0):
    r"""Smooth ranks, Eq. 5-6:
    :math:`\hat\pi(i) = 1 + \sum_{j \ne i} \sigma\big((s_j - s_i)/T\big)` over the valid
    documents j (:math:`\alpha = 1/T` in Eq. 6).

    Without ``mask``, TF-Ranking's ``approx_ranks`` of ``scores / T``; with it, padded j are
    left out of every sum and a padded document's rank is 1/2. The difference is taken before
    the division: no ``inf - inf``.

    Args:
      scores: float ``[batch, list_size]``.
      mask: optional bool ``[batch, list_size]``, True = valid; None = all valid.
      temperature: :math:`T > 0`; smaller is closer to the true ranks.

    Returns:
      float ``[batch, list_size]``.

    >>> [[float(r) for r in row] for row in approx_ranks([[0.0, 0.0, 100.0]])]
    [[2.5, 2.5, 1.0]]
    >>> [[float(r) for r in row] for row in approx_ranks([[0.0, 0.0, 100.0]],
    ...                                                  [[True, False, True]])]
    [[2.0, 0.5, 1.0]]
    """
    xp = arrays.namespace()
    scores = xp.convert_to_tensor(scores)
    rows = scores[:, :, None]

    def beats(columns, *column_mask):  # [B, i, j]: sigma((s_j - s_i)/T)
        terms = xp.sigmoid((columns - rows) / temperature)
        return terms if not column_mask else xp.where(column_mask[0], terms,
                                                       xp.zeros_like(terms))

    if mask is None:  # (block padding: s_j = -inf, sigma = 0)
        return xp.row_sums(beats, [scores], [float("-inf")]) + 0.5  # sigma(0) = 1/2: + 1/2
    mask = xp.convert_to_tensor(mask)
    sums = xp.row_sums(beats, [scores, mask], [0.0, False])  # over valid j
    return xp.where(mask, sums + 0.5, xp.full_like(sums, 0.5))
