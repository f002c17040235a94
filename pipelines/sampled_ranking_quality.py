"""Figure 1 of the policy-gradient diagnostic: how good are the sampled rankings?

Yu et al., "Diagnostic Evaluation of Policy-Gradient-Based Ranking"
(``policy-gradient-ranking-diagnostic.txt``), Section 6.3: the average nDCG@k of
the rankings that ExptUtility and MDPRank sample on the training set, epoch
by epoch, against ListMLE's ideal rankings (nDCG 1.0 by construction).

    python -m pipelines.sampled_ranking_quality                    # the synthetic data
    python -m pipelines.sampled_ranking_quality --data ../shared/data/MQ2008/Fold1 \\
        --epochs 20 --topn 10

For each policy-gradient method a scorer (:func:`tfr_extensions.models.scorer`)
is trained with the loss (``num_samples`` rankings of size ``topn`` per query,
as in Section 5.2); the loss logs the mean nDCG@topn of exactly the rankings
its gradient used (:class:`tfr_extensions.losses.SampledRankingMetric`), and
Keras averages it over the epoch. The same epoch's nDCG@topn of the model's
own (sorted, deterministic) rankings is logged alongside. The ListMLE
reference is the nDCG@topn of the ideal rankings of the same training lists,
computed from the labels (1.0 for every list with a relevant document, which
are the only lists kept, as in the paper's Section 5.1).

Features reach the scorer raw: it z-scores each list itself (as in
:mod:`pipelines.train`), so the data pipeline does not normalize them again.

Outputs in ``--output-dir`` (default ``runs/sampled_ranking_quality``):
``config.json``, ``sampled_ranking_quality.csv`` (columns ``method, epoch,
sampled_ndcg, ranking_ndcg``) and ``sampled_ranking_quality.png``.
"""
import argparse
import csv
import dataclasses
import os
from typing import Dict, List, Sequence

import numpy as np
import tensorflow as tf

from . import common
from . import flags
import tfr_extensions as tfrx
from tfr_extensions.backend import keras
from tfr_extensions.ops import validation

METHODS = {"ExptUtility": "expected_utility", "MDPRank": "mdprank"}
REFERENCE = "ListMLE"
CSV_NAME = "sampled_ranking_quality.csv"
PNG_NAME = "sampled_ranking_quality.png"


@dataclasses.dataclass(frozen=True)
class QualityConfig:
    """Everything one run depends on (written as ``config.json``).

    Attributes:
      data: 'synthetic' (the embedded data) or a fold folder with train.txt
        (e.g. MQ2008/Fold1).
      output_dir: where the CSV, the plot and config.json go.
      epochs: training epochs of each method.
      topn: sampled ranking size and nDCG cutoff (10 in the paper).
      num_samples: rankings sampled per query and step.
      temperature: temperature of the Plackett-Luce sampling.
      scorer: scorer notation of tfrx.models (e.g. R4.L).
      hidden_units: hidden units per layer of the scorer.
      batch_size: queries per batch.
      learning_rate: Adam's learning rate.
      min_list_size: drop training lists with fewer documents.
      synthetic_queries: queries of the synthetic data.
      seed: the seed of the initial weights, the data order and the sampling.
    """

    data: str = common.SYNTHETIC
    output_dir: str = os.path.join("runs", "sampled_ranking_quality")
    epochs: int = 6
    topn: int = 10
    num_samples: int = 1
    temperature: float = 1.0
    scorer: str = "R4.L"
    hidden_units: int = 100
    batch_size: int = 32
    learning_rate: float = 1e-3
    min_list_size: int = 10
    synthetic_queries: int = 200
    seed: int = 0

    def __post_init__(self):
        for name in ("epochs", "topn", "num_samples", "hidden_units", "batch_size",
                     "min_list_size", "synthetic_queries"):
            validation.validate_int(getattr(self, name), name, minimum=1)
        validation.validate_positive(self.learning_rate, "learning_rate")
        validation.validate_positive(self.temperature, "temperature")


def load_training_data(config: QualityConfig) -> tfrx.data.LibSVMData:
    """The fold's ``train.txt``, or the embedded synthetic data."""
    if config.data == common.SYNTHETIC:
        return tfrx.data.synthetic(num_queries=config.synthetic_queries, seed=config.seed)
    path = os.path.join(config.data, "train.txt")
    if not os.path.isfile(path):
        raise ValueError(f"`data` must be a fold directory containing train.txt; got "
                         f"{config.data!r}.")
    return tfrx.data.read_libsvm(path)


def training_dataset(config: QualityConfig, data) -> tf.data.Dataset:
    """The training lists with a relevant document and at least ``min_list_size``
    documents, raw features (the scorer normalizes them)."""
    return tfrx.data.ranking_dataset(
        data, batch_size=config.batch_size, shuffle=True, normalization="none",
        drop_no_relevant=True, min_list_size=config.min_list_size, seed=config.seed)


