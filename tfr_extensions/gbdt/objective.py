r"""The LightGBM objective: its options and checks, the tie-break seed rule, and one round.

Yu, "Optimize What You Evaluate With" (``twin-sigmoid-direct-metric-optimization.txt``)
names this as future work (Section 8): optimize the differentiable metrics of
Eq. 13-16 with gradient boosting instead of a neural network.
:func:`twin_sigmoid_objective` is a LightGBM 4.x custom objective that does
so: at each boosting round it returns, for every document, the gradient of
:class:`tfr_extensions.losses.TwinSigmoidLoss` (minus the metric, per list)
with respect to the document's score, and a Hessian (the math:
:mod:`tfr_extensions.gbdt.terms`).

**Scale.** The loss is :math:`\sum_q -M_q` over the training lists (each list
weight 1; LightGBM's per-document weights multiply gradient and Hessian).
:class:`TwinSigmoidLoss` with its default reduction is the mean over the batch
of :math:`-M_q` (0 for lists without a relevant document), so on a batch of
``B`` lists the objective's gradient is ``B`` times the Keras gradient.

**A round.** The flat arrays are laid out once per dataset into padded blocks
(:mod:`tfr_extensions.gbdt.layout`); each block's gradient and Hessian
(:class:`~tfr_extensions.gbdt.terms.BlockTerms`) is computed on the process's
thread pool (:mod:`tfr_extensions.gbdt.threads`) with its own tie-break seed
(:func:`round_seeds`), and scattered back to the documents.

>>> objective = twin_sigmoid_objective("map", gradient="type2", seed=7)
>>> objective.config["metric"], objective.config["seed"]  # the vocabulary's canonical name
('ap', 7)
"""
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from tfr_extensions.gbdt import terms, threads
from tfr_extensions.gbdt.layout import Layout
from tfr_extensions.ops import validation, vocabulary

#: The metrics the objective optimizes: the paper's four (Eq. 13-16).
SUPPORTED_METRICS = vocabulary.PAPER_METRICS
HESSIANS = ("exact", "lambdamart")
#: ``twin_<metric>_<type>``: the names of :class:`TwinSigmoidLoss`'s presets.
OBJECTIVE_NAMES = tuple(f"twin_{m}_{g}" for m in SUPPORTED_METRICS
                        for g in vocabulary.GRADIENT_TYPES)

#: a seed of the objectives: None (fresh draws), an int or a pair of ints
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


def validate_numpy_seed(seed, arg: str = "seed") -> Optional[List[int]]:
    """The objective's seed as the entropy of NumPy's ``SeedSequence``: None,
    or ``[int, ...]`` from an int >= 0 or a sequence of ints >= 0, else
    ``ValueError``. (Unlike the ops' seeds, any number of ints: they only
    seed NumPy.)

    >>> validate_numpy_seed(3), validate_numpy_seed((1, np.int64(2)))
    ([3], [1, 2])
    """
    if seed is None:
        return None
    values = [seed] if np.ndim(seed) == 0 else list(seed)
    try:
        return [validation.validate_int(s, arg, minimum=0) for s in values]
    except ValueError:
        raise ValueError(f"`{arg}` must be None, an int >= 0 or ints >= 0; got {seed!r}.") from None


def round_seeds(seed: Optional[List[int]], round_index: int,
                blocks: int) -> List[np.random.SeedSequence]:
    """The tie-break seeds of round ``round_index``'s ``blocks`` blocks: the
    children of ``SeedSequence([*seed, round_index])`` (fresh entropy for
    seed None). A fixed seed replays a run; every round draws new tie breaks.

    >>> [s.entropy for s in round_seeds([5], 2, 2)] == [[5, 2]] * 2
    True
    """
    entropy = None if seed is None else [*seed, round_index]
    return np.random.SeedSequence(entropy).spawn(blocks)


