"""Runs the (method, grid point, fold, seed) trainings of a cross-validated comparison.

:class:`pipelines.cv_config.CVConfig` (also reachable here) holds the
comparison's settings, the training ones as templates. A run's config is its
template with the fields the comparison decides
(:data:`~pipelines.cv_config.NEURAL_RUN_FIELDS`,
:data:`~pipelines.cv_config.LAMBDAMART_RUN_FIELDS`: its name, data, fold, seed,
folder, ...) set, then the method preset's settings and the grid point
(:func:`neural_config`, :func:`lambdamart_config`). :func:`plan` lists the
runs, :func:`run_all` trains those not finished before, and :func:`load_run`
reads a finished run back for the report (:mod:`pipelines.cv_report`).

Each run lives in ``<output-dir>/<method>/<grid point>/fold<k>/``, or, with
``seeds``, in ``<output-dir>/<method>/<grid point>/seed<s>/fold<k>/`` (one run
per seed, :func:`method_seeds`: every neural method, and a tree method whose
seed changes its training, :func:`seed_matters`; a tree method whose seed does
nothing runs once, in the folder without a seed). The data (the synthetic
sample and its folds) is the same for every seed. Neural runs (a loss, or an
IRGAN) are :func:`pipelines.train.run` with the test
metric logged after every epoch (``test_curve``), so they resume from their
backup when interrupted; LambdaMART runs are :func:`pipelines.lambdamart.run`
plus ``curves.json`` (nDCG@5 over the boosting iterations). Either way the
run ends with a ``done.json`` marker that records its identity
(:func:`run_identity`: the method preset, the grid point and the run's whole
resolved config, e.g. its epochs, seed and learning rate; a run of a seed
also has the seed in its name). A run whose marker holds the identity of the
command is skipped; a run whose settings changed is trained again.

>>> config = CVConfig(methods=("twin_ndcg_type3",), grid=parse_grid(
...     ["twin_*:learning_rate=0.001,0.01"]), train=TrainConfig(epochs=30))
>>> points = grid_points(config, resolve_method("twin_ndcg_type3"))
>>> [config_name(point) for point in points]
['learning_rate=0.001', 'learning_rate=0.01']
>>> run = neural_config(resolve_method("twin_ndcg_type3"), points[1], 2, "out", config)
>>> run.epochs, run.learning_rate, run.fold, run.test_curve
(30, 0.01, 2, True)
>>> seeded = dataclasses.replace(config, seeds=(0, 1))
>>> [method_seeds(seeded, resolve_method(m)) for m in ("twin_ndcg_type3", "lambdamart")]
[(0, 1), (None,)]
>>> os.path.relpath(run_dir(seeded, "twin_ndcg_type3", points[1], 2, seed=1), "runs")
'cv_comparison/twin_ndcg_type3/learning_rate=0.01/seed1/fold2'
"""
import dataclasses
import json
import os
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import callbacks
from . import common
from . import lambdamart
from . import run_dir as run_folder
from . import train
from . import trainable
from .cv_config import (  # noqa: F401  (the comparison's settings, also reachable here)
    LAMBDAMART_GRID_FIELDS, LAMBDAMART_RUN_FIELDS, NEURAL_GRID_FIELDS, NEURAL_METHOD_FIELDS,
    NEURAL_RUN_FIELDS, CVConfig, GridEntry, config_name, format_grid_entry, grid_points,
    parse_grid, parse_grid_entry, reference_matches, row_keys)
from .cv_presets import Method, resolve_method
from .lambdamart import LambdaMARTConfig
from .train import TrainConfig
from tfr_extensions import evaluation

SELECTION_METRIC = "ndcg@5"
CURVE_POINTS = 40  # LambdaMART: iterations at which the curve is evaluated
CURVES_FILE = "curves.json"  # LambdaMART runs: the nDCG@5 curves over the iterations
CONFIG_FILE = "cv_config.json"  # the comparison's CVConfig, in its output dir

