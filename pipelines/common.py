"""What every job of ``pipelines/`` shares: the data splits, strict and atomic
output files, and the one-line summary of an evaluation.

* :func:`load_splits`: train / validation / test :class:`Splits` of a LETOR
  folder, or of the embedded synthetic data (``data="synthetic"``, the default
  of every job), which also has five LETOR-style folds.
* :func:`write_json`, :func:`write_atomically`: a reader, or a job killed
  meanwhile, sees the old file or the new one, never a part, and the new file
  reaches the disk (``fsync``, also of its folder) before it is published; JSON is strict.
* :func:`write_evaluations`: ``results.json`` and the per-query CSVs of a run;
  :func:`write_done`: its completion marker, written last, with the size and
  checksum of every other output, so that a damaged one is noticed
  (:func:`pipelines.run_dir.read_done`).
* :func:`format_summary`: the line a job prints for an evaluation;
  :func:`stored_summary_lines`: those of a finished run's ``results.json``.

>>> splits = load_splits(SYNTHETIC, fold=2)
>>> [part.num_queries for part in (splits.train, splits.vali, splits.test)]
[300, 100, 100]
"""
import dataclasses
import json
import math
import os
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

SYNTHETIC = "synthetic"
#: query fractions of the synthetic data's train / validation / test splits (no fold)
SYNTHETIC_SPLIT = (0.6, 0.2, 0.2)
#: the synthetic data's folds, 1..5, rotate five query parts as LETOR's do
SYNTHETIC_FOLDS = 5
RESULTS_FILE = "results.json"
#: the per-query evaluation files of a run (``suffix``: a player of an adversarial model)
PER_QUERY_FILES = ("vali_per_query{suffix}.csv", "test_per_query{suffix}.csv")
#: the metrics of :func:`format_summary`'s line
SUMMARY_COLUMNS = ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map@10", "nerr@10")


@dataclasses.dataclass(frozen=True)
class Splits:
    """Train, validation and test ``LibSVMData`` with one feature count."""

    train: Any
    vali: Any
    test: Any

    @property
    def num_features(self) -> int:
        return int(self.train.features.shape[1])


def split_queries(data, fractions: Sequence[float], seed: int = 0) -> list:
    """Random disjoint query subsets of ``data`` with the given fractions."""
    order = np.random.default_rng(seed).permutation(data.num_queries)
    bounds = np.round(np.cumsum([0.0, *fractions]) / sum(fractions) * len(order)).astype(int)
    return [data.subset(np.sort(order[a:b])) for a, b in zip(bounds[:-1], bounds[1:])]


def synthetic_splits(fold: Optional[int] = None, seed: int = 0) -> Splits:
    """``tfrx.data.synthetic(seed=seed)`` split by query: :data:`SYNTHETIC_SPLIT`
    without a fold; with fold k in 1..5, LETOR's rotation of five equal parts
    (train: parts k, k+1, k+2; validation: k+3; test: k+4, modulo 5), so that
    each query is a test query of exactly one fold."""
    import tfr_extensions as tfrx

    data = tfrx.data.synthetic(seed=seed)
    if fold is None:
        return Splits(*split_queries(data, SYNTHETIC_SPLIT, seed))
    if isinstance(fold, bool) or not isinstance(fold, int) or not 1 <= fold <= SYNTHETIC_FOLDS:
        raise ValueError(f"`fold` of the synthetic data must be an int in 1..{SYNTHETIC_FOLDS}; "
                         f"got {fold!r}.")
    order = np.random.default_rng(seed).permutation(data.num_queries)
    parts = np.array_split(order, SYNTHETIC_FOLDS)

    def union(*offsets):
        return data.subset(np.sort(np.concatenate(
            [parts[(fold - 1 + k) % SYNTHETIC_FOLDS] for k in offsets])))
    return Splits(union(0, 1, 2), union(3), union(4))


def load_splits(data: str, fold: Optional[int] = None, seed: int = 0) -> Splits:
    """The three splits of a LETOR folder (``<data>/Fold<fold>`` when a fold is
    given), or of the synthetic data (:func:`synthetic_splits`)."""
    import tfr_extensions as tfrx

    if data == SYNTHETIC:
        return synthetic_splits(fold, seed)
    folder = os.path.join(data, f"Fold{fold}") if fold is not None else data
    paths = [os.path.join(folder, f"{part}.txt") for part in ("train", "vali", "test")]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise ValueError(f"`data` must be 'synthetic' or a folder with train.txt, vali.txt and "
                         f"test.txt (or Fold<k>/ with --fold); missing {missing}.")
    train = tfrx.data.read_libsvm(paths[0])
    num_features = int(train.features.shape[1])
    return Splits(train, *(tfrx.data.read_libsvm(p, num_features=num_features) for p in paths[1:]))