class TwinSigmoidObjective:
    """A LightGBM custom objective: twin-sigmoid gradients of minus a rank metric.

    Build it with :func:`twin_sigmoid_objective`; see :mod:`tfr_extensions.gbdt.terms`
    for the math. The same object works with both LightGBM APIs:

    * ``lgb.train({"objective": obj, ...}, train_set)`` calls ``obj(preds, train_set)``
      (group sizes from ``train_set.get_group()``);
    * ``lgb.LGBMRanker(objective=obj).fit(X, y, group=...)`` calls
      ``obj(y_true, y_pred, weight, group)``.

    Each call is one boosting round: it draws that round's tie-breaking
    permutations from ``(seed, round)`` (:func:`round_seeds`), so a run with a
    fixed seed is reproducible and every round sees fresh tie breaks.
    ``lgb.train`` (also under ``LGBMRanker.fit``) deep-copies its parameters,
    so training runs on a copy: the object passed in stays at its round, and
    training twice with it replays the same tie breaks.
    """

    def __init__(self, metric: str = "ndcg", gradient: str = "type3", topn: Optional[int] = None,
                 alpha_b: float = 1.0, hessian: str = "exact", seed: Seed = None,
                 tie_break: bool = True, hessian_floor: float = 0.1,
                 dtype: Union[str, type] = np.float32, block_pairs: int = 1 << 19,
                 num_threads: Optional[int] = None):
        self.metric = validation.validate_choice(
            vocabulary.canonical_metric(metric), SUPPORTED_METRICS, "metric")
        self.gradient = validation.validate_choice(gradient, vocabulary.GRADIENT_TYPES,
                                                   "gradient")
        self.hessian = validation.validate_choice(hessian, HESSIANS, "hessian")
        self.topn = validation.validate_topn(topn)
        self.alpha_b = validation.validate_positive(alpha_b, "alpha_b")
        self.hessian_floor = validation.validate_positive(hessian_floor, "hessian_floor")
        self.tie_break = validation.validate_bool(tie_break, "tie_break")
        self.seed = validate_numpy_seed(seed)
        self.dtype = np.dtype(dtype)
        if self.dtype not in terms.EXP_SPREAD_LIMIT:
            raise ValueError(f"`dtype` must be float32 or float64; got {dtype!r}.")
        self.block_pairs = validation.validate_int(block_pairs, "block_pairs", minimum=1)
        self.num_threads = validation.validate_int(num_threads, "num_threads", minimum=0,
                                                   allow_none=True)
        self.rounds = 0
        self._layout: Optional[Layout] = None

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
            self._layout = Layout(labels, group, self.metric, self.topn, self.gradient,
                                  self.block_pairs)
        blocks = self._layout.blocks
        seeds = round_seeds(self.seed, self.rounds, len(blocks)) if self.tie_break else None
        self.rounds += 1
        block_terms = terms.BlockTerms(self.metric, self.topn, self.gradient, self.hessian,
                                       self.alpha_b, self.hessian_floor, self.tie_break,
                                       self.dtype)

        def one_block(i):
            rng = np.random.default_rng(seeds[i]) if seeds is not None else None
            return block_terms(blocks[i], scores[blocks[i].docs], rng)

        results = threads.map_blocks(one_block, self._layout.by_cost, self.num_threads,
                                     self._layout.pairs)
        grad = np.zeros(len(scores))
        hess = np.zeros(len(scores))
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


def twin_sigmoid_objective(metric: str = "ndcg", gradient: str = "type3",
                           topn: Optional[int] = None, alpha_b: float = 1.0,
                           hessian: str = "exact", seed: Seed = None, *,
                           tie_break: bool = True, hessian_floor: float = 0.1,
                           dtype=np.float32, block_pairs: int = 1 << 19,
                           num_threads: Optional[int] = None) -> TwinSigmoidObjective:
    """A LightGBM objective optimizing ``metric`` with twin-sigmoid gradients.

    Args:
      metric: ``"precision"`` (Eq. 13), ``"ap"`` (Eq. 14), ``"ndcg"`` (Eq. 15)
        or ``"nerr"`` (Eq. 16), or an alias of :mod:`~tfr_extensions.ops.vocabulary`
        (``"map"``, ``"p"``, ...).
      gradient: ``"type1"`` (Eq. 11), ``"type2"`` (Eq. 20) or ``"type3"`` (Eq. 21).
      topn: the metric's cutoff k; None = the whole list.
      alpha_b: steepness of the backward sigmoid (1.0 in the paper), > 0.
      hessian: ``"exact"`` or ``"lambdamart"`` (see :mod:`tfr_extensions.gbdt.terms`).
      seed: None (fresh tie breaks), an int or ints >= 0; round t breaks ties
        with the children of ``SeedSequence([*seed, t])`` (:func:`round_seeds`).
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