#: one run of :func:`plan`: (method, grid point, fold, seed; None: the single run of
#: ``CVConfig.seed``, in the folder without a seed)
Run = Tuple[Method, Dict[str, Any], int, Optional[int]]
#: LightGBM parameters (and aliases) whose value other than the default (1.0 for a
#: fraction, false for extra trees) makes the trees depend on the seed
LIGHTGBM_SEEDED_FRACTIONS = ("bagging_fraction", "subsample", "sub_row", "bagging",
                             "pos_bagging_fraction", "pos_sub_row", "pos_subsample",
                             "pos_bagging", "neg_bagging_fraction", "neg_sub_row",
                             "neg_subsample", "neg_bagging", "feature_fraction",
                             "sub_feature", "colsample_bytree", "feature_fraction_bynode",
                             "sub_feature_bynode", "colsample_bynode")
LIGHTGBM_SEEDED_FLAGS = ("extra_trees", "extra_tree")


# ----------------------------------------------------------------------------- seeds
def seed_matters(cv: CVConfig, method: Method) -> bool:
    """Whether the seed changes what ``method`` trains: always for a neural method (initial
    weights, data order, randomized losses); for a tree method, when a grid point (or its
    preset, or the template) uses a twin-sigmoid objective with tie breaking (the
    objective's seed) or LightGBM's sampling (:data:`LIGHTGBM_SEEDED_FRACTIONS` below 1,
    :data:`LIGHTGBM_SEEDED_FLAGS` set). LambdaMART's ``lambdarank`` without sampling
    (``deterministic``) gives the same trees for every seed."""
    if method.kind != "lambdamart":
        return True
    for point in grid_points(cv, method):
        config = lambdamart_config(method, point, cv.folds[0], "", cv)
        params = dict(config.params)
        tie_break = params.get(lambdamart.OBJECTIVE_ARG_PREFIX + "tie_break",
                               config.objective_args.get("tie_break", True))
        objective = params.get("objective", config.objective)
        if objective != "lambdarank" and tie_break:
            return True
        if any(float(params[k]) < 1.0 for k in LIGHTGBM_SEEDED_FRACTIONS if k in params) or \
                any(params.get(k) for k in LIGHTGBM_SEEDED_FLAGS):
            return True
    return False


def method_seeds(cv: CVConfig, method: Method) -> Tuple[Optional[int], ...]:
    """The seeds ``method`` trains with: ``cv.seeds`` when there are some and its seed
    matters (:func:`seed_matters`); else ``(None,)``: one run of ``cv.seed`` in the folder
    without a seed (the layout without seeds)."""
    if cv.seeds and seed_matters(cv, method):
        return cv.seeds
    return (None,)


# ----------------------------------------------------------------------------- configs
def _run_name(method: Method, fold: int, seed: Optional[int]) -> str:
    return f"{method.key}_fold{fold}" if seed is None else f"{method.key}_seed{seed}_fold{fold}"


def neural_config(method: Method, point: Mapping[str, Any], fold: int, out_dir: str,
                  cv: CVConfig, seed: Optional[int] = None) -> TrainConfig:
    """The :class:`pipelines.train.TrainConfig` of one neural (method, grid point, fold,
    seed; None: ``cv.seed``): the ``train`` template with the comparison's settings
    (:data:`NEURAL_RUN_FIELDS`), then the preset's settings, then the grid point."""
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
        "name": _run_name(method, fold, seed), "data": cv.data, "fold": fold,
        "loss": loss, "loss_args": loss_args, "scorer": method.scorer,
        "seed": cv.seed if seed is None else seed,
        "output_dir": out_dir, "export_dir": None, "validation_metric": SELECTION_METRIC,
        "no_relevant": cv.no_relevant, "test_curve": True, "tensorboard": False, "verbose": 0,
        **fields})


