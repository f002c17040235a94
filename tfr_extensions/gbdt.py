r"""Twin-sigmoid direct metric optimization for gradient-boosted trees (LightGBM).

Yu, "Optimize What You Evaluate With" (``twin-sigmoid-direct-metric-optimization.txt``)
names this as future work (Section 8): optimize the differentiable metrics of
Eq. 13-16 with gradient boosting instead of a neural network.
:func:`twin_sigmoid_objective` is a LightGBM 4.x custom objective that does
so: at each boosting round it returns, for every document, the gradient of
:class:`tfr_extensions.losses.TwinSigmoidLoss` (minus the metric, per list)
with respect to the document's score, and a Hessian.

**Gradient.** For a list with scores :math:`s`, exact 1-based ranks :math:`r`
(one sort; ties broken by a random permutation, Section 4.2) and the metric
written as :math:`M = \frac{1}{Z}\sum_d w_d f(r_d)` (Eq. 13-16; positions and
weights held constant, :mod:`tfr_extensions.ops.rank_metrics`), let
:math:`\delta_d = \partial M/\partial r_d = w_d f'(r_d)/Z` (Eq. 29, 31-33) and
:math:`g_{ij} = \sigma^{+\prime}(s_i - s_j)` the twin-sigmoid derivative of Eq. 11
(type1), 20 (type2) or 21 (type3). With the rank derivatives of Eq. 17-18
(27-28), :math:`\partial r_i/\partial s_i = -\sum_j g_{ij}`,
:math:`\partial r_i/\partial s_k = g_{ik}`, the objective's gradient is

.. math::
    \mathrm{grad}_k = -\frac{\partial M}{\partial s_k}
                    = \delta_k \sum_j g_{kj} - \sum_i \delta_i\, g_{ik}.

Scale: the loss is :math:`\sum_q -M_q` over the training lists (each list
weight 1; LightGBM's per-document weights multiply gradient and Hessian).
:class:`TwinSigmoidLoss` with its default reduction is the mean over the batch
of :math:`-M_q` (0 for lists without a relevant document), so on a batch of
``B`` lists the objective's gradient is ``B`` times the Keras gradient.

**Hessian** (``hessian``). Write the type's twin-sigmoid derivative as
:math:`g_{ij} = \psi_{ij}'(s_i - s_j)`: the "virtual ranks"
:math:`\tilde r_i = 1 + \sum_{j \ne i} (1 - \psi_{ij}(s_i - s_j))` have exactly
the Jacobian of Eq. 17-18 (for type1, :math:`\psi = \sigma_b`: the smoothed rank
of Eq. 12; for type3, :math:`\psi_{ij}(z) = 2\log\sigma_b(z)` if
:math:`u_{ij} = 1` and :math:`2\log\sigma_b(-z)` if :math:`u_{ij}=-1`, a RankNet
term). With :math:`\delta` piecewise constant in :math:`s` (it depends on the
exact ranks only), the gradient above is :math:`-\nabla_s \sum_i \delta_i
\tilde r_i(s)` between rank swaps, and its derivative along :math:`s_k` is

.. math::
    H_{kk} = -\sum_i \delta_i \frac{\partial^2 \tilde r_i}{\partial s_k^2}
           = \delta_k \sum_j h_{kj} + \sum_i \delta_i\, h_{ik},\qquad
    h_{ij} = \psi_{ij}''(s_i - s_j).

With :math:`q_{ij} = \sigma(\alpha_b(s_j - s_i))` (so :math:`\sigma_b(s_i - s_j)
= 1 - q_{ij}`): type1 :math:`h = \alpha_b^2 q(1-q)(2q-1)`, type2 the same
times :math:`u_{ij}`, type3 :math:`h = -2\alpha_b^2 q(1-q)|u_{ij}|`.

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

``"exact"`` is the default because it is the Hessian of the gradient used and
because it did as well or better on MQ2008 (significantly better for
nDCG-type3; ``docs/results/mq2008.md``).

**alpha_b.** Gradient and Hessian are functions of :math:`\alpha_b s` times
:math:`\alpha_b` and :math:`\alpha_b^2`, so with LightGBM's Newton leaves
(:math:`-\sum g / \sum h`, ``lambda_l2`` 0) the trees, and the ranking, do not
depend on ``alpha_b``: it only scales the scores by :math:`1/\alpha_b` (and
the Hessian sums that ``min_sum_hessian_in_leaf`` bounds). The neural loss has
no such invariance; here the learning rate is the knob.

**Layout.** Lists without a relevant document or with one document get
gradient and Hessian 0 and are not computed. The others are sorted by length
(and number of relevant documents) into padded blocks ``[B, L]`` (built once
per dataset and cached); no Python loop runs per list. Only relevant documents
can have :math:`\delta \ne 0`, and type2/3 pairs with equal labels have
:math:`g = h = 0`, so the pair terms ``[B, R, C]`` are computed for: type1, the
relevant documents (rows) against every document (columns); type2/3, per
relevant label level l, the documents labelled l against those labelled below
l, each pair with different labels once (with :math:`u = 1`; the pair's
other order follows from :math:`g` being antisymmetric in the pair and
:math:`h`, :math:`q(1-q)` symmetric). Each pair term is a power of
:math:`q` (and, for ``"lambdamart"``, :math:`q(1-q)|\Delta M|`), and its row
sums and :math:`\delta`-weighted column sums are two batched matrix products.
The terms are written into one reused buffer of at most ``block_pairs`` pairs
per plane (longer lists are split into row chunks), which bounds memory;
blocks run on ``num_threads`` threads from 2M pair terms per round on. The
logistic of each pair comes from one ``exp`` per document (:math:`q_{ij} = 1 /
(1 + e_i / e_j)`, :math:`e = e^{\alpha_b (s - \max s)}`) while a list's scores
spread less than 60 / :math:`\alpha_b` (float32; 600 in float64), else from
one ``exp`` per pair.

>>> import lightgbm as lgb
>>> data = np.random.default_rng(0)
>>> X, y = data.normal(size=(60, 3)), data.integers(0, 3, size=60).astype(float)
>>> train = lgb.Dataset(X, y, group=[20, 25, 15])
>>> objective = twin_sigmoid_objective("ndcg", gradient="type3", seed=0)
>>> booster = lgb.train({"objective": objective, "num_leaves": 4, "min_data_in_leaf": 5,
...                      "verbose": -1}, train, num_boost_round=3)
>>> grad, hess = objective.gradients(np.zeros(60), y, [20, 25, 15])
>>> grad.shape, bool((hess >= 0).all())
((60,), True)
"""
import concurrent.futures
import dataclasses
import os
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

