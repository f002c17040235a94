"""LambdaMART (LightGBM ``lambdarank``) on the same files, evaluated the same way.

    python -m pipelines.lambdamart --data ../shared/data/MQ2008 --fold 1
    python -m pipelines.lambdamart --data synthetic --preset small
    python -m pipelines.lambdamart --data ../shared/data/MQ2008 --fold 1 \\
        --objective twin_ndcg_type3 --objective-args '{"hessian": "lambdamart"}'

``--objective`` (default ``lambdarank``) also takes ``twin_<metric>_<type>``
(:data:`tfr_extensions.gbdt.OBJECTIVE_NAMES`): the same trees and early
stopping, with the twin-sigmoid objective of :mod:`tfr_extensions.gbdt`
(direct optimization of Precision, AP, nDCG or nERR). ``--objective-args`` are
its keyword arguments (:data:`OBJECTIVE_ARGS`, read from the signature of
:func:`tfr_extensions.gbdt.twin_sigmoid_objective`: ``topn``, ``alpha_b``,
``hessian``, ``tie_break``, ``hessian_floor``, ...); in ``--params`` (and so in
:mod:`pipelines.cross_validate` presets and grids) ``"objective"`` and
``"objective.<arg>"`` keys set the same. Its seed is ``--seed``;
``results.json`` records the objective with all its settings (``objective``),
the Hessian included.

Outputs under ``--output-dir`` (default ``runs/<name>``) as in
:mod:`pipelines.train`, through the same helpers (:mod:`pipelines.resume`,
:mod:`pipelines.common`): ``config.json`` (first), ``results.json``,
``model.txt`` (LightGBM's text model), ``vali_per_query.csv`` /
``test_per_query.csv`` from :mod:`tfr_extensions.evaluation` (so the
no-relevant rule is explicit and identical to the neural runs; LightGBM's own
``ndcg@5``, which counts such lists as 1, is used only for early stopping), and
last ``done.json``, the completion marker. As in :mod:`pipelines.train`, a
finished run of the same config is not trained again
(:class:`pipelines.resume.FinishedRunError`; the command line prints its stored
results) and a run of another config in the folder is refused unless
``--overwrite``. Unlike a neural run, an interrupted run does not resume
mid-way: it has no backup (the boosting and its early stopping are not
checkpointed; a tree run is short), so rerunning it trains it again from the
first tree. Features are used raw (trees are invariant to per-feature monotone
transforms, and the papers' protocol gives LambdaMART raw features).

Presets (``PRESETS``; ``seeds`` is an alias of ``paper``):

* ``paper``: the parameters of the papers' LambdaMART baseline: learning rate
  0.05, 400 leaves, ``min_data_in_leaf`` 50, ``min_sum_hessian_in_leaf`` 200,
  up to 1000 trees with early stopping after 200 rounds without a better
  validation nDCG@5. Sized for MSLR-WEB30K-like data (millions of rows).
* ``small``: the same but 31 leaves, ``min_data_in_leaf`` 20 and
  ``min_sum_hessian_in_leaf`` 1e-3 (LightGBM's defaults), for LETOR 4.0-sized data. Why
  ``paper`` fails there: lambdarank hessians are small (:math:`\\sum` over a document's
  pairs of :math:`\\rho(1-\\rho)|\\Delta \\mathrm{nDCG}|`, well below 1 per document), so on
  MQ2008 Fold1 (9,630 rows) no split of the root leaves both children with a hessian sum >=
  200. The first tree is a single leaf, LightGBM stops ("no more leaves that meet the split
  requirements") and the model is one constant tree (validation nDCG@5 = LightGBM's score of
  the original order). ``tests/pipelines/test_lambdamart.py`` checks this.
* ``auto`` (default): ``small`` below 100,000 training rows, else ``paper``;
  ``results.json`` records the preset used.
"""
import argparse
import dataclasses
import inspect
import os
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import lightgbm as lgb
import numpy as np

from . import common
from . import flags
from . import run_dir
from tfr_extensions import evaluation, gbdt
from tfr_extensions.ops import validation

PAPER_PARAMS = {"learning_rate": 0.05, "num_leaves": 400, "min_data_in_leaf": 50,
                "min_sum_hessian_in_leaf": 200.0}
