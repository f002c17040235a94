"""LambdaMART (LightGBM ``lambdarank``) on the same files, evaluated the same way.

    python -m pipelines.lambdamart --data ../shared/data/MQ2008 --fold 1
    python -m pipelines.lambdamart --data synthetic --preset small
    python -m pipelines.lambdamart --data ../shared/data/MQ2008 --fold 1 \\
        --objective twin_ndcg_type3 --objective-args '{"hessian": "lambdamart"}'

``--objective`` (default ``lambdarank``) also takes ``twin_<metric>_<type>``
(:data:`tfr_extensions.gbdt.OBJECTIVE_NAMES`): the same trees and early
stopping, with the twin-sigmoid objective of :mod:`tfr_extensions.gbdt`
(direct optimization of Precision, AP, nDCG or nERR). ``--objective-args`` are
its keyword arguments (``topn``, ``alpha_b``, ``hessian``, ``tie_break``,
``hessian_floor``); in ``--params`` (and so in :mod:`pipelines.cross_validate`
presets and grids) ``"objective"`` and ``"objective.<arg>"`` keys set the same.
Its seed is ``--seed``; ``results.json`` records the objective with all its
settings (``objective``), the Hessian included.

Outputs under ``--output-dir`` (default ``runs/<name>``) as in
:mod:`pipelines.train`: ``config.json``, ``results.json``, ``model.txt``
(LightGBM's text model) and ``vali_per_query.csv`` / ``test_per_query.csv``
from :mod:`tfr_extensions.evaluation` (so the no-relevant rule is explicit and
identical to the neural runs; LightGBM's own ``ndcg@5``, which counts such
lists as 1, is used only for early stopping). Features are used raw (trees are
invariant to per-feature monotone transforms, and the seeds give LambdaMART
raw features).

Presets (``PRESETS``):

* ``seeds``: the parameters of the papers' LambdaMART baseline: learning rate
  0.05, 400 leaves, ``min_data_in_leaf`` 50, ``min_sum_hessian_in_leaf`` 200,
  up to 1000 trees with early stopping after 200 rounds without a better
  validation nDCG@5. Sized for MSLR-WEB30K-like data (millions of rows).
* ``small``: the same but 31 leaves, ``min_data_in_leaf`` 20 and
  ``min_sum_hessian_in_leaf`` 1e-3 (LightGBM's defaults), for LETOR 4.0-sized
  data. Why ``seeds`` fails there: lambdarank hessians are small
  (:math:`\\sum` over a document's pairs of :math:`\\rho(1-\\rho)|\\Delta
  \\mathrm{nDCG}|`, well below 1 per document), so on MQ2008 Fold1 (9,630
  rows, 471 queries) no split of the root leaves both children with a hessian
  sum >= 200: we measured that the largest ``min_sum_hessian_in_leaf`` that
  still allows a first split is about 167. The first tree is a single leaf,
  LightGBM stops ("no more leaves that meet the split requirements") and the
  model is one constant tree (validation nDCG@5 = LightGBM's score of the
  original order). ``tests/pipelines/test_lambdamart.py`` checks this.
* ``auto`` (default): ``small`` below 100,000 training rows, else ``seeds``;
  ``results.json`` records the preset used.
"""
import argparse
import dataclasses
import json
import os
from typing import Any, Dict, Mapping, Optional, Tuple

import lightgbm as lgb
import numpy as np

from pipelines import train as train_pipeline
from tfr_extensions import evaluation, gbdt

SEEDS_PARAMS = {"learning_rate": 0.05, "num_leaves": 400, "min_data_in_leaf": 50,
                "min_sum_hessian_in_leaf": 200.0}
PRESETS = {
    "seeds": SEEDS_PARAMS,
    "small": {**SEEDS_PARAMS, "num_leaves": 31, "min_data_in_leaf": 20,
              "min_sum_hessian_in_leaf": 1e-3},
}
AUTO_SMALL_BELOW_ROWS = 100_000
OBJECTIVES = ("lambdarank", *gbdt.OBJECTIVE_NAMES)
#: prefix of the ``params`` keys that are arguments of a twin-sigmoid objective
OBJECTIVE_ARG_PREFIX = "objective."