METRICS = ("precision", "ap", "ndcg", "nerr")
GRADIENT_TYPES = ("type1", "type2", "type3")
HESSIANS = ("exact", "lambdamart")
#: ``twin_<metric>_<type>``: the names of :class:`TwinSigmoidLoss`'s presets.
OBJECTIVE_NAMES = tuple(f"twin_{m}_{g}" for m in METRICS for g in GRADIENT_TYPES)

#: Largest spread ``alpha_b * (max - min)`` of a list's scores for which the
#: pair logistics come from one exp per document (then e >= e^-60, a normal
#: float32; e^-600 in float64).
_EXP_SPREAD_LIMIT = {np.dtype(np.float32): 60.0, np.dtype(np.float64): 600.0}
_LN2 = float(np.log(2.0))

Seed = Union[None, int, Sequence[int]]


def parse_objective_name(name: str) -> Dict[str, str]:
    """``"twin_ndcg_type3"`` -> ``{"metric": "ndcg", "gradient": "type3"}``.

    >>> parse_objective_name("twin_ap_type2")
    {'metric': 'ap', 'gradient': 'type2'}
    """
    if name not in OBJECTIVE_NAMES:
        raise ValueError(f"objective name must be one of {list(OBJECTIVE_NAMES)}; got {name!r}.")
    _, metric, gradient = name.split("_")
    return {"metric": metric, "gradient": gradient}


# ----------------------------------------------------------------------------- layout
#: Pair terms that cost about as much as one more block (its ~40 NumPy calls):
#: a list joins the current block unless that pads the block by more.
_BLOCK_OVERHEAD_PAIRS = 1 << 15


@dataclasses.dataclass
class _PairGroup:
    """Pairs (row document i, column document c) of a block's lists ``[B, R, C]``:
    per row and column, its index into the block's flattened ``[B, L]`` arrays
    (``row_gather``, ``col_gather``; 0 at padding), into the flattened ``[B, L + 1]``
    sums (``row_target``, ``col_target``; padding: the spare column L) and
    ``row_valid`` / ``col_valid``. ``chunks``: row ranges computed at once."""

    row_gather: np.ndarray
    row_target: np.ndarray
    row_valid: np.ndarray
    col_gather: np.ndarray
    col_target: np.ndarray
    col_valid: np.ndarray
    chunks: List[Tuple[int, int]]

    @property
    def pairs(self) -> int:
        return self.row_valid.size * self.col_valid.shape[1]


