"""Runs the (method, grid point, fold) trainings of a cross-validated comparison.

:class:`CVConfig` holds the comparison's settings, the training ones as
templates: a :class:`pipelines.train.TrainConfig` for the neural methods and a
:class:`pipelines.lambdamart.LambdaMARTConfig` for the tree methods. A run's
config is its template with the fields the comparison decides
(:data:`NEURAL_RUN_FIELDS`, :data:`LAMBDAMART_RUN_FIELDS`: its name, data, fold,
seed, folder, ...) set, then the method preset's settings and the grid point
(:func:`neural_config`, :func:`lambdamart_config`); a grid may set every other
field of the template (:data:`NEURAL_GRID_FIELDS`, :data:`LAMBDAMART_GRID_FIELDS`,
derived from the dataclasses). :func:`plan` lists the runs, :func:`run_all`
trains those not finished before, and :func:`load_run` reads a finished run
back for the report (:mod:`pipelines.cv_report`).

Each run lives in ``<output-dir>/<method>/<grid point>/fold<k>/``. Neural
runs (a loss, or an IRGAN) are :func:`pipelines.train.run` with the test
metric logged after every epoch (``test_curve``), so they resume from their
backup when interrupted; LambdaMART runs are :func:`pipelines.lambdamart.run`
plus ``curves.json`` (nDCG@5 over the boosting iterations). Either way the
run ends with a ``done.json`` marker that records its identity
(:func:`run_identity`: the method preset, the grid point and the run's whole
resolved config, e.g. its epochs, seed and learning rate). A run whose marker
holds the identity of the command is skipped; a run whose settings changed is
trained again.

>>> config = CVConfig(methods=("twin_ndcg_type3",), grid=parse_grid(
...     ["twin_*:learning_rate=0.001,0.01"]), train=TrainConfig(epochs=30))
>>> points = grid_points(config, resolve_method("twin_ndcg_type3"))
>>> [config_name(point) for point in points]
['learning_rate=0.001', 'learning_rate=0.01']
>>> run = neural_config(resolve_method("twin_ndcg_type3"), points[1], 2, "out", config)
>>> run.epochs, run.learning_rate, run.fold, run.test_curve
(30, 0.01, 2, True)
"""
import dataclasses
import fnmatch
import itertools
import json
import os
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import callbacks
from . import common
from . import flags
from . import lambdamart
from . import run_dir as run_folder
from . import train
from . import trainable
from .cv_presets import (Method, canonical_spec, default_methods, parse_value,
                                  resolve_method)
from .lambdamart import LambdaMARTConfig
from .train import TrainConfig
from tfr_extensions import evaluation
from tfr_extensions.ops import validation

SELECTION_METRIC = "ndcg@5"
CURVE_POINTS = 40  # LambdaMART: iterations at which the curve is evaluated
CURVES_FILE = "curves.json"  # LambdaMART runs: the nDCG@5 curves over the iterations
CONFIG_FILE = "cv_config.json"  # the comparison's CVConfig, in its output dir

GridEntry = Tuple[str, str, Tuple[Any, ...]]

#: :class:`TrainConfig` fields the comparison sets for each neural run (from its own data,
#: seed and no-relevant rule, the method preset, the fold and the protocol), so that neither
#: the ``train`` template nor a grid sets them
NEURAL_RUN_FIELDS = ("name", "data", "fold", "loss", "loss_args", "seed", "output_dir",
                     "export_dir", "validation_metric", "no_relevant", "test_curve",
                     "tensorboard", "verbose")
#: :class:`TrainConfig` fields a method preset sets (a grid may, the template may not)
NEURAL_METHOD_FIELDS = ("scorer",)
#: the :class:`TrainConfig` fields a grid may set (any other grid parameter of a neural
#: method is a loss argument, written ``loss.<arg>``): all but :data:`NEURAL_RUN_FIELDS`
NEURAL_GRID_FIELDS = tuple(f.name for f in dataclasses.fields(TrainConfig)
                           if f.name not in NEURAL_RUN_FIELDS)
#: :class:`LambdaMARTConfig` fields the comparison sets for each tree run
LAMBDAMART_RUN_FIELDS = ("name", "data", "fold", "seed", "output_dir", "no_relevant")
#: the :class:`LambdaMARTConfig` fields a grid may set: all but
#: :data:`LAMBDAMART_RUN_FIELDS` and ``params``, as any other grid parameter of a tree
#: method is a LightGBM parameter (or, ``objective.<arg>``, an objective argument) added to
#: the template's ``params``
LAMBDAMART_GRID_FIELDS = tuple(f.name for f in dataclasses.fields(LambdaMARTConfig)
                               if f.name not in (*LAMBDAMART_RUN_FIELDS, "params"))