def lambdamart_config(method: Method, point: Mapping[str, Any], fold: int, out_dir: str,
                      cv: CVConfig, seed: Optional[int] = None) -> LambdaMARTConfig:
    """The :class:`pipelines.lambdamart.LambdaMARTConfig` of one LambdaMART
    (method, grid point, fold, seed; None: ``cv.seed``): the ``lambdamart`` template with
    the comparison's settings (:data:`LAMBDAMART_RUN_FIELDS`), then the preset's settings
    and the grid point (a parameter that is no field goes into ``params``)."""
    point = {**method.overrides, **point}
    fields = {k: v for k, v in point.items() if k in LAMBDAMART_GRID_FIELDS}
    params = {**cv.lambdamart.params,
              **{k: v for k, v in point.items() if k not in LAMBDAMART_GRID_FIELDS}}
    return dataclasses.replace(cv.lambdamart, **{
        "name": _run_name(method, fold, seed), "data": cv.data, "fold": fold,
        "params": params, "seed": cv.seed if seed is None else seed, "output_dir": out_dir,
        "no_relevant": cv.no_relevant, **fields})


def run_dir(cv: CVConfig, method: str, point: Mapping[str, Any], fold: int,
            seed: Optional[int] = None) -> str:
    """``<output dir>/<method>/<grid point>/fold<k>``, or with a seed
    ``.../<grid point>/seed<s>/fold<k>``."""
    seed_dir = () if seed is None else (f"seed{seed}",)
    return os.path.join(cv.resolved_output_dir, method, config_name(point), *seed_dir,
                        f"fold{fold}")


def plan(cv: CVConfig) -> List[Run]:
    """Every (method, grid point, fold, seed) run: seed after seed (a tree method whose
    seed does nothing with the first), each fold-major (so early folds finish first and
    the first seed gives a whole comparison before the next starts)."""
    passes: Tuple[Optional[int], ...] = cv.seeds or (None,)
    methods = [(method, method_seeds(cv, method)) for method in map(resolve_method, cv.methods)]
    runs: List[Run] = []
    for index, seed in enumerate(passes):
        for fold in cv.folds:
            for method, seeds in methods:
                if seed in seeds:
                    run_seed = seed
                elif index == 0 and seeds == (None,):
                    run_seed = None
                else:
                    continue
                runs += [(method, point, fold, run_seed) for point in grid_points(cv, method)]
    return runs