@dataclasses.dataclass
class _Block:
    """Lists of similar shape, padded to ``[B, L]`` documents.

    ``docs``: flat document index of each cell (0 at padding); ``valid``;
    ``labels`` (0 at padding); metric constants (``gains``, ``relevant``,
    ``stop`` and the per-list ``norm`` Z); ``groups``: the pairs computed. For
    type1, one group: the relevant documents against every document. For
    type2/3, one group per relevant label level l: the documents labelled l
    against those labelled below l (each pair with different labels once).
    """

    docs: np.ndarray
    valid: np.ndarray
    labels: np.ndarray
    gains: np.ndarray
    relevant: np.ndarray
    stop: Optional[np.ndarray]
    norm: np.ndarray
    groups: List[_PairGroup]

    @property
    def pairs(self) -> int:
        """Pair terms computed per round, padding included."""
        return sum(group.pairs for group in self.groups)


def _padded_columns(mask):
    """The documents where ``mask`` ``[B, L]`` holds, left-aligned: their index
    into the flattened ``[B, L]`` arrays (0 at padding), into the flattened
    ``[B, L + 1]`` sums (padding: column L), and the validity ``[B, K]``."""
    size = mask.shape[1]
    counts = mask.sum(1)
    valid = np.arange(max(int(counts.max()), 1))[None, :] < counts[:, None]
    lists, cols = np.nonzero(mask)
    gather = np.zeros(valid.shape, np.int64)
    gather[valid] = lists * size + cols
    target = np.arange(len(mask))[:, None] * (size + 1) + size + np.zeros(valid.shape, np.int64)
    target[valid] = lists * (size + 1) + cols
    return gather, target, valid