def parse_grid_entry(spec: str) -> GridEntry:
    """``"twin_ndcg_*:learning_rate=0.001,0.01"`` -> ``("twin_ndcg_*", "learning_rate",
    (0.001, 0.01))``; values are parsed as JSON where possible."""
    pattern, sep, rest = spec.partition(":")
    param, eq, values = rest.partition("=")
    if not sep or not eq or not pattern or not param or not values:
        raise ValueError(f"`grid` entries must look like 'PATTERN:PARAM=V1,V2'; got {spec!r}.")
    return pattern, param, tuple(parse_value(v) for v in values.split(","))


def format_grid_entry(entry: GridEntry) -> str:
    """The inverse of :func:`parse_grid_entry`.

    >>> format_grid_entry(("twin_*", "scorer", ("R4.L", "CE4.L")))
    'twin_*:scorer=R4.L,CE4.L'
    """
    pattern, param, values = entry

    def text(value):
        plain = value if isinstance(value, str) else json.dumps(value)
        return plain if parse_value(plain) == value else json.dumps(value)
    return f"{pattern}:{param}=" + ",".join(text(v) for v in values)


def parse_grid(specs: Sequence[str]) -> Tuple[GridEntry, ...]:
    """``["twin_ndcg_*:learning_rate=0.001,0.01"]`` -> ``(("twin_ndcg_*", "learning_rate",
    (0.001, 0.01)),)`` (:func:`parse_grid_entry` of each).

    >>> parse_grid(["lambdamart:num_leaves=31,63", "twin_*:loss.alpha_b=1,2.5"])
    (('lambdamart', 'num_leaves', (31, 63)), ('twin_*', 'loss.alpha_b', (1, 2.5)))
    """
    return tuple(parse_grid_entry(spec) for spec in specs)


def _check_template(template: Any, template_class: type, field: str,
                    fixed: Sequence[str]) -> None:
    """Raises unless ``template`` is a ``template_class`` whose ``fixed`` fields keep
    their defaults (the comparison sets them for each run)."""
    if not isinstance(template, template_class):
        raise TypeError(f"`{field}` must be a {template_class.__name__}; got "
                        f"{type(template).__name__} (CVConfig.from_json reads a JSON dict).")
    default = template_class()
    changed = [name for name in fixed if getattr(template, name) != getattr(default, name)]
    if changed:
        raise ValueError(
            f"`{field}` sets {[f'{name}={getattr(template, name)!r}' for name in changed]}, "
            f"which the comparison sets for each run (data, seed and no_relevant are "
            f"CVConfig's own fields; a method's scorer is its preset's or a grid's); leave "
            f"them at their defaults.")


