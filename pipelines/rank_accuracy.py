"""The rank-accuracy experiment of Section 4.2 of the twin-sigmoid paper.

Prints Table 2 (average L1 rank error of the sigmoid approximation of Qin et
al., ``pi^-(i) = 1 + sum_{j != i} sigmoid(-alpha (s_i - s_j))``, for alpha in
1 .. 1e5) and Table 3 (twin-sigmoid ranks of Eq. 12, without and with random tie
breaking) on lists of uniform [0, 1) float32 scores, (100 x 123) and (100 x 1000),
next to the paper's numbers.

L1 of a list is ``sum_i |pi(i) - pi*(i)|`` and the tables average it over lists.
The ground-truth ranks ``pi*`` are those of a sort; where scores tie, any order
of the tied documents is a correct sort, and ``pi*`` takes the one closest to
the prediction (so a valid random tie break scores 0, while tied documents
sharing a mean rank do not).

    python -m pipelines.rank_accuracy              # both tables, both sizes
    python -m pipelines.rank_accuracy --quantize 20  # scores on a 1/20 grid: many ties

Its settings are a :class:`RankAccuracyConfig` (a flag per field, as every job's);
:func:`run` computes both tables. The ranks come from the implementation of
:func:`tfr_extensions.backend.implementation`'s rule (TensorFlow, or ``keras.ops`` on
JAX and PyTorch); the score lists are NumPy's, the same on every backend.
"""
import argparse
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import flags
from tfr_extensions.ops import validation

ALPHAS = (1.0, 10.0, 100.0, 1e3, 1e4, 1e5)
SHAPES = ((100, 123), (100, 1000))
PAPER_TABLE_2 = {
    (100, 123): (2866.94, 350.25, 68.36, 16.45, 2.20, 0.23),
    (100, 1000): (189401.48, 17600.48, 1671.72, 488.01, 112.80, 13.67),
}
PAPER_TABLE_3 = {(100, 123): (0.0, 0.0), (100, 1000): (0.03, 0.0)}


@dataclasses.dataclass(frozen=True)
class RankAccuracyConfig:
    """Everything the experiment depends on (its lists are :data:`SHAPES`, its alphas
    :data:`ALPHAS`, as in the paper).

    Attributes:
      seed: the seed of the score lists and of the random tie breaking.
      quantize: round scores down to a 1/QUANTIZE grid (creates ties); none: the raw
        float32 scores.
    """

    seed: int = 0
    quantize: Optional[int] = None

    def __post_init__(self):
        if self.quantize is not None:
            validation.validate_int(self.quantize, "quantize", minimum=1)


def uniform_lists(num_lists: int, size: int, seed: int = 0,
                  quantize: Optional[int] = None) -> np.ndarray:
    """float32 scores uniform on [0, 1); optionally rounded to a 1/quantize grid."""
    scores = np.random.default_rng(seed).random((num_lists, size), dtype=np.float32)
    if quantize:
        scores = (np.floor(scores * quantize) / quantize).astype(np.float32)
    return scores


def l1_rank_error(ranks: np.ndarray, scores: np.ndarray) -> float:
    """Mean over lists of sum_i |ranks_i - pi*_i| (ties: pi* closest to ranks)."""
    total = 0.0
    for r, s in zip(np.asarray(ranks, np.float64), scores):
        order = np.lexsort((r, -s))  # by descending score, ties by predicted rank
        truth = np.empty(len(s))
        truth[order] = np.arange(1, len(s) + 1)
        total += np.abs(r - truth).sum()
    return total / len(scores)


