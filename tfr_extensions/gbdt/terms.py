r"""Gradient and Hessian of one padded block, from sums of its twin-sigmoid pair terms.

**Gradient.** For a list with scores :math:`s`, exact 1-based ranks :math:`r`
(one sort; ties broken by a random permutation, Section 4.2) and the metric
written as :math:`M = \frac{1}{Z}\sum_d w_d f(r_d)` (Eq. 13-16; positions and
weights held constant, :mod:`tfr_extensions.gbdt.metric_form`), let
:math:`\delta_d = \partial M/\partial r_d = w_d f'(r_d)/Z` (Eq. 29, 31-33) and
:math:`g_{ij} = \sigma^{+\prime}(s_i - s_j)` the twin-sigmoid derivative of Eq. 11
(type1), 20 (type2) or 21 (type3). With the rank derivatives of Eq. 17-18
(27-28), :math:`\partial r_i/\partial s_i = -\sum_j g_{ij}`,
:math:`\partial r_i/\partial s_k = g_{ik}`, the objective's gradient is

.. math::
    \mathrm{grad}_k = -\frac{\partial M}{\partial s_k}
                    = \delta_k \sum_j g_{kj} - \sum_i \delta_i\, g_{ik}.

**Hessian** (``hessian``). Write the type's twin-sigmoid derivative as
:math:`g_{ij} = \psi_{ij}'(s_i - s_j)`: the "virtual ranks"
:math:`\tilde r_i = 1 + \sum_{j \ne i} (1 - \psi_{ij}(s_i - s_j))` have exactly the Jacobian
of Eq. 17-18 (for type1, :math:`\psi = \sigma_b`: the smoothed rank of Eq. 12; for type3,
:math:`\psi_{ij}(z) = 2\log\sigma_b(z)` if :math:`u_{ij} = 1` and :math:`2\log\sigma_b(-z)`
if :math:`u_{ij}=-1`, a RankNet term). With :math:`\delta` piecewise constant in :math:`s`
(it depends on the exact ranks only), the gradient above is
:math:`-\nabla_s \sum_i \delta_i \tilde r_i(s)` between rank swaps, and its derivative along
:math:`s_k` is

.. math::
    H_{kk} = -\sum_i \delta_i \frac{\partial^2 \tilde r_i}{\partial s_k^2}
           = \delta_k \sum_j h_{kj} + \sum_i \delta_i\, h_{ik},\qquad
    h_{ij} = \psi_{ij}''(s_i - s_j).

With :math:`q_{ij} = \sigma(\alpha_b(s_j - s_i))` (so
:math:`\sigma_b(s_i - s_j) = 1 - q_{ij}`): type1 :math:`h = \alpha_b^2 q(1-q)(2q-1)`, type2
the same times :math:`u_{ij}`, type3 :math:`h = -2\alpha_b^2 q(1-q)|u_{ij}|`.

* ``"exact"`` (default): that diagonal. For type3, :math:`\delta \le 0` and
  :math:`h \le 0` make it non-negative with no change, and it equals
  :math:`2\alpha_b^2 \sum_j q_{kj}(1-q_{kj})(|\delta_k| + |\delta_j|)` over
  the pairs with different labels: LambdaMART's :math:`\rho(1-\rho)` form with
  the pair weight :math:`|\delta_k| + |\delta_j|`. For type1 and type2,
  :math:`h` changes sign with :math:`s_i - s_j` and vanishes at ties
  (:math:`\sigma''(0) = 0`; every score is tied at the first round), so the
  value used is :math:`\max(|H_{kk}|,\ \epsilon P_{kk})` with
  :math:`P_{kk} = \alpha_b^2 \sum_j q_{kj}(1-q_{kj})(|\delta_k| + |\delta_j|)`
  (over the type's pairs) and :math:`\epsilon` = ``hessian_floor``.
* ``"lambdamart"``: LambdaMART's Hessian,
  :math:`\alpha_b^2 \sum_j q_{kj}(1-q_{kj}) |\Delta M_{kj}|` over the type's
  pairs, with :math:`|\Delta M_{kj}| = |w_k - w_j|\,|f(r_k) - f(r_j)| / Z` the
  change of :math:`M` (weights held constant) when documents k and j trade
  ranks: for nDCG without a cutoff exactly LambdaMART's
  :math:`\sigma^2\rho(1-\rho)|\Delta\mathrm{nDCG}|` with :math:`\sigma = \alpha_b`.

``"exact"`` is the default because it is the Hessian of the gradient used;
how the two compare in training is in ``docs/notes/gbdt_objective.md``.

**alpha_b.** Gradient and Hessian are functions of :math:`\alpha_b s` times
:math:`\alpha_b` and :math:`\alpha_b^2`, so with LightGBM's Newton leaves
(:math:`-\sum g / \sum h`, ``lambda_l2`` 0) the trees, and the ranking, do not
depend on ``alpha_b``: it only scales the scores by :math:`1/\alpha_b` (and
the Hessian sums that ``min_sum_hessian_in_leaf`` bounds). The neural loss has
no such invariance; here the learning rate is the knob.

**Pair terms.** Every :math:`g` and :math:`h` above is a polynomial in :math:`q`
(:class:`PairTerm`: :math:`q`, :math:`q^2`, :math:`q^3`, and for ``"lambdamart"``
:math:`q(1-q)|\Delta M|`). Over the pairs that :mod:`tfr_extensions.gbdt.layout` lays out
``[B, R, C]``, each term's row sums and :math:`\delta`-weighted column sums are two batched
matrix products, and the gradient and Hessian are combinations of those sums. The terms are
written into one reused buffer per thread (:func:`tfr_extensions.gbdt.threads.workspace`).
The logistic of each pair comes from one ``exp`` per document
(:math:`q_{ij} = 1 / (1 + e_i / e_j)`, :math:`e = e^{\alpha_b (s - \max s)}`) while a list's
scores spread less than 60 / :math:`\alpha_b` (float32; 600 in float64), else from one
``exp`` per pair.

>>> [term.value for term in BlockTerms("ndcg", None, "type1", "exact", 1.0, 0.1, True,
...                                    np.dtype(np.float32)).pair_terms]
['q', 'q^2', 'q^3']
"""
import dataclasses
import enum
from typing import Dict, Optional, Tuple