@dataclasses.dataclass(frozen=True)
class CVConfig:
    """Everything a comparison depends on (written as ``cv_config.json``).

    Attributes:
      name: comparison name: the report's file names, and runs/cv_<name>.
      data: 'synthetic' (the embedded data, folds 1..5) or a folder with Fold<k>/.
      folds: the folds to run, comma-separated.
      methods: comma-separated presets of pipelines.cv_presets (e.g. ranknet,lambdamart,
        twin_ndcg_type3[scorer=CE4.L]); none: every default preset.
      grid: PATTERN:PARAM=V1,V2 (repeatable): the values of PARAM for the methods whose key
        matches the fnmatch PATTERN. PARAM is, for neural methods, a TrainConfig field other
        than those the comparison sets for each run (pipelines.cv_runner.NEURAL_GRID_FIELDS:
        learning_rate, l2, scorer, batch_size, epochs, hidden_units, ...) or 'loss.<arg>';
        for tree methods, such a LambdaMARTConfig field (LAMBDAMART_GRID_FIELDS: preset,
        num_boost_round, early_stopping_rounds, objective, ...), 'objective.<arg>' or a
        LightGBM parameter.
      train: the TrainConfig template of the neural methods (flags: its epochs, batch_size,
        learning_rate and l2); each run sets its name, data, fold, loss, seed, folder and
        the protocol's fields (NEURAL_RUN_FIELDS), then the preset's and the grid's.
      seed: the seed of every run.
      lambdamart: the LambdaMARTConfig template of the tree methods (flags: --lambdamart-preset,
        --lambdamart-rounds, --lambdamart-early-stopping, --num-threads); its params are
        the base of each run's.
      no_relevant: evaluation rule for lists without a relevant document: exclude, count as
        zero, or count as one.
      output_dir: where the runs go; none: runs/cv_<name>.
      report_dir: where the report goes.
    """

    name: str = "comparison"
    data: str = common.SYNTHETIC
    folds: Tuple[int, ...] = (1, 2, 3, 4, 5)
    methods: Tuple[str, ...] = ()
    grid: Tuple[GridEntry, ...] = dataclasses.field(default=(), metadata=flags.option(
        repeated=True, parse=parse_grid_entry, format=format_grid_entry,
        metavar="PATTERN:PARAM=V1,V2"))
    # A comparison trains longer than one run by default (30 epochs, TrainConfig's 20).
    train: TrainConfig = dataclasses.field(
        default_factory=lambda: TrainConfig(epochs=30), metadata=flags.nested(
        {"epochs": "epochs", "batch_size": "batch_size", "learning_rate": "learning_rate",
         "l2": "l2"}, help_prefix="neural methods: "))
    seed: int = 0
    lambdamart: LambdaMARTConfig = dataclasses.field(
        default_factory=LambdaMARTConfig, metadata=flags.nested(
            {"lambdamart_preset": "preset", "lambdamart_rounds": "num_boost_round",
             "lambdamart_early_stopping": "early_stopping_rounds",
             "num_threads": "num_threads"}, help_prefix="tree methods: "))
    no_relevant: str = dataclasses.field(
        default="exclude", metadata=flags.option(choices=evaluation.NO_RELEVANT_RULES))
    output_dir: Optional[str] = None
    report_dir: str = os.path.join("docs", "results")

    def __post_init__(self):
        from tfr_extensions import compat
        methods = tuple(canonical_spec(m) for m in self.methods) or default_methods()
        object.__setattr__(self, "methods", methods)
        _check_template(self.train, TrainConfig, "train",
                        NEURAL_RUN_FIELDS + NEURAL_METHOD_FIELDS)
        _check_template(self.lambdamart, LambdaMARTConfig, "lambdamart", LAMBDAMART_RUN_FIELDS)
        validation.validate_choice(self.no_relevant, evaluation.NO_RELEVANT_RULES, "no_relevant")
        for m in self.methods:
            if resolve_method(m).needs_tf_ranking and not compat.has_tf_ranking():
                raise ValueError(f"Method {m!r} trains a TF-Ranking loss, and TF-Ranking does not "
                                 "import here (the tf221 and keras3 stacks have none); leave it "
                                 "out.")
        if not self.folds:
            raise ValueError("`folds` must name at least one fold; got ().")

    @property
    def resolved_output_dir(self) -> str:
        return self.output_dir or os.path.join("runs", f"cv_{self.name}")

    def to_json(self) -> Dict[str, Any]:
        """The JSON form (``cv_config.json``): the templates as nested objects."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> "CVConfig":
        """The config of :meth:`to_json`'s dict, or of the flat ``cv_config.json`` of older
        versions, whose training settings are the names of today's flags (``epochs``,
        ``lambdamart_rounds``, ...; :func:`pipelines.flags.with_flags`).

        Raises:
          ValueError: a key is neither a field nor a flag.
        """
        value = dict(value)
        names = {f.name for f in dataclasses.fields(cls)}
        try:
            fields = {name: value.pop(name) for name in list(value) if name in names}
            for name, template_class in (("train", TrainConfig),
                                         ("lambdamart", LambdaMARTConfig)):
                if isinstance(fields.get(name), Mapping):
                    fields[name] = template_class(**fields[name])
            for name in ("folds", "methods"):
                if name in fields:
                    fields[name] = tuple(fields[name])
            if "grid" in fields:
                fields["grid"] = tuple((pattern, param, tuple(values))
                                       for pattern, param, values in fields["grid"])
            return flags.with_flags(cls(**fields), **value)  # the rest: older flat keys
        except TypeError as error:
            raise ValueError(f"not a CVConfig, nested or flat (as older versions wrote "
                             f"cv_config.json): {error}") from error


def grid_points(config: CVConfig, method: Method) -> List[Dict[str, Any]]:
    """The hyperparameter settings of ``method`` (``[{}]`` without a grid).

    Patterns match the full method spec: ``twin_ndcg_*`` also matches
    ``twin_ndcg_type3[scorer=CE4.L]``, ``twin_ndcg_type?`` does not.
    """
    axes: Dict[str, Tuple[Any, ...]] = {}
    for pattern, param, values in config.grid:
        if fnmatch.fnmatchcase(method.key, pattern):
            axes[param] = values
    if not axes:
        return [{}]
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def config_name(point: Mapping[str, Any]) -> str:
    """A folder name for a grid point: ``default`` or ``learning_rate=0.01,...``."""
    if not point:
        return "default"
    return ",".join(f"{k}={v}" for k, v in sorted(point.items())).replace("/", "_")


# ----------------------------------------------------------------------------- configs
def neural_config(method: Method, point: Mapping[str, Any], fold: int, out_dir: str,
                  cv: CVConfig) -> TrainConfig:
    """The :class:`pipelines.train.TrainConfig` of one neural (method, grid point, fold):
    the ``train`` template with the comparison's settings (:data:`NEURAL_RUN_FIELDS`), then
    the preset's settings, then the grid point."""
    point = {**method.overrides, **point}
    fields = {k: v for k, v in point.items() if k in NEURAL_GRID_FIELDS}
    loss_args = dict(method.loss_args)
    loss_args.update({k[len("loss."):]: v for k, v in point.items() if k.startswith("loss.")})
    unknown = [k for k in point if k not in fields and not k.startswith("loss.")]
    if unknown:
        raise ValueError(f"`grid` parameters of {method.key} must be in {NEURAL_GRID_FIELDS} or "
                         f"'loss.<arg>'; got {unknown}.")
    loss = method.loss
    return dataclasses.replace(cv.train, **{
        "name": f"{method.key}_fold{fold}", "data": cv.data, "fold": fold,
        "loss": loss, "loss_args": loss_args, "scorer": method.scorer, "seed": cv.seed,
        "output_dir": out_dir, "export_dir": None, "validation_metric": SELECTION_METRIC,
        "no_relevant": cv.no_relevant, "test_curve": True, "tensorboard": False, "verbose": 0,
        **fields})