def ideal_reference(dataset: tf.data.Dataset, topn: int) -> float:
    """Mean nDCG@topn of the ideal rankings (scores = labels) of the training lists."""
    values = [tfrx.metrics.ndcg(labels, labels, topn=topn).numpy()
              for _, labels in dataset.take(-1)]
    return float(np.mean(np.concatenate(values)))


def train_method(config: QualityConfig, loss_name: str, dataset, num_features: int) -> Dict:
    """Trains one scorer with a policy-gradient loss; per-epoch sampled and
    deterministic-ranking nDCG@topn on the training set."""
    keras.utils.set_random_seed(config.seed)
    model = tfrx.models.scorer(config.scorer, num_features, hidden_units=config.hidden_units)
    loss = tfrx.losses.get(loss_name, topn=config.topn, num_samples=config.num_samples,
                           temperature=config.temperature, seed=config.seed)
    sampled = tfrx.losses.SampledRankingMetric(loss, name="sampled_ndcg")
    ranking = tfrx.metrics.RankingMetric("ndcg", topn=config.topn, name="ranking_ndcg")
    model.compile(keras.optimizers.Adam(config.learning_rate), loss=loss,
                  metrics=[sampled, ranking])
    # shuffle=False: the dataset is shuffled already (Keras 3 warns otherwise)
    history = model.fit(dataset, epochs=config.epochs, verbose=0, shuffle=False).history
    return {"sampled_ndcg": history["sampled_ndcg"], "ranking_ndcg": history["ranking_ndcg"]}


def run(config: QualityConfig) -> List[Dict]:
    """Trains both methods; returns the CSV rows and writes every output."""
    data = load_training_data(config)
    num_features = int(data.features.shape[1])
    reference = ideal_reference(training_dataset(config, data), config.topn)
    rows = []
    for method, loss_name in METHODS.items():
        # A fresh dataset per method: both see the same batches in the same order.
        curves = train_method(config, loss_name, training_dataset(config, data), num_features)
        rows += [{"method": method, "epoch": epoch + 1, "sampled_ndcg": sampled,
                  "ranking_ndcg": ranked}
                 for epoch, (sampled, ranked) in enumerate(zip(curves["sampled_ndcg"],
                                                               curves["ranking_ndcg"]))]
    rows += [{"method": REFERENCE, "epoch": epoch + 1, "sampled_ndcg": reference,
              "ranking_ndcg": float("nan")} for epoch in range(config.epochs)]
    write_outputs(config, rows)
    return rows


def write_outputs(config: QualityConfig, rows: Sequence[Dict]) -> None:
    os.makedirs(config.output_dir, exist_ok=True)
    common.write_json(os.path.join(config.output_dir, "config.json"), dataclasses.asdict(config))

    def write_csv(temp):
        with open(temp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["method", "epoch", "sampled_ndcg",
                                                   "ranking_ndcg"])
            writer.writeheader()
            writer.writerows(rows)
    common.write_atomically(os.path.join(config.output_dir, CSV_NAME), write_csv)
    plot(rows, config.topn, os.path.join(config.output_dir, PNG_NAME))


def plot(rows: Sequence[Dict], topn: int, path: str) -> None:
    """Sampled-ranking nDCG@topn per epoch, one line per method (cf. Figure 1)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for method in list(METHODS) + [REFERENCE]:
        points = [(r["epoch"], r["sampled_ndcg"]) for r in rows if r["method"] == method]
        epochs, values = zip(*points)
        style = {"linestyle": "--", "color": "black"} if method == REFERENCE else {"marker": "o"}
        label = f"{REFERENCE} (ideal rankings)" if method == REFERENCE else method
        ax.plot(epochs, values, label=label, **style)
    ax.set_xlabel("training epoch")
    ax.set_ylabel(f"nDCG@{topn} of the rankings used for the gradient")
    ax.set_ylim(0.0, 1.05)
    ax.set_title("Quality of sampled rankings on the training set")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    """The command line: a flag per :class:`QualityConfig` field."""
    parser = argparse.ArgumentParser(prog="python -m pipelines.sampled_ranking_quality",
                                     description=__doc__.split("\n")[0])
    flags.add_config_flags(parser, QualityConfig)
    return parser


def parse_args(argv=None) -> QualityConfig:
    """Flags -> :class:`QualityConfig` (only ``main`` calls this)."""
    return flags.config_from_args(QualityConfig, build_parser().parse_args(argv))


def main(argv=None) -> None:
    config = parse_args(argv)
    rows = run(config)
    for method in list(METHODS) + [REFERENCE]:
        values = [r["sampled_ndcg"] for r in rows if r["method"] == method]
        print(f"{method:12s} sampled nDCG@{config.topn} by epoch: "
              + " ".join(f"{v:.3f}" for v in values))
    print(f"wrote {os.path.join(config.output_dir, CSV_NAME)} and {PNG_NAME}")


if __name__ == "__main__":
    main()