PRESETS = {
    "paper": PAPER_PARAMS,
    "small": {**PAPER_PARAMS, "num_leaves": 31, "min_data_in_leaf": 20,
              "min_sum_hessian_in_leaf": 1e-3},
}
#: older preset names that still work: alias -> preset
PRESET_ALIASES = {"seeds": "paper"}
AUTO_SMALL_BELOW_ROWS = 100_000
OBJECTIVES = ("lambdarank", *gbdt.OBJECTIVE_NAMES)
#: prefix of the ``params`` keys that are arguments of a twin-sigmoid objective
OBJECTIVE_ARG_PREFIX = "objective."
#: arguments of :func:`tfr_extensions.gbdt.twin_sigmoid_objective` that a run sets from its
#: config (beside the metric and gradient, which the objective's name sets)
OBJECTIVE_ARGS_OF_THE_RUN = ("seed", "num_threads")
#: the twin-sigmoid objective's arguments a config may set (``objective_args``,
#: ``"objective.<arg>"`` params): those of its signature but the ones the name and the run set
OBJECTIVE_ARGS = tuple(
    name for name in inspect.signature(gbdt.twin_sigmoid_objective).parameters
    if name not in (*gbdt.parse_objective_name(gbdt.OBJECTIVE_NAMES[0]),
                    *OBJECTIVE_ARGS_OF_THE_RUN))


def canonical_preset(name: str) -> str:
    """A preset name with aliases resolved: ``"seeds"`` -> ``"paper"``.

    >>> canonical_preset("seeds"), canonical_preset("small")
    ('paper', 'small')
    """
    return PRESET_ALIASES.get(name, name)


@dataclasses.dataclass(frozen=True)
class LambdaMARTConfig:
    """Everything a LambdaMART run depends on (written as ``config.json``).

    Attributes:
      name: run name; the default output dir is runs/<name>.
      data: 'synthetic' (the embedded data) or a folder with train.txt, vali.txt and test.txt.
      fold: use <data>/Fold<fold> (the synthetic data has folds 1..5).
      preset: LightGBM parameters: auto (small below 100,000 training rows, else paper),
        paper (the papers' baseline; alias seeds) or small (for LETOR 4.0 sizes).
      params: JSON LightGBM parameters over the preset's; "objective" and
        "objective.<arg>" keys set the objective and its arguments.
      objective: lambdarank, or a twin-sigmoid objective twin_<metric>_<type> (tfrx.gbdt).
      objective_args: JSON arguments of a twin-sigmoid objective, e.g.
        '{"hessian": "lambdamart", "topn": 10}'.
      num_boost_round: the most trees.
      early_stopping_rounds: stop after this many trees without a better validation
        nDCG@eval_at.
      eval_at: the cutoff of LightGBM's validation nDCG for early stopping.
      seed: LightGBM's seed and the twin-sigmoid objective's.
      num_threads: LightGBM threads (0: LightGBM's default).
      output_dir: where the outputs go; none: runs/<name>.
      no_relevant: evaluation rule for lists without a relevant document
        (tfr_extensions.evaluation): exclude, count as zero, or count as one.
    """

    name: str = "lambdamart"
    data: str = common.SYNTHETIC
    fold: Optional[int] = None
    preset: str = dataclasses.field(default="auto", metadata=flags.option(
        choices=("auto", *PRESETS), parse=canonical_preset))
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    objective: str = dataclasses.field(default="lambdarank",
                                       metadata=flags.option(choices=OBJECTIVES))
    objective_args: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    num_boost_round: int = 1000
    early_stopping_rounds: int = 200
    eval_at: int = 5
    seed: int = 0
    num_threads: int = 0
    output_dir: Optional[str] = None
    no_relevant: str = dataclasses.field(
        default="exclude", metadata=flags.option(choices=evaluation.NO_RELEVANT_RULES))

    def __post_init__(self):
        object.__setattr__(self, "preset", canonical_preset(self.preset))
        if self.preset not in ("auto", *PRESETS):
            raise ValueError(f"`preset` must be one of {['auto', *PRESETS]} (or an alias in "
                             f"{list(PRESET_ALIASES)}); got {self.preset!r}.")
        validation.validate_choice(self.objective, OBJECTIVES, "objective")
        validation.validate_choice(self.no_relevant, evaluation.NO_RELEVANT_RULES, "no_relevant")
        for arg in ("num_boost_round", "early_stopping_rounds", "eval_at"):
            validation.validate_int(getattr(self, arg), arg, minimum=1)

    @property
    def resolved_output_dir(self) -> str:
        return self.output_dir or os.path.join("runs", self.name)

    def to_json(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


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
        preset = "small" if num_rows < AUTO_SMALL_BELOW_ROWS else "paper"
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
    validation.validate_choice(name, OBJECTIVES, "objective")
    if name == "lambdarank":
        if args:
            raise ValueError(f"objective arguments {sorted(args)} need a twin_<metric>_<type> "
                             f"objective; got 'lambdarank'.")
        return params, name, {"name": name}
    unknown = sorted(set(args) - set(OBJECTIVE_ARGS))
    if unknown:
        raise ValueError(f"unknown twin-sigmoid objective arguments {unknown} (known: "
                         f"{list(OBJECTIVE_ARGS)}).")
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


def run(config: LambdaMARTConfig, splits: Optional[common.Splits] = None, *,
        overwrite: bool = False, marker: Optional[Mapping[str, Any]] = None,
        extra_outputs: Optional[Callable[[LambdaMARTResult], None]] = None
        ) -> LambdaMARTResult:
    """Trains with early stopping on validation nDCG@eval_at, evaluates, writes outputs,
    then ``extra_outputs(result)`` (a caller's own files, e.g. the learning curves of
    :mod:`pipelines.cv_runner`) and last the completion marker ``done.json`` (its
    finish time, the config, and the JSON fields of ``marker``), as
    :func:`pipelines.train.run` does.

    Raises:
      FinishedRunError, OutputDirError: see :func:`pipelines.resume.check_output_dir`
        (not with ``overwrite``, which deletes the old outputs first).
    """
    config = dataclasses.replace(config, output_dir=config.resolved_output_dir)  # resolved
    splits = splits or common.load_splits(config.data, config.fold, config.seed)
    run_dir.prepare_output_dir(config, config.output_dir, overwrite)  # config.json
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
        output_dir=config.output_dir, objective=objective_record)
    write_outputs(result)
    if extra_outputs is not None:
        extra_outputs(result)
    common.write_done(os.path.join(config.output_dir, run_dir.DONE_FILE), config.to_json(),
                      marker)
    return result