def lambdamart_config(method: Method, point: Mapping[str, Any], fold: int, out_dir: str,
                      cv: CVConfig) -> LambdaMARTConfig:
    """The :class:`pipelines.lambdamart.LambdaMARTConfig` of one LambdaMART
    (method, grid point, fold): the ``lambdamart`` template with the comparison's
    settings (:data:`LAMBDAMART_RUN_FIELDS`), then the preset's settings and the grid
    point (a parameter that is no field goes into ``params``)."""
    point = {**method.overrides, **point}
    fields = {k: v for k, v in point.items() if k in LAMBDAMART_GRID_FIELDS}
    params = {**cv.lambdamart.params,
              **{k: v for k, v in point.items() if k not in LAMBDAMART_GRID_FIELDS}}
    return dataclasses.replace(cv.lambdamart, **{
        "name": f"{method.key}_fold{fold}", "data": cv.data, "fold": fold, "params": params,
        "seed": cv.seed, "output_dir": out_dir, "no_relevant": cv.no_relevant, **fields})


def run_dir(cv: CVConfig, method: str, point: Mapping[str, Any], fold: int) -> str:
    return os.path.join(cv.resolved_output_dir, method, config_name(point), f"fold{fold}")


def plan(cv: CVConfig) -> List[Tuple[Method, Dict[str, Any], int]]:
    """Every (method, grid point, fold) run, fold-major (so early folds finish first)."""
    return [(resolve_method(m), point, fold) for fold in cv.folds for m in cv.methods
            for point in grid_points(cv, resolve_method(m))]


def run_identity(cv: CVConfig, method: Method, point: Mapping[str, Any],
                 fold: int) -> Dict[str, Any]:
    """What a finished run must match to be skipped or reported: the method preset, the
    grid point (with the preset's overrides) and the run's whole resolved config
    (:func:`neural_config` / :func:`lambdamart_config`) but its folder, as JSON."""
    make = lambdamart_config if method.kind == "lambdamart" else neural_config
    config = dataclasses.asdict(make(method, point, fold, "", cv))
    config.pop("output_dir")
    identity = {"method": dataclasses.asdict(method),
                "grid_point": {**method.overrides, **point}, "config": config}
    return json.loads(json.dumps(identity, allow_nan=False))