@dataclasses.dataclass(frozen=True)
class LambdaMARTConfig:
    """Everything a LambdaMART run depends on (written as ``config.json``)."""

    name: str = "lambdamart"
    data: str = train_pipeline.SYNTHETIC
    fold: Optional[int] = None
    preset: str = "auto"                    # auto | seeds | small
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # LightGBM overrides
    objective: str = "lambdarank"           # lambdarank | twin_<metric>_<type>
    objective_args: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # twin objective
    num_boost_round: int = 1000
    early_stopping_rounds: int = 200
    eval_at: int = 5
    seed: int = 0
    num_threads: int = 0                    # 0: LightGBM's default
    output_dir: Optional[str] = None        # None: runs/<name>
    no_relevant: str = "exclude"

    def __post_init__(self):
        if self.preset not in ("auto", *PRESETS):
            raise ValueError(f"`preset` must be one of {['auto', *PRESETS]}; got {self.preset!r}.")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"`objective` must be one of {list(OBJECTIVES)}; "
                             f"got {self.objective!r}.")
        if self.no_relevant not in evaluation.NO_RELEVANT_RULES:
            raise ValueError(f"`no_relevant` must be one of {list(evaluation.NO_RELEVANT_RULES)}; "
                             f"got {self.no_relevant!r}.")
        for arg in ("num_boost_round", "early_stopping_rounds", "eval_at"):
            value = getattr(self, arg)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{arg}` must be a positive int; got {value!r}.")

    @property
    def resolved_output_dir(self) -> str:
        return self.output_dir or os.path.join("runs", self.name)


@dataclasses.dataclass
class LambdaMARTResult:
    """What :func:`run` returns (``results.json`` holds its JSON part)."""

    config: LambdaMARTConfig
    booster: lgb.Booster
    params: Dict[str, Any]
    preset: str
    best_iteration: int
    num_trees: int
    validation: evaluation.Evaluation
    test: evaluation.Evaluation
    output_dir: str
    objective: Dict[str, Any] = dataclasses.field(default_factory=lambda: {"name": "lambdarank"})


def resolve_params(config: LambdaMARTConfig, num_rows: int) -> Tuple[str, Dict[str, Any]]:
    """The preset actually used and the full LightGBM parameter dict.

    ``params["objective"]`` is a name: ``lambdarank`` or a twin-sigmoid
    objective (:func:`resolve_objective` builds it); ``"objective.<arg>"`` keys
    of ``config.params`` are left in for :func:`resolve_objective`.
    """
    preset = config.preset
    if preset == "auto":
        preset = "small" if num_rows < AUTO_SMALL_BELOW_ROWS else "seeds"
    params = {"objective": config.objective, "metric": "ndcg", "eval_at": [config.eval_at],
              "seed": config.seed, "deterministic": True, "verbose": -1,
              "num_threads": config.num_threads, **PRESETS[preset], **dict(config.params)}
    return preset, params


def resolve_objective(config: LambdaMARTConfig, params: Mapping[str, Any]
                      ) -> Tuple[Dict[str, Any], Any, Dict[str, Any]]:
    """``(params, objective, record)`` for training from :func:`resolve_params`'s dict.

    ``params``: the LightGBM parameters without ``"objective.<arg>"`` keys (the
    objective's name stays, so they can be written to ``results.json``);
    ``objective``: what ``lgb.train`` gets as ``params["objective"]``, the name
    ``"lambdarank"`` or a :class:`tfr_extensions.gbdt.TwinSigmoidObjective`
    (seeded with ``config.seed``); ``record``: its name and settings.
    """
    params = dict(params)
    args = dict(config.objective_args)
    args.update({key[len(OBJECTIVE_ARG_PREFIX):]: params.pop(key) for key in list(params)
                 if key.startswith(OBJECTIVE_ARG_PREFIX)})
    name = params["objective"]
    if name not in OBJECTIVES:
        raise ValueError(f"`objective` must be one of {list(OBJECTIVES)}; got {name!r}.")
    if name == "lambdarank":
        if args:
            raise ValueError(f"objective arguments {sorted(args)} need a twin_<metric>_<type> "
                             f"objective; got 'lambdarank'.")
        return params, name, {"name": name}
    unknown = sorted(set(args) - {"topn", "alpha_b", "hessian", "tie_break", "hessian_floor"})
    if unknown:
        raise ValueError(f"unknown twin-sigmoid objective arguments {unknown}.")
    threads = params.get("num_threads") or None
    objective = gbdt.twin_sigmoid_objective(**gbdt.parse_objective_name(name), **args,
                                            seed=config.seed, num_threads=threads)
    return params, objective, {"name": name, **objective.config}


def _lgb_dataset(data, reference=None) -> lgb.Dataset:
    return lgb.Dataset(np.asarray(data.features, np.float32), np.asarray(data.labels),
                       group=np.diff(np.asarray(data.query_offsets)), reference=reference,
                       free_raw_data=False)


def _evaluate(booster: lgb.Booster, data, no_relevant: str) -> evaluation.Evaluation:
    scores = booster.predict(np.asarray(data.features, np.float32),
                             num_iteration=booster.best_iteration or None)
    return evaluation.evaluate(data.labels, scores, data.query_offsets,
                               qids=data.query_ids, no_relevant=no_relevant)


def run(config: LambdaMARTConfig,
        splits: Optional[train_pipeline.Splits] = None) -> LambdaMARTResult:
    """Trains with early stopping on validation nDCG@eval_at, evaluates, writes outputs."""
    config = dataclasses.replace(config, output_dir=config.resolved_output_dir)  # resolved
    splits = splits or train_pipeline.load_splits(config.data, config.fold, config.seed)
    preset, params = resolve_params(config, len(splits.train.labels))
    params, objective, objective_record = resolve_objective(config, params)
    train_set = _lgb_dataset(splits.train)
    vali_set = _lgb_dataset(splits.vali, reference=train_set)
    booster = lgb.train({**params, "objective": objective}, train_set,
                        num_boost_round=config.num_boost_round,
                        valid_sets=[vali_set], valid_names=["vali"],
                        callbacks=[lgb.early_stopping(config.early_stopping_rounds, verbose=False)])
    result = LambdaMARTResult(
        config=config, booster=booster, params=params, preset=preset,
        best_iteration=int(booster.best_iteration), num_trees=int(booster.num_trees()),
        validation=_evaluate(booster, splits.vali, config.no_relevant),
        test=_evaluate(booster, splits.test, config.no_relevant),
        output_dir=config.resolved_output_dir, objective=objective_record)
    write_outputs(result)
    return result


def write_outputs(result: LambdaMARTResult) -> None:
    """``config.json``, ``results.json``, ``model.txt`` and the per-query CSVs."""
    out = result.output_dir
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(dataclasses.asdict(result.config), f, indent=2)
    result.booster.save_model(os.path.join(out, "model.txt"))
    train_pipeline.write_evaluations(out, result.validation, result.test, {
        "config": dataclasses.asdict(result.config), "preset": result.preset,
        "params": result.params, "objective": result.objective,
        "best_iteration": result.best_iteration,
        "num_trees": result.num_trees})


def parse_args(argv=None) -> LambdaMARTConfig:
    """Flags -> :class:`LambdaMARTConfig` (only ``main`` calls this)."""
    defaults = LambdaMARTConfig()
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.lambdamart", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--name", default=defaults.name)
    parser.add_argument("--data", default=defaults.data,
                        help="'synthetic' or a folder with train.txt, vali.txt, test.txt")
    parser.add_argument("--fold", type=int, default=None)
    parser.add_argument("--preset", default=defaults.preset, choices=["auto", *PRESETS])
    parser.add_argument("--params", default="{}", type=json.loads,
                        help="JSON LightGBM parameter overrides")
    parser.add_argument("--objective", default=defaults.objective, choices=OBJECTIVES,
                        help="lambdarank, or a twin-sigmoid objective twin_<metric>_<type>")
    parser.add_argument("--objective-args", default="{}", type=json.loads,
                        help='JSON arguments of a twin objective, e.g. '
                             '\'{"hessian": "lambdamart", "topn": 10}\'')
    parser.add_argument("--num-boost-round", type=int, default=defaults.num_boost_round)
    parser.add_argument("--early-stopping-rounds", type=int, default=defaults.early_stopping_rounds)
    parser.add_argument("--eval-at", type=int, default=defaults.eval_at)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--num-threads", type=int, default=defaults.num_threads)
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--no-relevant", default=defaults.no_relevant,
                        choices=evaluation.NO_RELEVANT_RULES)
    return LambdaMARTConfig(**vars(parser.parse_args(argv)))


def main(argv=None) -> None:
    config = parse_args(argv)
    result = run(config)
    print(f"objective {result.objective}")
    print(f"preset {result.preset}: {result.num_trees} trees (best iteration "
          f"{result.best_iteration} on validation nDCG@{config.eval_at}); "
          f"outputs in {result.output_dir}")
    print("validation:", train_pipeline.format_summary(result.validation.summary))
    print("test:      ", train_pipeline.format_summary(result.test.summary))


if __name__ == "__main__":
    main()