def _pair_group(row_mask, col_mask, block_pairs) -> Optional[_PairGroup]:
    if not col_mask.any():
        return None
    rows, cols = _padded_columns(row_mask), _padded_columns(col_mask)
    chunk = max(1, block_pairs // cols[2].size)
    chunks = [(a, min(a + chunk, rows[2].shape[1])) for a in range(0, rows[2].shape[1], chunk)]
    return _PairGroup(*rows, *cols, chunks)


def _ideal_norm(metric, gains, labels, valid, topn):
    """Z per list ``[B]`` (every list here has a relevant document)."""
    size = gains.shape[1]
    n_valid = valid.sum(1)
    if metric == "precision":
        return (n_valid if topn is None else np.minimum(n_valid, topn)).astype(np.float64)
    if metric == "ap":
        return ((labels > 0) & valid).sum(1).astype(np.float64)
    k = size if topn is None else min(topn, size)
    positions = np.arange(1, size + 1, dtype=np.float64)
    if metric == "ndcg":
        ideal = -np.sort(-gains, axis=1)[:, :k]
        return (ideal / np.log2(1.0 + positions[:k])).sum(1)
    stop = _stop_probabilities(gains, labels, valid)  # nerr
    ideal = -np.sort(-stop, axis=1)[:, :k]
    return (_err_by_position(ideal) / positions[:k]).sum(1)


def _stop_probabilities(gains, labels, valid):
    """Eq. 16's R = (2^y - 1) / 2^{max y}, with the list's maximum label."""
    top = np.where(valid, labels, 0.0).max(1, keepdims=True)
    return gains / np.power(2.0, top)


def _err_by_position(stop_by_position):
    """R_p prod_{q < p} (1 - R_q) for lists in position order."""
    reach = np.cumprod(1.0 - stop_by_position, axis=1)
    reach = np.concatenate([np.ones_like(reach[:, :1]), reach[:, :-1]], axis=1)
    return reach * stop_by_position


def _block_bounds(sizes: np.ndarray, rows: np.ndarray, block_pairs: int) -> List[Tuple[int, int]]:
    """Cuts lists (sorted by length bucket, then rows) into blocks: a list
    starts a new block when joining would pad the block by more than
    ``_BLOCK_OVERHEAD_PAIRS`` pair terms or pass ``block_pairs``.

    >>> _block_bounds(np.array([10, 10, 11, 300]), np.array([2, 3, 3, 150]), 1 << 18)
    [(0, 3), (3, 4)]
    """
    bounds, start = [], 0
    count, max_rows, max_size, real = 0, 0, 0, 0
    for i, (size, num_rows) in enumerate(zip(sizes.tolist(), rows.tolist())):
        grown = (count + 1) * max(max_rows, num_rows) * max(max_size, size)
        padding = grown - (real + num_rows * size) - (count * max_rows * max_size - real)
        if count and (padding > _BLOCK_OVERHEAD_PAIRS or grown > block_pairs):
            bounds.append((start, i))
            start, count, max_rows, max_size, real = i, 0, 0, 0, 0
        count, real = count + 1, real + num_rows * size
        max_rows, max_size = max(max_rows, num_rows), max(max_size, size)
    bounds.append((start, len(sizes)))
    return bounds


class _Layout:
    """The padded blocks of one dataset (labels and group sizes), built once."""

    def __init__(self, labels, group, metric, topn, gradient, block_pairs):
        self.labels = np.array(labels, np.float64)
        self.group = np.array(group, np.int64)
        offsets = np.concatenate([[0], np.cumsum(self.group)])
        self.num_docs = int(offsets[-1])
        relevant = np.concatenate([[0], np.cumsum(self.labels > 0)])[offsets]
        relevant = np.diff(relevant)
        keep = np.flatnonzero((relevant > 0) & (self.group > 1))
        # by length bucket (4 per doubling), then rows, then length
        bucket = np.floor(4.0 * np.log2(self.group[keep])).astype(np.int64)
        keep = keep[np.lexsort((self.group[keep], relevant[keep], bucket))]
        self.blocks = [
            self._block(offsets[keep[a:b]], self.group[keep[a:b]], metric, topn, gradient,
                        block_pairs)
            for a, b in _block_bounds(self.group[keep], relevant[keep], block_pairs)
        ] if len(keep) else []
        #: blocks by decreasing pair terms: the order threads take them in
        self.by_cost = sorted(range(len(self.blocks)), key=lambda i: -self.blocks[i].pairs)
        self.pairs = sum(block.pairs for block in self.blocks)

    def matches(self, labels, group) -> bool:
        return (len(labels) == self.num_docs and np.array_equal(self.group, group)
                and np.array_equal(self.labels, labels))

    def _block(self, starts, sizes, metric, topn, gradient, block_pairs) -> _Block:
        size = int(sizes.max())
        cols = np.arange(size)
        valid = cols[None, :] < sizes[:, None]
        docs = np.where(valid, starts[:, None] + cols[None, :], 0)
        labels = np.where(valid, self.labels[docs], 0.0)
        gains = np.where(valid, np.power(2.0, labels) - 1.0, 0.0)
        relevant = valid & (labels > 0)
        stop = _stop_probabilities(gains, labels, valid) if metric == "nerr" else None
        norm = _ideal_norm(metric, gains, labels, valid, topn)
        if gradient == "type1":
            groups = [_pair_group(relevant, valid, block_pairs)]
        else:
            groups = [_pair_group(valid & (labels == level), valid & (labels < level), block_pairs)
                      for level in np.unique(labels[relevant])]
        return _Block(docs, valid, labels, gains, relevant, stop, norm,
                      [g for g in groups if g is not None])


# ----------------------------------------------------------------------------- forward
def _flat_index(values, index):
    """Indices into ``values.reshape(-1)`` of ``values[b, index[b, k]]``."""
    return index + np.arange(0, values.size, values.shape[1])[:, None]


def _take(values, index):
    """``values[b, index[b, k]]`` (``np.take_along_axis`` on axis 1, without its overhead)."""
    return np.take(values.reshape(-1), _flat_index(values, index))


def _put(out, index, values):
    """``out[b, index[b, k]] = values[b, k]`` (``np.put_along_axis`` on axis 1)."""
    out.reshape(-1)[_flat_index(out, index)] = values


def _positions(scores, valid, rng):
    """1-based int positions ``[B, L]`` (descending score, padded last) and
    the order (``order[b, p - 1]`` = the document at position p). Ties: a
    uniformly random order from ``rng`` (a second sort, by tie group and then
    a uniform key), or the lower index first (rng None)."""
    keys = np.where(valid, -scores, np.inf)
    order = np.argsort(keys, axis=1, kind="stable")
    if rng is not None:
        ordered = _take(keys, order)
        tied = (ordered[:, 1:] == ordered[:, :-1]) & np.isfinite(ordered[:, 1:])
        if tied.any():
            group = np.zeros(keys.shape)
            np.cumsum(~tied, axis=1, out=group[:, 1:])
            order = _take(order, np.argsort(group + rng.random(keys.shape), axis=1, kind="stable"))
    positions = np.empty_like(order)
    _put(positions, order, np.broadcast_to(np.arange(1, keys.shape[1] + 1), order.shape))
    return positions, order


def _midranks(scores, valid, order):
    """Ranks with tied documents sharing the mean of their positions (Eq. 12
    without tie breaking: sigma+(0) = 1/2)."""
    keys = _take(np.where(valid, scores, -np.inf), order)
    size = keys.shape[1]
    index = np.arange(size)[None, :]
    first = np.ones(keys.shape, bool)
    first[:, 1:] = keys[:, 1:] != keys[:, :-1]
    last = np.ones(keys.shape, bool)
    last[:, :-1] = keys[:, :-1] != keys[:, 1:]
    start = np.maximum.accumulate(np.where(first, index, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, index, size)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty(keys.shape)
    _put(ranks, order, 1.0 + 0.5 * (start + end))
    return ranks


def _metric_form(metric, block, positions, order, topn):
    """The weights w ``[B, L]`` of M = (1/Z) sum_d w_d f(r_d) (Eq. 13-16, 30),
    0 at padded documents and past the cutoff."""
    cut = block.valid if topn is None else block.valid & (positions <= topn)
    if metric == "ndcg":
        return np.where(cut, block.gains, 0.0)
    if metric == "precision":
        return np.where(cut & block.relevant, positions, 0.0)
    if metric == "ap":  # Eq. 30: b_d p_d sum_{e: p_d <= p_e <= k} b_e / p_e
        relevant = cut & block.relevant
        by_position = _take(np.where(relevant, 1.0 / positions, 0.0), order)
        suffix = np.cumsum(by_position[:, ::-1], axis=1)[:, ::-1]
        return np.where(relevant, positions * _take(suffix, positions - 1), 0.0)
    by_position = _err_by_position(_take(block.stop, order))  # nerr, Eq. 16
    return np.where(cut, _take(by_position, positions - 1), 0.0)


def _transform(metric, ranks):
    """(f(r), f'(r)): 1/log2(1 + r) for nDCG, 1/r otherwise."""
    if metric == "ndcg":
        value = _LN2 / np.log1p(ranks)
        return value, -np.square(value) / (_LN2 * (1.0 + ranks))
    return 1.0 / ranks, -1.0 / np.square(ranks)


# ----------------------------------------------------------------------------- objective
class TwinSigmoidObjective:
    """A LightGBM custom objective: twin-sigmoid gradients of minus a rank metric.

    Build it with :func:`twin_sigmoid_objective`; see the module docstring for
    the math. The same object works with both LightGBM APIs:

    * ``lgb.train({"objective": obj, ...}, train_set)`` calls ``obj(preds, train_set)``
      (group sizes from ``train_set.get_group()``);
    * ``lgb.LGBMRanker(objective=obj).fit(X, y, group=...)`` calls
      ``obj(y_true, y_pred, weight, group)``.

    Each call is one boosting round: it draws that round's tie-breaking
    permutations from ``(seed, round)``, so a run with a fixed seed is
    reproducible and every round sees fresh tie breaks. ``lgb.train`` (also
    under ``LGBMRanker.fit``) deep-copies its parameters, so training runs on a
    copy: the object passed in stays at its round, and training twice with it
    replays the same tie breaks.
    """

    def __init__(self, metric: str = "ndcg", gradient: str = "type3", topn: Optional[int] = None,
                 alpha_b: float = 1.0, hessian: str = "exact", seed: Seed = None,
                 tie_break: bool = True, hessian_floor: float = 0.1,
                 dtype: Union[str, type] = np.float32, block_pairs: int = 1 << 19,
                 num_threads: Optional[int] = None):
        self.metric = _choice(metric, METRICS, "metric")
        self.gradient = _choice(gradient, GRADIENT_TYPES, "gradient")
        self.hessian = _choice(hessian, HESSIANS, "hessian")
        if topn is not None and (isinstance(topn, bool) or not isinstance(topn, (int, np.integer))
                                 or topn <= 0):
            raise ValueError(f"`topn` must be None or a positive int; got {topn!r}.")
        self.topn = None if topn is None else int(topn)
        self.alpha_b = _positive(alpha_b, "alpha_b")
        self.hessian_floor = _positive(hessian_floor, "hessian_floor")
        self.tie_break = bool(tie_break)
        if seed is not None:
            seed = [int(seed)] if np.ndim(seed) == 0 else [int(s) for s in seed]
            if any(s < 0 for s in seed):
                raise ValueError(f"`seed` must be None, an int >= 0 or ints >= 0; got {seed!r}.")
        self.seed = seed
        self.dtype = np.dtype(dtype)
        if self.dtype not in _EXP_SPREAD_LIMIT:
            raise ValueError(f"`dtype` must be float32 or float64; got {dtype!r}.")
        if isinstance(block_pairs, bool) or not isinstance(block_pairs, (int, np.integer)) \
                or block_pairs < 1:
            raise ValueError(f"`block_pairs` must be a positive int; got {block_pairs!r}.")
        self.block_pairs = int(block_pairs)
        if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(
                num_threads, (int, np.integer)) or num_threads < 0):
            raise ValueError(f"`num_threads` must be None or an int >= 0; got {num_threads!r}.")
        self.num_threads = num_threads
        self.rounds = 0
        self._layout: Optional[_Layout] = None

    @property
    def config(self) -> Dict[str, Any]:
        """The settings (JSON-serializable), e.g. for a run's ``results.json``."""
        return {"metric": self.metric, "gradient": self.gradient, "topn": self.topn,
                "alpha_b": self.alpha_b, "hessian": self.hessian,
                "hessian_floor": self.hessian_floor, "tie_break": self.tie_break,
                "seed": self.seed if self.seed is None or len(self.seed) > 1 else self.seed[0],
                "dtype": self.dtype.name}

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items())
        return f"TwinSigmoidObjective({args})"

    def __call__(self, preds, train_data, weight=None, group=None):
        """``(preds, dataset)`` (``lgb.train``) or ``(y_true, y_pred, weight, group)``
        (scikit-learn API) -> ``(grad, hess)``, float arrays ``[num_docs]``."""
        if hasattr(train_data, "get_group") and hasattr(train_data, "get_label"):
            return self.gradients(preds, train_data.get_label(), train_data.get_group(),
                                  train_data.get_weight())
        if group is None:
            raise ValueError("the scikit-learn API must pass `group` (fit(..., group=...)); "
                             "got None.")
        return self.gradients(train_data, preds, group, weight)

    def gradients(self, scores, labels, group, weight=None) -> Tuple[np.ndarray, np.ndarray]:
        """One boosting round: ``(grad, hess)`` of :math:`\\sum_q -M_q` at ``scores``.

        Args:
          scores: ``[N]`` current scores (the documents of each query contiguous).
          labels: ``[N]`` graded labels >= 0.
          group: ``[Q]`` documents per query (sums to N).
          weight: optional ``[N]`` per-document weights (multiply both outputs).

        Returns:
          float64 ``[N]`` gradient and Hessian (computed in ``dtype``).
        """
        scores = np.asarray(scores, np.float64).reshape(-1)
        labels = np.asarray(labels, np.float64).reshape(-1)
        if group is None:
            raise ValueError("`group` (documents per query) is required for a ranking objective.")
        group = np.asarray(group, np.int64).reshape(-1)
        if scores.shape != labels.shape or int(group.sum()) != len(labels) or (group < 0).any():
            raise ValueError(f"`scores` and `labels` must have one entry per document and `group` "
                             f"must sum to their length; got {scores.shape}, {labels.shape} and "
                             f"sum(group) = {int(group.sum())}.")
        if (labels < 0).any() or not np.isfinite(labels).all():
            raise ValueError("`labels` must be finite and >= 0.")
        if not np.isfinite(scores).all():
            raise ValueError("`scores` must be finite.")
        if self._layout is None or not self._layout.matches(labels, group):
            self._layout = _Layout(labels, group, self.metric, self.topn, self.gradient,
                                   self.block_pairs)
        blocks = self._layout.blocks
        entropy = None if self.seed is None else [*self.seed, self.rounds]
        seeds = np.random.SeedSequence(entropy).spawn(len(blocks)) if self.tie_break else None
        self.rounds += 1

        def block_terms(i):
            rng = np.random.default_rng(seeds[i]) if seeds is not None else None
            return self._block_terms(blocks[i], scores[blocks[i].docs], rng)

        grad = np.zeros(len(scores))
        hess = np.zeros(len(scores))
        threads = min(self.num_threads or os.cpu_count() or 1, len(blocks))
        if threads > 1 and self._layout.pairs >= _THREADED_MIN_PAIRS:
            # NumPy releases the GIL in its array loops
            pool = _executor(threads)
            results = dict(zip(self._layout.by_cost, pool.map(block_terms, self._layout.by_cost)))
        else:
            results = {i: block_terms(i) for i in range(len(blocks))}
        for i, block in enumerate(blocks):
            grad[block.docs[block.valid]] = results[i][0][block.valid]
            hess[block.docs[block.valid]] = results[i][1][block.valid]
        if weight is not None:
            weight = np.asarray(weight, np.float64).reshape(-1)
            if weight.shape != scores.shape:
                raise ValueError(f"`weight` must have one entry per document; got {weight.shape}.")
            grad *= weight
            hess *= weight
        return grad, hess

    # --------------------------------------------------------------------- one block
    def _block_terms(self, block: _Block, scores, rng):
        """Gradient and Hessian ``[B, L]`` of one block."""
        valid = block.valid
        positions, order = _positions(scores, valid, rng)
        ranks = positions.astype(np.float64) if self.tie_break else _midranks(scores, valid, order)
        ranks = np.where(valid, ranks, 1.0)
        weights = _metric_form(self.metric, block, positions, order, self.topn)
        values, slopes = _transform(self.metric, ranks)
        norm = block.norm[:, None]
        delta = (weights * slopes / norm).astype(self.dtype)  # Eq. 29, 31-33
        scaled = tuple(t.astype(self.dtype).reshape(-1) for t in (weights / norm, values))
        x = self.alpha_b * np.where(valid, scores, 0.0)
        top = np.where(valid, x, -np.inf).max(1, keepdims=True)
        spread = top - np.where(valid, x, np.inf).min(1, keepdims=True)
        by_exp = bool((spread <= _EXP_SPREAD_LIMIT[self.dtype]).all())
        if by_exp:  # one exp per document: e = exp(a s - max), 0 at padding
            per_document = np.exp(np.where(valid, x - top, -np.inf))
        else:  # logits a s, -inf at padding (one exp per pair)
            per_document = np.where(valid, x, -np.inf)
        flat = per_document.astype(self.dtype).reshape(-1)
        planes = len(self._planes)
        rows = np.zeros((planes, 2, valid.shape[0] * (valid.shape[1] + 1)), self.dtype)
        cols = np.zeros_like(rows)
        for group in block.groups:
            for first, last in group.chunks:
                self._chunk_sums(group, slice(first, last), flat, by_exp, delta.reshape(-1),
                                 scaled, rows, cols)
        shape = (planes, valid.shape[0], valid.shape[1] + 1)
        sums = [t[:, j].reshape(shape)[:, :, :-1] for t in (rows, cols) for j in (0, 1)]
        return self._assemble(block, delta, sums)

    @property
    def _planes(self) -> Tuple[str, ...]:
        """The pair terms summed: powers of q (``q``, ``qq`` = q^2, ``qqq``) and
        ``m``, the lambdamart Hessian's q(1 - q) |Delta M|."""
        if self.hessian == "lambdamart":
            return ("q", "m") if self.gradient == "type3" else ("q", "qq", "m")
        return ("q", "qq") if self.gradient == "type3" else ("q", "qq", "qqq")

    def _chunk_sums(self, group, chunk, flat, by_exp, delta, scaled, rows, cols):
        """Adds two sums of each pair term T ``[B, R, C]`` (``_planes``) of the
        rows ``chunk`` of ``group``, per document: into ``rows`` sum_c T[i, c]
        and sum_c T[i, c] delta_c at the row documents, into ``cols`` sum_i
        T[i, c] and sum_i delta_i T[i, c] at the column documents (``[planes,
        2, B * (L + 1)]``). The terms are written into one reused buffer, and
        the sums are two matrix products."""
        row_valid, col_valid = group.row_valid[:, chunk], group.col_valid
        row_gather, col_gather = group.row_gather[:, chunk], group.col_gather
        planes = self._planes
        size = len(planes)
        buffer = _workspace((size + 1,) + row_valid.shape + col_valid.shape[1:], self.dtype)
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
        for k, name in enumerate(planes[1:], 1):
            if name == "m":  # q(1 - q) |w_i - w_c| |f(r_i) - f(r_c)|
                out = buffer[k]
                np.subtract(q, np.square(q, out=temp), out=out)
                for values in scaled:
                    np.subtract(values[row_gather][:, :, None], values[col_gather][:, None, :],
                                out=temp)
                    np.multiply(out, np.abs(temp, out=temp), out=out)
            else:  # one more factor q
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
        column sums. Terms: type3 G / 2a = q, h / (-2a^2) = q - qq; type2 G / a
        = q - qq, h / a^2 = -2qqq + 3qq - q (symmetric as well); type1 G / a =
        q - qq and h / a^2 = -2qqq + 3qq - q over the relevant rows and every
        column (see the module docstring).
        """
        a = self.alpha_b
        row, row_d, col, col_d = ({name: t[k] for k, name in enumerate(self._planes)}
                                  for t in sums)

        def total(term, sign):  # sum_j T_kj, sum_i delta_i T_ik (antisymmetric: sign -1)
            if self.gradient == "type1":
                return term(row), term(col_d)
            return term(row) + sign * term(col), term(col_d) + sign * term(row_d)

        def q_(t):
            return t["q"]

        def curvature(t):  # q(1 - q)
            return t["q"] - t["qq"]

        def cubic(t):  # q(1 - q)(2q - 1)
            return -2.0 * t["qqq"] + 3.0 * t["qq"] - t["q"]

        g_rows, g_cols = total(q_ if self.gradient == "type3" else curvature, -1.0)
        grad = (2.0 * a if self.gradient == "type3" else a) * (delta * g_rows - g_cols)
        if self.hessian == "lambdamart":
            if self.gradient == "type1":
                hess = a * a * np.where(block.relevant, row["m"], col["m"])
            else:
                hess = a * a * (row["m"] + col["m"])
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


_WORKSPACES = threading.local()

#: Below this many pair terms per round the blocks run in the calling thread:
#: handing them to threads costs more than it saves (``benchmarks.gbdt_objective``).
_THREADED_MIN_PAIRS = 1 << 21
_EXECUTORS: Dict[int, concurrent.futures.ThreadPoolExecutor] = {}
_EXECUTORS_LOCK = threading.Lock()


def _executor(threads: int) -> concurrent.futures.ThreadPoolExecutor:
    """A thread pool of ``threads`` workers, made once per process (not part of
    the objective, which LightGBM deep-copies)."""
    with _EXECUTORS_LOCK:
        if threads not in _EXECUTORS:
            _EXECUTORS[threads] = concurrent.futures.ThreadPoolExecutor(
                threads, thread_name_prefix="tfrx-gbdt")
        return _EXECUTORS[threads]


def _workspace(shape, dtype) -> np.ndarray:
    """A buffer of ``shape`` reused by this thread across blocks and rounds
    (fresh arrays of this size would be paged in at every call)."""
    size = int(np.prod(shape))
    buffers = _WORKSPACES.__dict__.setdefault("buffers", {})
    buffer = buffers.get(dtype)
    if buffer is None or buffer.size < size:
        buffer = buffers[dtype] = np.empty(max(size, 1), dtype)
    return buffer[:size].reshape(shape)


def _choice(value, choices, arg):
    if value not in choices:
        raise ValueError(f"`{arg}` must be one of {list(choices)}; got {value!r}.")
    return value


def _positive(value, arg) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"`{arg}` must be a positive number; got {value!r}.") from None
    if not 0 < number < float("inf"):
        raise ValueError(f"`{arg}` must be a positive finite number; got {value!r}.")
    return number


def twin_sigmoid_objective(metric: str = "ndcg", gradient: str = "type3",
                           topn: Optional[int] = None, alpha_b: float = 1.0,
                           hessian: str = "exact", seed: Seed = None, *,
                           tie_break: bool = True, hessian_floor: float = 0.1,
                           dtype=np.float32, block_pairs: int = 1 << 19,
                           num_threads: Optional[int] = None) -> TwinSigmoidObjective:
    """A LightGBM objective optimizing ``metric`` with twin-sigmoid gradients.

    Args:
      metric: ``"precision"`` (Eq. 13), ``"ap"`` (Eq. 14), ``"ndcg"`` (Eq. 15)
        or ``"nerr"`` (Eq. 16).
      gradient: ``"type1"`` (Eq. 11), ``"type2"`` (Eq. 20) or ``"type3"`` (Eq. 21).
      topn: the metric's cutoff k; None = the whole list.
      alpha_b: steepness of the backward sigmoid (1.0 in the paper), > 0.
      hessian: ``"exact"`` or ``"lambdamart"`` (see the module docstring).
      seed: None (fresh tie breaks), an int or ints >= 0; round t breaks ties
        with ``default_rng([*seed, t])``.
      tie_break: random tie breaking (Section 4.2); off: tied documents share
        the mean of their positions, as :class:`TwinSigmoidLoss` does then.
      hessian_floor: for the type1/type2 ``"exact"`` Hessian, the fraction of
        the pairwise curvature below which it is raised.
      dtype: the compute dtype of the pair terms (LightGBM takes float32).
      block_pairs: at most this many pair terms per block (memory bound).
      num_threads: threads computing blocks in parallel; None or 0: one per CPU.

    Returns:
      A :class:`TwinSigmoidObjective` for ``params["objective"]`` of
      ``lgb.train`` or ``objective=`` of ``lgb.LGBMRanker``.
    """
    return TwinSigmoidObjective(metric, gradient, topn, alpha_b, hessian, seed, tie_break,
                                hessian_floor, dtype, block_pairs, num_threads)
