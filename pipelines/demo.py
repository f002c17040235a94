"""End-to-end demo on the embedded synthetic data (``make demo``).

1. splits ``tfrx.data.synthetic()`` into train / validation / test queries;
2. prints validation and test nDCG@5 of the untrained ``R4.L`` scorer;
3. trains ``R4.L`` with ``twin_ndcg_type3`` (this package) and with TF-Ranking's
   ``approx_ndcg_loss`` through :func:`pipelines.train.run` (where TF-Ranking is
   installed; without it, as on the tf221 and keras3 stacks, that row is left out
   and the demo says so);
4. trains LambdaMART through :func:`pipelines.lambdamart.run`;
5. exports the twin-sigmoid model to ``saved_models/demo/1`` (TF Serving layout);
6. prints a comparison table of test metrics.

All numbers are per-query means over the test queries that have a relevant
document (``no_relevant="exclude"``). Run outputs go to ``runs/demo/<method>``
(replaced at every demo: the runs are trained with ``overwrite=True``).

    python -m pipelines.demo [--epochs 20] [--export-dir saved_models/demo/1]
"""
import argparse
import dataclasses
import os
import time
from typing import Dict

import pandas as pd

from . import common
from . import flags
from . import lambdamart
from . import train
from tfr_extensions import compat
from tfr_extensions import evaluation
from tfr_extensions import models
from tfr_extensions.backend import keras

TABLE_COLUMNS = common.SUMMARY_COLUMNS


@dataclasses.dataclass(frozen=True)
class DemoConfig:
    """What the demo depends on.

    Attributes:
      epochs: training epochs of each neural model.
      output_dir: where the runs go (runs/demo/<method>, replaced at every demo).
      export_dir: the SavedModel version folder of the twin-sigmoid model.
      seed: the seed of the data split, the initial weights and the trees.
    """

    epochs: int = 20
    output_dir: str = os.path.join("runs", "demo")
    export_dir: str = os.path.join("saved_models", "demo", "1")
    seed: int = 0


def untrained_summaries(splits: common.Splits, config: train.TrainConfig) -> Dict[str, dict]:
    """Validation and test means of a freshly initialized scorer."""
    keras.utils.set_random_seed(config.seed)
    model = models.scorer(config.scorer, splits.num_features, hidden_units=config.hidden_units)
    return {name: evaluation.evaluate_model(model, data, no_relevant=config.no_relevant).summary
            for name, data in (("validation", splits.vali), ("test", splits.test))}


def comparison_table(rows: Dict[str, dict]) -> pd.DataFrame:
    """Methods x metrics (test means)."""
    return pd.DataFrame({name: {c: summary[c] for c in TABLE_COLUMNS}
                         for name, summary in rows.items()}).T


def build_parser() -> argparse.ArgumentParser:
    """The command line: a flag per :class:`DemoConfig` field."""
    parser = argparse.ArgumentParser(prog="python -m pipelines.demo",
                                     description=__doc__.split("\n\n")[0])
    flags.add_config_flags(parser, DemoConfig)
    return parser


def main(argv=None) -> pd.DataFrame:
    demo = flags.config_from_args(DemoConfig, build_parser().parse_args(argv))
    start = time.perf_counter()

    base = train.TrainConfig(name="demo", data=common.SYNTHETIC, scorer="R4.L",
                             epochs=demo.epochs, seed=demo.seed, verbose=2, tensorboard=True)
    splits = common.load_splits(base.data, seed=base.seed)
    print(f"synthetic data: {splits.train.num_queries} / {splits.vali.num_queries} / "
          f"{splits.test.num_queries} train / validation / test queries, "
          f"{splits.num_features} features")
    untrained = untrained_summaries(splits, base)
    print(f"untrained R4.L: validation nDCG@5 = {untrained['validation']['ndcg@5']:.4f}, "
          f"test nDCG@5 = {untrained['test']['ndcg@5']:.4f}")

    rows = {"untrained R4.L": untrained["test"]}
    losses = {"twin_ndcg_type3 (tfrx)": "twin_ndcg_type3"}
    if compat.has_tf_ranking():
        losses["approx_ndcg (TF-Ranking)"] = "approx_ndcg_loss"
    else:
        print("TF-Ranking does not import here (only the tf215 stack has it): no approx_ndcg row.")
    for label, loss in losses.items():
        config = train.TrainConfig(**{
            **base.to_json(), "name": f"demo_{loss}", "loss": loss,
            "output_dir": os.path.join(demo.output_dir, loss),
            "export_dir": demo.export_dir if loss == "twin_ndcg_type3" else None})
        print(f"\n== {label}: {config.scorer}, {config.epochs} epochs ==")
        result = train.run(config, splits=splits, overwrite=True)  # a demo trains afresh
        print(f"best epoch {result.best_epoch}; test: {common.format_summary(result.test.summary)}")
        if result.export_dir:
            print(f"exported SavedModel to {result.export_dir}")
        rows[label] = result.test.summary

    print("\n== LambdaMART (LightGBM lambdarank) ==")
    boosted = lambdamart.run(lambdamart.LambdaMARTConfig(
        name="demo_lambdamart", seed=demo.seed,
        output_dir=os.path.join(demo.output_dir, "lambdamart")), splits=splits,
        overwrite=True)  # a demo trains afresh
    print(f"preset {boosted.preset}, best iteration {boosted.best_iteration}; "
          f"test: {common.format_summary(boosted.test.summary)}")
    rows[f"LambdaMART ({boosted.preset} preset)"] = boosted.test.summary

    table = comparison_table(rows)
    counted = untrained["test"]
    print(f"\nTest metrics ({counted['num_counted']} of {counted['num_queries']} queries: "
          f"lists without relevant documents excluded)")
    print(table.to_string(float_format=lambda v: f"{v:.4f}"))
    print(f"\ndemo finished in {time.perf_counter() - start:.0f} s")
    return table


if __name__ == "__main__":
    main()