def write_outputs(result: LambdaMARTResult) -> None:
    """``results.json``, ``model.txt`` and the per-query CSVs (``config.json`` is written
    before training, :func:`pipelines.resume.prepare_output_dir`)."""
    out = result.output_dir
    os.makedirs(out, exist_ok=True)
    common.write_atomically(os.path.join(out, "model.txt"), result.booster.save_model)
    common.write_evaluations(out, result.validation, result.test, {
        "config": result.config.to_json(), "preset": result.preset,
        "params": result.params, "objective": result.objective,
        "best_iteration": result.best_iteration,
        "num_trees": result.num_trees})


def build_parser() -> argparse.ArgumentParser:
    """The command line: a flag per :class:`LambdaMARTConfig` field, and ``--overwrite``."""
    parser = argparse.ArgumentParser(prog="python -m pipelines.lambdamart",
                                     description=__doc__.split("\n\n")[0])
    flags.add_config_flags(parser, LambdaMARTConfig)
    parser.add_argument("--overwrite", action="store_true",
                        help="delete the outputs of another run (another config, or a "
                             "finished one) in the output dir and train afresh")
    return parser


def parse_args(argv=None) -> LambdaMARTConfig:
    """Flags -> :class:`LambdaMARTConfig` (all but ``--overwrite``)."""
    return flags.config_from_args(LambdaMARTConfig, build_parser().parse_args(argv))


def main(argv=None) -> None:
    """Runs :func:`run` from flags. Exit status 1 with a one-line error for an output dir
    of another run (without ``--overwrite``); a finished run of the same config prints
    its stored results and exits 0."""
    args = build_parser().parse_args(argv)
    config = flags.config_from_args(LambdaMARTConfig, args)
    try:
        result = run(config, overwrite=args.overwrite)
    except run_dir.FinishedRunError as finished:
        print(finished)
        for line in common.stored_summary_lines(config.resolved_output_dir):
            print(line)
        return
    except run_dir.OutputDirError as error:
        raise SystemExit(f"pipelines.lambdamart: error: {error}") from error
    print(f"objective {result.objective}")
    print(f"preset {result.preset}: {result.num_trees} trees (best iteration "
          f"{result.best_iteration} on validation nDCG@{config.eval_at}); "
          f"outputs in {result.output_dir}")
    print("validation:", common.format_summary(result.validation.summary))
    print("test:      ", common.format_summary(result.test.summary))


if __name__ == "__main__":
    main()