def run_identity(cv: CVConfig, method: Method, point: Mapping[str, Any],
                 fold: int, seed: Optional[int] = None) -> Dict[str, Any]:
    """What a finished run must match to be skipped or reported: the method preset, the
    grid point (with the preset's overrides) and the run's whole resolved config
    (:func:`neural_config` / :func:`lambdamart_config`; its seed and, for a run of
    ``seeds``, its name with the seed) but its folder, as JSON."""
    make = lambdamart_config if method.kind == "lambdamart" else neural_config
    config = dataclasses.asdict(make(method, point, fold, "", cv, seed))
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
    without one, from an older version); ``("damaged", [reason])`` when its
    ``done.json`` or an output it records (``results.json``, the per-query CSVs,
    ``curves.json``) is damaged (:func:`pipelines.run_dir.read_done`), or its
    ``results.json`` does not parse: that run is done again; ``("new", [])`` otherwise."""
    try:
        done = run_folder.read_done(path)
        if done is not None:
            run_folder.read_json(os.path.join(path, common.RESULTS_FILE))
    except run_folder.OutputDirError as error:
        return "damaged", [str(error)]
    if done is None:
        return "new", []
    stored = done.get("identity")
    if stored is None:
        return "changed", ["done.json records no identity"]
    differences = run_folder.config_differences(_flat(stored), _flat(dict(identity)))
    return ("changed", differences) if differences else ("done", [])


# ----------------------------------------------------------------------------- training
def train_neural(method: Method, point: Mapping[str, Any], fold: int, splits, out_dir: str,
                 cv: CVConfig, identity: Mapping[str, Any], retrain: bool,
                 seed: Optional[int] = None) -> None:
    """:func:`pipelines.train.run` of one neural (method, grid point, fold, seed), its marker
    holding ``identity``. It resumes an interrupted run of the same config; ``retrain``
    (settings changed), or the unfinished outputs of another config, start afresh."""
    config = neural_config(method, point, fold, out_dir, cv, seed)
    marker = {"identity": dict(identity)}
    try:
        train.run(config, splits, overwrite=retrain, marker=marker)
    except run_folder.OutputDirError:  # an interrupted run of older settings: start afresh
        train.run(config, splits, overwrite=True, marker=marker)


def _json_curve(values: Sequence[float]) -> List[Optional[float]]:
    """A metric curve for strict JSON: a mean over no query (NaN) as None."""
    return [evaluation.json_metric(float(v)) for v in values]


def train_lambdamart(method: Method, point: Mapping[str, Any], fold: int, splits, out_dir: str,
                     cv: CVConfig, identity: Mapping[str, Any], retrain: bool,
                     seed: Optional[int] = None) -> None:
    """:func:`pipelines.lambdamart.run` of one tree (method, grid point, fold, seed), which
    also writes ``curves.json`` (train, validation and test nDCG@5 over the boosting
    iterations) before its marker, holding ``identity``. ``retrain`` (settings changed),
    or the unfinished outputs of another config, start afresh."""
    config = lambdamart_config(method, point, fold, out_dir, cv, seed)
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
                 fold: int, seed: Optional[int] = None) -> Optional[Dict[str, Any]]:
    """:func:`load_run` of the run of (method, grid point, fold, seed) if it is finished
    and its identity is that of ``cv`` (:func:`run_identity`); None otherwise."""
    path = run_dir(cv, method.key, point, fold, seed)
    if run_status(path, run_identity(cv, method, point, fold, seed))[0] != "done":
        return None
    return {**load_run(path, method), "path": path}


def run_all(cv: CVConfig, log: Callable[[str], None] = print) -> Dict[str, int]:
    """Trains every run of :func:`plan` without a ``done.json`` of its identity
    (:func:`run_identity`): new runs, and runs whose settings changed; returns counts.
    Every run, whatever its seed, trains on the data of ``cv.seed`` (the synthetic
    sample and folds)."""
    runs = plan(cv)
    os.makedirs(cv.resolved_output_dir, exist_ok=True)
    common.write_json(os.path.join(cv.resolved_output_dir, CONFIG_FILE), cv.to_json())
    counts = {"trained": 0, "skipped": 0}
    splits_cache: Dict[int, Any] = {}
    start = time.perf_counter()
    for i, (method, point, fold, seed) in enumerate(runs, 1):
        out = run_dir(cv, method.key, point, fold, seed)
        seed_tag = "" if seed is None else f" seed{seed}"
        tag = f"[{i}/{len(runs)}] {method.key} {config_name(point)}{seed_tag} fold{fold}"
        identity = run_identity(cv, method, point, fold, seed)
        status, differences = run_status(out, identity)
        if status == "done":
            counts["skipped"] += 1
            log(f"{tag}: done before, skipped")
            continue
        if status == "changed":
            log(f"{tag}: settings changed ({'; '.join(differences[:3])}), retraining")
        if status == "damaged":
            log(f"{tag}: {differences[0]}, retraining")
        if fold not in splits_cache:  # the data of cv.seed for every run's seed
            splits_cache.clear()
            splits_cache[fold] = common.load_splits(cv.data, fold, cv.seed)
            evaluation.check_evaluable(splits_cache[fold].vali, cv.no_relevant,
                                       what=f"fold {fold} validation")
        run_start = time.perf_counter()
        trainer = train_lambdamart if method.kind == "lambdamart" else train_neural
        trainer(method, point, fold, splits_cache[fold], out, cv, identity,
                retrain=status in ("changed", "damaged"), seed=seed)
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