def _flat(value: Any, prefix: str = "") -> Dict[str, Any]:
    """``{"config": {"epochs": 3}}`` -> ``{"config.epochs": 3}``."""
    if not isinstance(value, dict) or not value:
        return {prefix: value}
    out: Dict[str, Any] = {}
    for key, item in value.items():
        out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
    return out


def run_status(path: str, identity: Mapping[str, Any]) -> Tuple[str, List[str]]:
    """``("done", [])`` when ``path`` holds a finished run of ``identity``;
    ``("changed", differences)`` when it holds one of another identity (or a marker
    without one, from an older version); ``("new", [])`` otherwise."""
    try:
        done = run_folder.read_json(os.path.join(path, run_folder.DONE_FILE))
    except run_folder.OutputDirError:
        return "changed", ["done.json is not valid JSON"]
    if done is None:
        return "new", []
    stored = done.get("identity") if isinstance(done, dict) else None
    if stored is None:
        return "changed", ["done.json records no identity"]
    differences = run_folder.config_differences(_flat(stored), _flat(dict(identity)))
    return ("changed", differences) if differences else ("done", [])


# ----------------------------------------------------------------------------- training
def train_neural(method: Method, point: Mapping[str, Any], fold: int, splits, out_dir: str,
                 cv: CVConfig, identity: Mapping[str, Any], retrain: bool) -> None:
    """:func:`pipelines.train.run` of one neural (method, grid point, fold), its marker
    holding ``identity``. It resumes an interrupted run of the same config; ``retrain``
    (settings changed), or the unfinished outputs of another config, start afresh."""
    config = neural_config(method, point, fold, out_dir, cv)
    marker = {"identity": dict(identity)}
    try:
        train.run(config, splits, overwrite=retrain, marker=marker)
    except run_folder.OutputDirError:  # an interrupted run of older settings: start afresh
        train.run(config, splits, overwrite=True, marker=marker)


def _json_curve(values: Sequence[float]) -> List[Optional[float]]:
    """A metric curve for strict JSON: a mean over no query (NaN) as None."""
    return [evaluation.json_metric(float(v)) for v in values]


def train_lambdamart(method: Method, point: Mapping[str, Any], fold: int, splits, out_dir: str,
                     cv: CVConfig, identity: Mapping[str, Any], retrain: bool) -> None:
    """:func:`pipelines.lambdamart.run` of one tree (method, grid point, fold), which
    also writes ``curves.json`` (train, validation and test nDCG@5 over the boosting
    iterations) before its marker, holding ``identity``. ``retrain`` (settings changed),
    or the unfinished outputs of another config, start afresh."""
    config = lambdamart_config(method, point, fold, out_dir, cv)
    marker = {"identity": dict(identity)}
    start = time.perf_counter()

    def write_curves(result: lambdamart.LambdaMARTResult) -> None:
        train_seconds = time.perf_counter() - start
        trees = result.num_trees
        iterations = sorted(set(
            np.linspace(1, trees, min(CURVE_POINTS, trees)).round().astype(int)))
        curves: Dict[str, Any] = {"train_seconds": train_seconds,
                                  "iterations": [int(i) for i in iterations]}
        for part, data in (("train", splits.train), ("vali", splits.vali), ("test", splits.test)):
            features = np.asarray(data.features, np.float32)
            curves[f"{part}_{SELECTION_METRIC}"] = _json_curve([evaluation.evaluate(
                data.labels, result.booster.predict(features, num_iteration=int(i)),
                data.query_offsets, topns=(5,), metrics=("ndcg",),
                no_relevant=cv.no_relevant).summary[SELECTION_METRIC] for i in iterations])
        common.write_json(os.path.join(out_dir, CURVES_FILE), curves)

    try:
        lambdamart.run(config, splits, overwrite=retrain, marker=marker,
                       extra_outputs=write_curves)
    except run_folder.OutputDirError:  # an interrupted run of older settings: start afresh
        start = time.perf_counter()
        lambdamart.run(config, splits, overwrite=True, marker=marker, extra_outputs=write_curves)