import numpy as np

from tfr_extensions.gbdt import metric_form, threads
from tfr_extensions.gbdt.layout import Block

#: Largest spread ``alpha_b * (max - min)`` of a list's scores for which the
#: pair logistics come from one exp per document (then e >= e^-60, a normal
#: float32; e^-600 in float64). Its keys are the compute dtypes.
EXP_SPREAD_LIMIT = {np.dtype(np.float32): 60.0, np.dtype(np.float64): 600.0}


class PairTerm(enum.Enum):
    """A term :math:`T_{ij}` of a pair, summed per document (one plane of the buffer)."""

    Q = "q"  #: q_ij = sigma(alpha_b (s_j - s_i))
    Q2 = "q^2"
    Q3 = "q^3"
    LAMBDAMART = "q(1-q)|dM|"  #: q_ij (1 - q_ij) |Delta M_ij|: LambdaMART's Hessian weight


Q, Q2, Q3, LAMBDAMART = PairTerm.Q, PairTerm.Q2, PairTerm.Q3, PairTerm.LAMBDAMART
#: Sums of the pair terms per document: ``sums[term]`` ``[B, L]``.
Sums = Dict[PairTerm, np.ndarray]


def logistic(t: Sums) -> np.ndarray:
    """q."""
    return t[Q]


def curvature(t: Sums) -> np.ndarray:
    """q(1 - q) = q - q^2."""
    return t[Q] - t[Q2]


def cubic(t: Sums) -> np.ndarray:
    """q(1 - q)(2q - 1) = -2 q^3 + 3 q^2 - q."""
    return -2.0 * t[Q3] + 3.0 * t[Q2] - t[Q]