def qin_approx_ranks(scores: np.ndarray, alpha: float, chunk: int = 10) -> np.ndarray:
    """pi^- of Qin et al. as TF-Ranking's ``approx_ranks`` computes it (sigmoids of the
    differences of alpha times the scores;
    :func:`tfr_extensions.ops.approx_ranks.approx_ranks`, TensorFlow's ops or
    ``keras.ops`` by backend), in
    chunks of lists to bound memory."""
    from tfr_extensions import arrays  # pylint: disable=import-outside-toplevel
    from tfr_extensions.ops.approx_ranks import approx_ranks  # pylint: disable=import-outside-toplevel
    xp = arrays.namespace()

    def ranks(part):
        return xp.convert_to_numpy(approx_ranks(xp.convert_to_tensor(part) * alpha))
    return np.concatenate([ranks(scores[i:i + chunk]) for i in range(0, len(scores), chunk)])


def twin_ranks(scores: np.ndarray, tie_break: bool, seed: int = 0) -> np.ndarray:
    """The twin-sigmoid ranks pi^+ of Eq. 12 (``twin_sigmoid_ranks`` of the rule's
    implementation), NumPy ``[B, L]``."""
    from tfr_extensions import arrays, ops  # pylint: disable=import-outside-toplevel
    xp = arrays.namespace()
    return xp.convert_to_numpy(ops.twin_sigmoid_ranks(xp.convert_to_tensor(scores),
                                                      tie_break=tie_break, seed=seed))


def table_2(scores_by_shape: Dict, alphas: Sequence[float] = ALPHAS) -> Dict:
    return {shape: [l1_rank_error(qin_approx_ranks(s, a), s) for a in alphas]
            for shape, s in scores_by_shape.items()}


def table_3(scores_by_shape: Dict, seed: int = 0) -> Dict:
    rows = {}
    for shape, s in scores_by_shape.items():
        shared = twin_ranks(s, tie_break=False)
        broken = twin_ranks(s, tie_break=True, seed=seed)
        rows[shape] = [l1_rank_error(shared, s), l1_rank_error(broken, s)]
    return rows


def format_tables(t2: Dict, t3: Dict, alphas: Sequence[float] = ALPHAS) -> List[str]:
    lines = ["Table 2: average L1 rank error of pi^- (Qin et al.), ours / paper",
             f"{'(v1, v2)':<12}" + "".join(f"{f'alpha={a:g}':>22}" for a in alphas)]
    for shape, row in t2.items():
        paper = PAPER_TABLE_2.get(shape, (float("nan"),) * len(row))
        lines.append(f"{str(shape):<12}" + "".join(
            f"{f'{ours:.2f} / {p:.2f}':>22}" for ours, p in zip(row, paper)))
    lines += ["", "Table 3: average L1 rank error of twin-sigmoid ranks pi^+, ours / paper",
              f"{'(v1, v2)':<12}{'Eq. 12':>22}{'Eq. 12 + tie breaking':>26}"]
    for shape, row in t3.items():
        paper = PAPER_TABLE_3.get(shape, (float("nan"),) * 2)
        lines.append(f"{str(shape):<12}{f'{row[0]:.2f} / {paper[0]:.2f}':>22}"
                     f"{f'{row[1]:.2f} / {paper[1]:.2f}':>26}")
    return lines


def run(config: RankAccuracyConfig) -> Tuple[Dict, Dict]:
    """Tables 2 and 3 (:func:`table_2`, :func:`table_3`) on the lists of :data:`SHAPES`."""
    scores = {shape: uniform_lists(*shape, seed=config.seed, quantize=config.quantize)
              for shape in SHAPES}
    return table_2(scores), table_3(scores, config.seed)


def build_parser() -> argparse.ArgumentParser:
    """The command line: a flag per :class:`RankAccuracyConfig` field."""
    parser = argparse.ArgumentParser(prog="python -m pipelines.rank_accuracy",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    flags.add_config_flags(parser, RankAccuracyConfig)
    return parser


def parse_args(argv=None) -> RankAccuracyConfig:
    """Flags -> :class:`RankAccuracyConfig` (only ``main`` calls this)."""
    return flags.config_from_args(RankAccuracyConfig, build_parser().parse_args(argv))


def main(argv=None) -> None:
    print("\n".join(format_tables(*run(parse_args(argv)))))


if __name__ == "__main__":
    main()