# ----------------------------------------------------------------------------- results
def load_run(path: str, method: Method) -> Dict[str, Any]:
    """A finished run's results in one layout for every kind of method: ``kind``,
    ``train_seconds``, ``history`` (per-epoch training logs; ``{}`` for trees) and
    ``players``: per scorer (``""``, or an IRGAN's ``generator`` and ``discriminator``)
    its ``best_epoch`` (trees: iteration), ``validation`` and ``test`` summaries,
    ``curves`` (``vali_ndcg@5`` and ``test_ndcg@5`` per epoch; for trees also
    ``train_ndcg@5`` at ``iterations``) and ``test_per_query`` (its CSV)."""
    with open(os.path.join(path, common.RESULTS_FILE)) as f:
        results = json.load(f)
    if method.kind == "lambdamart":
        with open(os.path.join(path, CURVES_FILE)) as f:
            curves = json.load(f)
        return {"kind": method.kind, "train_seconds": curves.pop("train_seconds"), "history": {},
                "players": {"": {"best_epoch": results["best_iteration"],
                                 "validation": results["validation"], "test": results["test"],
                                 "curves": curves,
                                 "test_per_query": common.per_query_paths(path)[1]}}}
    history = results["history"]
    players = results.get("players") or {"": results}  # one scorer: its results on top
    return {"kind": method.kind, "train_seconds": results["train_seconds"], "history": history,
            "players": {player: {
                "best_epoch": scores["best_epoch"], "validation": scores["validation"],
                "test": scores["test"],
                "curves": {
                    f"vali_{SELECTION_METRIC}": history[
                        callbacks.history_key("val", SELECTION_METRIC, player)],
                    f"test_{SELECTION_METRIC}": history[
                        callbacks.history_key("test", SELECTION_METRIC, player)]},
                "test_per_query": common.per_query_paths(path, trainable.player_suffix(player))[1]}
                for player, scores in players.items()}}


def finished_run(cv: CVConfig, method: Method, point: Mapping[str, Any],
                 fold: int) -> Optional[Dict[str, Any]]:
    """:func:`load_run` of the run of (method, grid point, fold) if it is finished and its
    identity is that of ``cv`` (:func:`run_identity`); None otherwise."""
    path = run_dir(cv, method.key, point, fold)
    if run_status(path, run_identity(cv, method, point, fold))[0] != "done":
        return None
    return {**load_run(path, method), "path": path}


def run_all(cv: CVConfig, log: Callable[[str], None] = print) -> Dict[str, int]:
    """Trains every run of :func:`plan` without a ``done.json`` of its identity
    (:func:`run_identity`): new runs, and runs whose settings changed; returns counts."""
    runs = plan(cv)
    os.makedirs(cv.resolved_output_dir, exist_ok=True)
    common.write_json(os.path.join(cv.resolved_output_dir, CONFIG_FILE), cv.to_json())
    counts = {"trained": 0, "skipped": 0}
    splits_cache: Dict[int, Any] = {}
    start = time.perf_counter()
    for i, (method, point, fold) in enumerate(runs, 1):
        out = run_dir(cv, method.key, point, fold)
        tag = f"[{i}/{len(runs)}] {method.key} {config_name(point)} fold{fold}"
        identity = run_identity(cv, method, point, fold)
        status, differences = run_status(out, identity)
        if status == "done":
            counts["skipped"] += 1
            log(f"{tag}: done before, skipped")
            continue
        if status == "changed":
            log(f"{tag}: settings changed ({'; '.join(differences[:3])}), retraining")
        if fold not in splits_cache:
            splits_cache.clear()
            splits_cache[fold] = common.load_splits(cv.data, fold, cv.seed)
            evaluation.check_evaluable(splits_cache[fold].vali, cv.no_relevant,
                                       what=f"fold {fold} validation")
        run_start = time.perf_counter()
        trainer = train_lambdamart if method.kind == "lambdamart" else train_neural
        trainer(method, point, fold, splits_cache[fold], out, cv, identity,
                retrain=status == "changed")
        seconds = time.perf_counter() - run_start
        counts["trained"] += 1
        summary = load_run(out, method)
        scores = "  ".join(
            f"{p or 'model'}: best {s['best_epoch']}, vali "
            f"{common.format_mean(s['validation'][SELECTION_METRIC])}, test "
            f"{common.format_mean(s['test'][SELECTION_METRIC])}"
            for p, s in summary["players"].items())
        log(f"{tag}: {seconds:.1f} s  {scores}  (elapsed {time.perf_counter() - start:.0f} s)")
    return counts