@dataclasses.dataclass(frozen=True)
class BlockTerms:
    """The objective's settings that the per-block math reads (see
    :func:`tfr_extensions.gbdt.twin_sigmoid_objective`), with ``dtype`` the
    NumPy compute dtype of the pair terms."""

    metric: str
    topn: Optional[int]
    gradient: str
    hessian: str
    alpha_b: float
    hessian_floor: float
    tie_break: bool
    dtype: np.dtype

    @property
    def pair_terms(self) -> Tuple[PairTerm, ...]:
        """The pair terms summed, powers of q in increasing order first: type3's
        g is q and its h q - q^2; type1/2's g is q - q^2 and h needs q^3."""
        if self.hessian == "lambdamart":
            return (Q, LAMBDAMART) if self.gradient == "type3" else (Q, Q2, LAMBDAMART)
        return (Q, Q2) if self.gradient == "type3" else (Q, Q2, Q3)

    def __call__(self, block: Block, scores, rng) -> Tuple[np.ndarray, np.ndarray]:
        """Gradient and Hessian ``[B, L]`` (float64) of one block at ``scores``
        ``[B, L]``; ties broken with ``rng`` (None: no tie breaking)."""
        valid = block.valid
        positions, order = metric_form.positions(scores, valid, rng)
        ranks = (positions.astype(np.float64) if self.tie_break
                 else metric_form.midranks(scores, valid, order))
        ranks = np.where(valid, ranks, 1.0)
        weights = metric_form.weights(self.metric, block, positions, order, self.topn)
        values, slopes = metric_form.transform(self.metric, ranks)
        norm = block.norm[:, None]
        delta = (weights * slopes / norm).astype(self.dtype)  # Eq. 29, 31-33
        scaled = tuple(t.astype(self.dtype).reshape(-1) for t in (weights / norm, values))
        x = self.alpha_b * np.where(valid, scores, 0.0)
        top = np.where(valid, x, -np.inf).max(1, keepdims=True)
        spread = top - np.where(valid, x, np.inf).min(1, keepdims=True)
        by_exp = bool((spread <= EXP_SPREAD_LIMIT[self.dtype]).all())
        if by_exp:  # one exp per document: e = exp(a s - max), 0 at padding
            per_document = np.exp(np.where(valid, x - top, -np.inf))
        else:  # logits a s, -inf at padding (one exp per pair)
            per_document = np.where(valid, x, -np.inf)
        flat = per_document.astype(self.dtype).reshape(-1)
        planes = len(self.pair_terms)
        rows = np.zeros((planes, 2, valid.shape[0] * (valid.shape[1] + 1)), self.dtype)
        cols = np.zeros_like(rows)
        for group in block.groups:
            for first, last in group.chunks:
                self._chunk_sums(group, slice(first, last), flat, by_exp, delta.reshape(-1),
                                 scaled, rows, cols)
        shape = (planes, valid.shape[0], valid.shape[1] + 1)
        sums = [t[:, j].reshape(shape)[:, :, :-1] for t in (rows, cols) for j in (0, 1)]
        return self._assemble(block, delta, sums)

    def _chunk_sums(self, group, chunk, flat, by_exp, delta, scaled, rows, cols):
        """Adds two sums of each pair term T ``[B, R, C]`` (:attr:`pair_terms`) of
        the rows ``chunk`` of ``group``, per document: into ``rows`` sum_c T[i, c]
        and sum_c T[i, c] delta_c at the row documents, into ``cols`` sum_i
        T[i, c] and sum_i delta_i T[i, c] at the column documents (``[planes,
        2, B * (L + 1)]``). The terms are written into one reused buffer, and
        the sums are two matrix products."""
        row_valid, col_valid = group.row_valid[:, chunk], group.col_valid
        row_gather, col_gather = group.row_gather[:, chunk], group.col_gather
        pair_terms = self.pair_terms
        size = len(pair_terms)
        buffer = threads.workspace((size + 1,) + row_valid.shape + col_valid.shape[1:],
                                   self.dtype)
        q, temp = buffer[0], buffer[size]
        with np.errstate(divide="ignore", over="ignore"):
            if by_exp:  # q_ic = sigma(a(s_c - s_i)) = 1 / (1 + e_i / e_c), e = 0 at padding
                row_exps = np.where(row_valid, flat[row_gather], 1.0)[:, :, None]
                np.multiply(row_exps, (1.0 / flat[col_gather])[:, None, :], out=q)
            else:  # logits: a s, -inf at padding
                row_logits = np.where(row_valid, flat[row_gather], 0.0)[:, :, None]
                np.subtract(row_logits, flat[col_gather][:, None, :], out=q)
                np.exp(q, out=q)
        q += 1.0
        np.reciprocal(q, out=q)
        for k, term in enumerate(pair_terms[1:], 1):
            if term is LAMBDAMART:  # q(1 - q) |w_i - w_c| |f(r_i) - f(r_c)|
                out = buffer[k]
                np.subtract(q, np.square(q, out=temp), out=out)
                for values in scaled:
                    np.subtract(values[row_gather][:, :, None], values[col_gather][:, None, :],
                                out=temp)
                    np.multiply(out, np.abs(temp, out=temp), out=out)
            else:  # q^2 = q q, q^3 = q^2 q: the plane before times q
                np.multiply(buffer[k - 1], q, out=buffer[k])
        terms = buffer[:size]
        left = np.empty((row_valid.shape[0], 2, row_valid.shape[1]), self.dtype)  # [1, delta]
        np.copyto(left[:, 0], row_valid)
        np.multiply(left[:, 0], delta[row_gather], out=left[:, 1])
        right = np.empty(col_valid.shape + (2,), self.dtype)
        np.copyto(right[:, :, 0], col_valid)
        np.multiply(right[:, :, 0], delta[col_gather], out=right[:, :, 1])
        by_row = np.matmul(terms, right)  # [P, B, R, 2]
        by_col = np.matmul(left, terms)  # [P, B, 2, C]
        row_target, col_target = group.row_target[:, chunk], group.col_target
        for k in range(size):
            for j in range(2):
                rows[k, j][row_target] += by_row[k, :, :, j]
                cols[k, j][col_target] += by_col[k, :, j, :]

    def _assemble(self, block, delta, sums):
        """Gradient and Hessian ``[B, L]`` from the pair sums.

        Type2/3 groups hold each pair with different labels once, as (higher
        label i, lower label c), where u = 1: with the pair term T, a sum over
        all j of a term antisymmetric in the pair (G) is A - B at each document,
        of a symmetric one (h, q(1 - q)) A + B, with A its row sums and B its
        column sums. Terms: type3 G / 2a = q, h / (-2a^2) = q - q^2; type2 G / a
        = q - q^2, h / a^2 = -2q^3 + 3q^2 - q (symmetric as well); type1 G / a =
        q - q^2 and h / a^2 = -2q^3 + 3q^2 - q over the relevant rows and every
        column (see the module docstring).
        """
        a = self.alpha_b
        row, row_d, col, col_d = ({term: t[k] for k, term in enumerate(self.pair_terms)}
                                  for t in sums)

        def total(term, sign):  # sum_j T_kj, sum_i delta_i T_ik (antisymmetric: sign -1)
            if self.gradient == "type1":
                return term(row), term(col_d)
            return term(row) + sign * term(col), term(col_d) + sign * term(row_d)

        g_rows, g_cols = total(logistic if self.gradient == "type3" else curvature, -1.0)
        grad = (2.0 * a if self.gradient == "type3" else a) * (delta * g_rows - g_cols)
        if self.hessian == "lambdamart":
            if self.gradient == "type1":
                hess = a * a * np.where(block.relevant, row[LAMBDAMART], col[LAMBDAMART])
            else:
                hess = a * a * (row[LAMBDAMART] + col[LAMBDAMART])
        elif self.gradient == "type3":
            p_rows, p_cols = total(curvature, 1.0)
            hess = -2.0 * a * a * (delta * p_rows + p_cols)
        else:
            h_rows, h_cols = total(cubic, 1.0)
            exact = a * a * (delta * h_rows + h_cols)
            p_rows, p_cols = total(curvature, 1.0)
            pairwise = delta * p_rows + p_cols
            if self.gradient == "type1":  # less the diagonal pair (k, k): q = 1/2
                pairwise -= 0.5 * delta
            hess = np.maximum(np.abs(exact), -self.hessian_floor * a * a * pairwise)
        zero = np.zeros((), grad.dtype)
        return (np.where(block.valid, grad, zero).astype(np.float64),
                np.where(block.valid, hess, zero).astype(np.float64))