# ----------------------------------------------------------------------------- files
def write_atomically(path: str, write: Callable[[str], None]) -> None:
    """``write(temp_path)``, then the temporary file ``fsync``ed, renamed to ``path``
    and its folder ``fsync``ed (:func:`tfr_extensions.data.durable.replace_durably`):
    a reader, or a run killed meanwhile (even by a power loss), sees the old file or
    the new one, never a part."""
    from tfr_extensions.data import durable

    temp = f"{path}.tmp-{os.getpid()}"
    try:
        write(temp)
        durable.replace_durably(temp, path)
    finally:
        if os.path.exists(temp):
            os.remove(temp)


def write_json(path: str, value: Any) -> None:
    """``value`` as strict JSON (``allow_nan=False``: a NaN or inf raises a ValueError
    rather than writing a bare ``NaN``), atomically (:func:`write_atomically`)."""
    text = json.dumps(value, indent=2, allow_nan=False) + "\n"

    def write(temp):
        with open(temp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    write_atomically(path, write)


def write_text(path: str, text: str) -> None:
    """``text`` to ``path``, atomically (:func:`write_atomically`)."""
    def write(temp):
        with open(temp, "w") as f:
            f.write(text)
    write_atomically(path, write)


def per_query_paths(output_dir: str, suffix: str = "") -> Sequence[str]:
    """The validation and test per-query CSVs of a run (of one player: ``suffix``)."""
    return [os.path.join(output_dir, name.format(suffix=suffix)) for name in PER_QUERY_FILES]


def write_per_query(output_dir: str, validation, test, suffix: str = "") -> None:
    """The two evaluations' per-query frames as CSVs (:func:`per_query_paths`)."""
    for path, result in zip(per_query_paths(output_dir, suffix), (validation, test)):
        write_atomically(path, lambda temp, frame=result.per_query: frame.to_csv(temp, index=False))


def write_evaluations(output_dir: str, validation, test, summary: Dict[str, Any]) -> None:
    """``vali_per_query.csv`` and ``test_per_query.csv`` from the two
    :class:`tfr_extensions.evaluation.Evaluation` results, and ``results.json``:
    ``summary`` plus their summaries under ``"validation"`` and ``"test"`` (a mean
    over no query as null). Each file is written atomically; the JSON is strict."""
    from tfr_extensions import evaluation

    write_per_query(output_dir, validation, test)
    summary = dict(summary, validation=evaluation.json_summary(validation.summary),
                   test=evaluation.json_summary(test.summary))
    write_json(os.path.join(output_dir, RESULTS_FILE), summary)


#: ``done.json``'s record of the other outputs of its folder
DONE_OUTPUTS = "outputs"


def write_done(path: str, config: Mapping[str, Any],
               marker: Optional[Mapping[str, Any]] = None) -> None:
    """A run's completion marker (``done.json``, written after every other output): the
    JSON fields of ``marker``, the finish time (``finished``, UTC), the run's resolved
    ``config`` (its JSON form) and ``outputs``, the size and checksum of every other
    file of its folder, sealed by a checksum of its own
    (:func:`tfr_extensions.data.durable.sealed`); strict and atomic (:func:`write_json`)."""
    from tfr_extensions.data import durable

    folder = os.path.dirname(os.path.abspath(path))
    names = sorted(name for name in os.listdir(folder)
                   if os.path.isfile(os.path.join(folder, name)) and ".tmp-" not in name
                   and name != os.path.basename(path))
    write_json(path, durable.sealed({
        **dict(marker or {}), "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": dict(config), DONE_OUTPUTS: durable.describe_files(folder, names)}))


# ----------------------------------------------------------------------------- printing
def format_mean(value: Optional[float]) -> str:
    """A mean to 4 decimals; ``n/a`` for a mean over no query (None or NaN).

    >>> format_mean(0.61234), format_mean(None)
    ('0.6123', 'n/a')
    """
    return "n/a" if value is None or math.isnan(value) else f"{value:.4f}"


def format_summary(summary: Mapping[str, Any], columns: Sequence[str] = SUMMARY_COLUMNS) -> str:
    """One line: the chosen means and the no-relevant rule.

    >>> format_summary({"ndcg@5": 0.5, "num_counted": 8, "num_queries": 10,
    ...                 "no_relevant": "exclude"}, columns=("ndcg@5",))
    'ndcg@5=0.5000  (8/10 queries, no_relevant=exclude)'
    """
    values = "  ".join(f"{c}={format_mean(summary[c])}" for c in columns if c in summary)
    return f"{values}  ({summary['num_counted']}/{summary['num_queries']} queries, " \
           f"no_relevant={summary['no_relevant']})"


def stored_summary_lines(output_dir: str) -> List[str]:
    """The lines a job prints for the results of a finished run in ``output_dir``: its
    ``results.json``'s validation and test summaries (:func:`format_summary`); none for
    a part it lacks."""
    path = os.path.join(output_dir, RESULTS_FILE)
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        stored = json.load(f)
    return [f"{part + ':':<11} {format_summary(stored[part])}" for part in ("validation", "test")
            if part in stored]
