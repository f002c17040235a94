"""Cross-validated comparison of ranking methods on a LETOR dataset with folds.

    python -m pipelines.cross_validate --data ../shared/data/MQ2008 --folds 1,2,3,4,5 \\
        --methods ranknet,lambdarank,twin_ndcg_type3,lambdamart --epochs 30 \\
        --grid 'twin_ndcg_*:learning_rate=0.001,0.01' --report-dir docs/results

For each method (a preset of :data:`METHODS`: a ``tfrx.losses.get`` name with
its arguments and a scorer notation, an IRGAN mode, or ``lambdamart``), each
point of its hyperparameter grid and each fold, it trains on the fold's train
split, keeps the epoch (trees: iteration) with the best validation nDCG@5, and
evaluates validation and test per query with :mod:`tfr_extensions.evaluation`
(lists without relevant documents excluded unless ``--no-relevant`` says
otherwise). Per fold the grid point with the best validation nDCG@5 is
selected; its per-query test results, pooled over folds (each query is a test
query of exactly one fold), give the report:

* ``<report-dir>/<name>.md`` and ``<name>.csv``: mean nDCG@{1,3,5,10,20},
  MAP@{1,3,5,10,20} and nERR@10 per method; per column the best method is
  marked and every other method is tested against it over the pooled queries
  with the Wilcoxon signed-rank test and the paired t-test (p < 0.01);
* ``<report-dir>/<name>_curves/<method>.png``: training loss and
  validation/test nDCG@5 per epoch (per tree batch for LambdaMART) on the
  first fold, for the selected grid point (the seeds' Figure 2).

Runs live in ``<output-dir>/<method>/<config>/fold<k>/`` (``config.json``,
``results.json``, ``vali_per_query*.csv``, ``test_per_query*.csv``) and end
with a ``done.json`` marker that records the run's identity
(:func:`run_identity`: the method preset, the grid point and the run's whole
resolved training config, e.g. its epochs, seed and learning rate). A second
invocation skips the runs whose marker matches, so an interrupted comparison
resumes where it stopped, and retrains those whose settings changed; the
report (also rebuilt alone with ``--report-only``) uses only runs whose
identity matches the command's. Files are written atomically and every JSON is
strict (a metric mean over no query is ``null``).

Neural runs use :func:`pipelines.train.train_dataset` and
:class:`pipelines.train.TrainConfig` but their own short ``fit`` loop rather
than :func:`pipelines.train.run`, because the comparison needs two things
``run`` does not offer: test nDCG@5 after every epoch (Figure 2) and, for
IRGAN, best-epoch selection and evaluation of both players of one training.
LambdaMART runs go through :func:`pipelines.lambdamart.run` unchanged.
"""
import argparse
import dataclasses
import fnmatch
import itertools
import json
import math
import os
import sys
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

DEFAULT_DATA = os.path.join("..", "shared", "data", "MQ2008")
REPORT_METRICS = ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "ndcg@20",
                  "map@1", "map@3", "map@5", "map@10", "map@20", "nerr@10")
SELECTION_METRIC = "ndcg@5"
SIGNIFICANCE_LEVEL = 0.01
CURVE_POINTS = 40  # LambdaMART: iterations at which the curve is evaluated


@dataclasses.dataclass(frozen=True)
class Method:
    """A named method preset: what to train and how to label it."""

    key: str
    label: str
    family: str
    kind: str = "loss"                  # loss | irgan | lambdamart
    loss: Optional[str] = None          # tfrx.losses.get name (kind "loss")
    loss_args: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    scorer: str = "R4.L"
    irgan_mode: Optional[str] = None    # point | pair | list (kind "irgan")
    #: fixed settings applied before any grid point (same names as ``--grid`` parameters)
    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def needs_tf_ranking(self) -> bool:
        """Whether the loss is one of TF-Ranking's (not available on the tf221 stack)."""
        from tfr_extensions.losses import registry
        return self.kind == "loss" and self.loss not in registry.tfrx_loss_names()

    @property
    def players(self) -> Tuple[str, ...]:
        """Scorers evaluated from one training ("" = the only one)."""
        return ("generator", "discriminator") if self.kind == "irgan" else ("",)


def _twin(metric: str, gradient: str, label: str) -> Method:
    return Method(f"twin_{metric}_{gradient}", f"{label}-{gradient}", f"twin-sigmoid {gradient}",
                  loss=f"twin_{metric}_{gradient}",
                  loss_args={"topn": 10} if metric == "nerr" else {})


#: Named presets, in report order. ``lambda_weight`` strings in ``loss_args`` are
#: resolved by `tfrx.losses.get` (:data:`tfr_extensions.losses.registry.LAMBDA_WEIGHTS`).
METHODS: Dict[str, Method] = {m.key: m for m in [
    Method("ranknet", "RankNet", "pairwise surrogate", loss="ranknet"),
    Method("lambdarank", "LambdaRank", "pairwise surrogate", loss="pairwise_logistic_loss",
           loss_args={"lambda_weight": "ndcg_v2"}),
    Method("listnet", "ListNet", "listwise surrogate", loss="softmax_loss"),
    Method("listmle", "ListMLE", "listwise surrogate", loss="list_mle_loss"),
    Method("approxndcg", "ApproxNDCG", "metric approximation", loss="approx_ndcg_loss",
           loss_args={"temperature": 0.1}),  # alpha = 1 / temperature = 10
    Method("wassrank", "WassRank", "listwise surrogate", loss="wassrank"),
    Method("softndcg", "SoftNDCG", "metric approximation", loss="softndcg"),
    *[_twin(metric, gradient, label)
      for gradient in ("type1", "type2", "type3")
      for metric, label in (("precision", "Pre"), ("ap", "AP"), ("nerr", "nERR10"),
                            ("ndcg", "nDCG"))],
    Method("expected_utility", "ExptUtility", "policy gradient", loss="expected_utility"),
    Method("mdprank", "MDPRank", "policy gradient", loss="mdprank"),
    Method("irgan_point", "IRGAN-point", "adversarial", kind="irgan", irgan_mode="point"),
    Method("irgan_pair", "IRGAN-pair", "adversarial", kind="irgan", irgan_mode="pair"),
    Method("irgan_list", "IRGAN-list", "adversarial", kind="irgan", irgan_mode="list"),
    Method("lambdamart", "LambdaMART(L)", "gradient boosted trees", kind="lambdamart"),
    # the papers' parameters as given (min_sum_hessian_in_leaf 200: one constant tree on
    # LETOR 4.0 sizes, see pipelines.lambdamart)
    Method("lambdamart_seeds", "LambdaMART(L, seeds' parameters)", "gradient boosted trees",
           kind="lambdamart", overrides={"preset": "seeds"}),
]}

#: TrainConfig fields a grid may set for neural methods (anything else is a loss argument
#: when written ``loss.<arg>``).
NEURAL_GRID_FIELDS = ("learning_rate", "l2", "scorer", "batch_size", "epochs", "hidden_units")
#: LambdaMARTConfig fields a grid may set (anything else is a LightGBM parameter).
LAMBDAMART_GRID_FIELDS = ("preset", "num_boost_round", "early_stopping_rounds")


def _parse_value(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def resolve_method(spec: str) -> Method:
    """A preset name, optionally with fixed settings: ``twin_ndcg_type3[scorer=CE4.L;loss.alpha_b=2]``
    (names as for ``--grid``; values parsed as JSON where possible).

    >>> m = resolve_method("twin_ndcg_type3[scorer=CE4.L;loss.alpha_b=2]")
    >>> m.key, m.label, dict(m.overrides)
    ('twin_ndcg_type3[scorer=CE4.L;loss.alpha_b=2]', 'nDCG-type3 [scorer=CE4.L;loss.alpha_b=2]', {'scorer': 'CE4.L', 'loss.alpha_b': 2})
    """
    base, bracket, rest = str(spec).partition("[")
    if base not in METHODS or (bracket and not rest.endswith("]")):
        raise ValueError(f"`methods` entries must be names of {list(METHODS)}, optionally "
                         f"followed by [PARAM=V;PARAM=V]; got {spec!r}.")
    method = METHODS[base]
    if not bracket:
        return method
    overrides = dict(method.overrides)
    for item in filter(None, rest[:-1].split(";")):
        param, eq, value = item.partition("=")
        if not eq or not param:
            raise ValueError(f"`methods` settings must look like PARAM=V; got {item!r} in {spec!r}.")
        overrides[param] = _parse_value(value)
    return dataclasses.replace(method, key=spec, label=f"{method.label} [{rest[:-1]}]",
                               overrides=overrides)


def default_methods() -> Tuple[str, ...]:
    """Every preset but ``lambdamart_seeds``; without TF-Ranking, also without
    the presets of TF-Ranking's losses (LambdaRank, ListNet, ListMLE, ApproxNDCG)."""
    from tfr_extensions import compat
    return tuple(key for key, method in METHODS.items() if key != "lambdamart_seeds"
                 and (compat.has_tf_ranking() or not method.needs_tf_ranking))


@dataclasses.dataclass(frozen=True)
class CVConfig:
    """Everything a comparison depends on (written as ``cv_config.json``)."""

    name: str = "mq2008"
    data: str = DEFAULT_DATA
    folds: Tuple[int, ...] = (1, 2, 3, 4, 5)
    #: () = :func:`default_methods`
    methods: Tuple[str, ...] = ()
    #: (method pattern, parameter, values): fnmatch pattern over method keys
    grid: Tuple[Tuple[str, str, Tuple[Any, ...]], ...] = ()
    epochs: int = 30
    batch_size: int = 32
    learning_rate: float = 1e-3
    l2: float = 1e-3
    seed: int = 0
    lambdamart_preset: str = "auto"
    lambdamart_rounds: int = 1000
    lambdamart_early_stopping: int = 200
    num_threads: int = 0
    no_relevant: str = "exclude"
    output_dir: Optional[str] = None     # None: runs/cv_<name>
    report_dir: str = os.path.join("docs", "results")

    def __post_init__(self):
        from tfr_extensions import compat
        if not self.methods:
            object.__setattr__(self, "methods", default_methods())
        for m in self.methods:
            if resolve_method(m).needs_tf_ranking and not compat.has_tf_ranking():
                raise ValueError(f"Method {m!r} trains a TF-Ranking loss, and TF-Ranking does not "
                                 "import here (the tf221 stack has none); leave it out.")
        if not self.folds:
            raise ValueError("`folds` must name at least one fold; got ().")
        for arg in ("epochs", "batch_size", "lambdamart_rounds", "lambdamart_early_stopping"):
            value = getattr(self, arg)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{arg}` must be a positive int; got {value!r}.")

    @property
    def resolved_output_dir(self) -> str:
        return self.output_dir or os.path.join("runs", f"cv_{self.name}")


def parse_grid(specs: Sequence[str]) -> Tuple[Tuple[str, str, Tuple[Any, ...]], ...]:
    """``["twin_ndcg_*:learning_rate=0.001,0.01"]`` -> ``(("twin_ndcg_*", "learning_rate",
    (0.001, 0.01)),)``; values are parsed as JSON where possible.

    >>> parse_grid(["lambdamart:num_leaves=31,63", "twin_*:loss.alpha_b=1,2.5"])
    (('lambdamart', 'num_leaves', (31, 63)), ('twin_*', 'loss.alpha_b', (1, 2.5)))
    """
    out = []
    for spec in specs:
        pattern, sep, rest = spec.partition(":")
        param, eq, values = rest.partition("=")
        if not sep or not eq or not pattern or not param or not values:
            raise ValueError(f"`grid` entries must look like 'PATTERN:PARAM=V1,V2'; got {spec!r}.")
        out.append((pattern, param, tuple(_parse_value(v) for v in values.split(","))))
    return tuple(out)


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


def _player_suffix(player: str) -> str:
    return f"_{player}" if player else ""


# ----------------------------------------------------------------------------- training
def neural_config(method: Method, point: Mapping[str, Any], fold: int, out_dir: str,
                  cv: CVConfig):
    """The :class:`pipelines.train.TrainConfig` of one neural (method, grid point, fold)."""
    from pipelines import train as train_pipeline

    point = {**method.overrides, **point}
    fields = {k: v for k, v in point.items() if k in NEURAL_GRID_FIELDS}
    loss_args = dict(method.loss_args)
    loss_args.update({k[len("loss."):]: v for k, v in point.items() if k.startswith("loss.")})
    unknown = [k for k in point if k not in fields and not k.startswith("loss.")]
    if unknown:
        raise ValueError(f"`grid` parameters of {method.key} must be in {NEURAL_GRID_FIELDS} or "
                         f"'loss.<arg>'; got {unknown}.")
    return train_pipeline.TrainConfig(**{
        "name": f"{method.key}_fold{fold}", "data": cv.data, "fold": fold,
        "loss": method.loss or f"irgan_{method.irgan_mode}",
        "loss_args": loss_args if method.kind == "loss" else {"mode": method.irgan_mode},
        "scorer": method.scorer, "epochs": cv.epochs, "batch_size": cv.batch_size,
        "learning_rate": cv.learning_rate, "l2": cv.l2, "seed": cv.seed,
        "output_dir": out_dir, "no_relevant": cv.no_relevant, "tensorboard": False,
        "verbose": 0, **fields})


def train_neural(method: Method, point: Mapping[str, Any], fold: int, splits, out_dir: str,
                 cv: CVConfig) -> Dict[str, Any]:
    """Trains one (method, grid point, fold); writes the run folder; returns its summary."""
    import tensorflow as tf
    from pipelines import train as train_pipeline
    from tfr_extensions import evaluation, models

    config = neural_config(method, point, fold, out_dir, cv)
    os.makedirs(out_dir, exist_ok=True)
    train_pipeline.write_json(os.path.join(out_dir, "config.json"), {
        "method": dataclasses.asdict(method), "grid_point": {**method.overrides, **point},
        "train_config": config.to_json()})

    tf.keras.utils.set_random_seed(config.seed)
    num_features = splits.num_features

    def scorer(name):
        return models.scorer(config.scorer, num_features, hidden_units=config.hidden_units,
                             batch_norm=config.batch_norm, l2=config.l2, name=name)

    if method.kind == "irgan":
        from tfr_extensions.adversarial import IRGAN
        players = {"generator": scorer("generator"), "discriminator": scorer("discriminator")}
        model = IRGAN(players["generator"], players["discriminator"], mode=method.irgan_mode,
                      seed=config.seed)
        model.compile(d_optimizer=tf.keras.optimizers.Adam(config.learning_rate),
                      g_optimizer=tf.keras.optimizers.Adam(config.learning_rate))
    else:
        loss = train_pipeline.build_loss(config.loss, config.loss_args, config.seed)
        model = scorer("scorer")
        model.compile(optimizer=tf.keras.optimizers.Adam(config.learning_rate), loss=loss)
        players = {"": model}

    dataset = train_pipeline.train_dataset(config, splits.train)
    steps = max(int(dataset.cardinality()), 1)
    # one callback per player: nDCG@5 curves on validation and test, best weights restored
    callbacks = {player: evaluation.BestEpochCallback(
        splits.vali, SELECTION_METRIC, config.no_relevant, scorer=scorer_model,
        curve_data={"test": splits.test}, log_key=f"val_ndcg_5{_player_suffix(player)}")
        for player, scorer_model in players.items()}
    start = time.perf_counter()
    history = model.fit(dataset.repeat(), epochs=config.epochs, steps_per_epoch=steps,
                        callbacks=[train_pipeline.StopOnNonFiniteLoss(), *callbacks.values()],
                        verbose=0)
    train_seconds = time.perf_counter() - start

    summary = {"kind": method.kind, "train_seconds": train_seconds,
               "history": {k: [float(v) for v in vs] for k, vs in history.history.items()},
               "players": {}}
    for player, scorer_model in players.items():
        callback = callbacks[player]  # the best epoch's weights are back in scorer_model
        results = {}
        for part, data in (("vali", splits.vali), ("test", splits.test)):
            result = evaluation.evaluate_model(scorer_model, data, no_relevant=config.no_relevant)
            train_pipeline.write_atomically(
                os.path.join(out_dir, f"{part}_per_query{_player_suffix(player)}.csv"),
                lambda temp, frame=result.per_query: frame.to_csv(temp, index=False))
            results[part] = evaluation.json_summary(result.summary)
        summary["players"][player] = {
            "best_epoch": callback.best_epoch, "validation": results["vali"],
            "test": results["test"],
            "curves": {"vali_ndcg@5": _json_curve(callback.values),
                       "test_ndcg@5": _json_curve(callback.curves["test"])}}
    train_pipeline.write_json(os.path.join(out_dir, "results.json"), summary)
    return summary


def _json_curve(values: Sequence[float]) -> List[Optional[float]]:
    """A metric curve for strict JSON: a mean over no query (NaN) as None."""
    from tfr_extensions import evaluation
    return [evaluation.json_metric(float(v)) for v in values]


def lambdamart_config(method: Method, point: Mapping[str, Any], fold: int, out_dir: str,
                      cv: CVConfig):
    """The :class:`pipelines.lambdamart.LambdaMARTConfig` of one LambdaMART
    (method, grid point, fold)."""
    from pipelines import lambdamart

    point = {**method.overrides, **point}
    fields = {k: v for k, v in point.items() if k in LAMBDAMART_GRID_FIELDS}
    params = {k: v for k, v in point.items() if k not in LAMBDAMART_GRID_FIELDS}
    return lambdamart.LambdaMARTConfig(**{
        "name": f"{method.key}_fold{fold}", "data": cv.data, "fold": fold,
        "preset": cv.lambdamart_preset, "params": params, "num_boost_round": cv.lambdamart_rounds,
        "early_stopping_rounds": cv.lambdamart_early_stopping, "seed": cv.seed,
        "num_threads": cv.num_threads, "output_dir": out_dir, "no_relevant": cv.no_relevant,
        **fields})


def train_lambdamart(method: Method, point: Mapping[str, Any], fold: int, splits, out_dir: str,
                     cv: CVConfig) -> Dict[str, Any]:
    """:func:`pipelines.lambdamart.run` plus an nDCG@5 curve over the boosting iterations."""
    from pipelines import lambdamart
    from pipelines import train as train_pipeline
    from tfr_extensions import evaluation

    config = lambdamart_config(method, point, fold, out_dir, cv)
    start = time.perf_counter()
    result = lambdamart.run(config, splits=splits)
    train_seconds = time.perf_counter() - start
    os.replace(os.path.join(out_dir, "results.json"), os.path.join(out_dir, "lambdamart.json"))

    trees = result.num_trees
    iterations = sorted(set(np.linspace(1, trees, min(CURVE_POINTS, trees)).round().astype(int)))
    curves = {"iterations": [int(i) for i in iterations]}
    for part, data in (("train", splits.train), ("vali", splits.vali), ("test", splits.test)):
        features = np.asarray(data.features, np.float32)
        curves[f"{part}_ndcg@5"] = _json_curve([evaluation.evaluate(
            data.labels, result.booster.predict(features, num_iteration=int(i)),
            data.query_offsets, topns=(5,), metrics=("ndcg",),
            no_relevant=cv.no_relevant).summary[SELECTION_METRIC] for i in iterations])
    summary = {"kind": "lambdamart", "train_seconds": train_seconds, "history": {},
               "preset": result.preset, "num_trees": trees,
               "players": {"": {"best_epoch": result.best_iteration,
                                "validation": evaluation.json_summary(result.validation.summary),
                                "test": evaluation.json_summary(result.test.summary),
                                "curves": curves}}}
    train_pipeline.write_json(os.path.join(out_dir, "results.json"), summary)
    return summary


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
    from pipelines import train as train_pipeline
    try:
        done = train_pipeline.read_json(os.path.join(path, "done.json"))
    except train_pipeline.OutputDirError:
        return "changed", ["done.json is not valid JSON"]
    if done is None:
        return "new", []
    stored = done.get("identity") if isinstance(done, dict) else None
    if stored is None:
        return "changed", ["done.json records no identity"]
    differences = train_pipeline.config_differences(_flat(stored), _flat(dict(identity)))
    return ("changed", differences) if differences else ("done", [])


def run_all(cv: CVConfig, log=print) -> Dict[str, int]:
    """Trains every run of :func:`plan` without a ``done.json`` of its identity
    (:func:`run_identity`): new runs, and runs whose settings changed; returns counts."""
    from pipelines import train as train_pipeline
    from tfr_extensions import evaluation

    runs = plan(cv)
    os.makedirs(cv.resolved_output_dir, exist_ok=True)
    train_pipeline.write_json(os.path.join(cv.resolved_output_dir, "cv_config.json"),
                              dataclasses.asdict(cv))
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
            os.remove(os.path.join(out, "done.json"))  # first: a killed retrain is not done
        if fold not in splits_cache:
            splits_cache.clear()
            splits_cache[fold] = train_pipeline.load_splits(cv.data, fold, cv.seed)
            evaluation.check_evaluable(splits_cache[fold].vali, cv.no_relevant,
                                       what=f"fold {fold} validation")
        run_start = time.perf_counter()
        trainer = train_lambdamart if method.kind == "lambdamart" else train_neural
        summary = trainer(method, point, fold, splits_cache[fold], out, cv)
        seconds = time.perf_counter() - run_start
        train_pipeline.write_json(os.path.join(out, "done.json"), {
            "identity": identity, "seconds": seconds,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        counts["trained"] += 1
        scores = "  ".join(
            f"{p or 'model'}: best {s['best_epoch']}, vali "
            f"{train_pipeline.format_mean(s['validation'][SELECTION_METRIC])}, test "
            f"{train_pipeline.format_mean(s['test'][SELECTION_METRIC])}"
            for p, s in summary["players"].items())
        log(f"{tag}: {seconds:.1f} s  {scores}  (elapsed {time.perf_counter() - start:.0f} s)")
    return counts


# ----------------------------------------------------------------------------- report
@dataclasses.dataclass
class Row:
    """One report row: a method (and IRGAN player) with its pooled test queries."""

    key: str
    label: str
    family: str
    per_query: pd.DataFrame             # fold, qid, has_relevant, metric columns
    selected: Dict[int, str]            # fold -> grid point name
    curves_run: Optional[str]           # run folder of the first fold's selection
    player: str
    seconds: float


def _load_run(path: str, identity: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The results of the finished run in ``path`` if its identity is ``identity``."""
    if run_status(path, identity)[0] != "done":
        return None
    with open(os.path.join(path, "results.json")) as f:
        return json.load(f)


def collect_rows(cv: CVConfig) -> List[Row]:
    """Per method and player: per fold the grid point with the best validation nDCG@5,
    among the finished runs whose identity matches ``cv`` (:func:`run_identity`)."""
    rows = []
    for key in cv.methods:
        method = resolve_method(key)
        points = grid_points(cv, method)
        for player in method.players:
            frames, selected, curves_run, seconds = [], {}, None, 0.0
            for fold in cv.folds:
                best = None
                for point in points:
                    path = run_dir(cv, key, point, fold)
                    results = _load_run(path, run_identity(cv, method, point, fold))
                    if results is None:
                        continue
                    seconds += results["train_seconds"]
                    value = results["players"][player]["validation"][SELECTION_METRIC]
                    if value is not None and (best is None or value > best[0]):
                        best = (value, path, config_name(point))
                if best is None:
                    continue
                frame = pd.read_csv(os.path.join(best[1],
                                                 f"test_per_query{_player_suffix(player)}.csv"))
                frame.insert(0, "fold", fold)
                frames.append(frame)
                selected[fold] = best[2]
                curves_run = curves_run or best[1]
            if not frames:
                continue
            suffix = {"generator": " (G)", "discriminator": " (D)"}.get(player, "")
            rows.append(Row(f"{key}{_player_suffix(player)}", method.label + suffix,
                            method.family, pd.concat(frames, ignore_index=True), selected,
                            curves_run, player, seconds))
    return rows


def _paired(best: pd.DataFrame, other: pd.DataFrame, column: str) -> Tuple[np.ndarray, np.ndarray]:
    merged = best[["fold", "qid", column]].merge(other[["fold", "qid", column]],
                                                 on=["fold", "qid"], suffixes=("_a", "_b"))
    merged = merged.dropna()
    return merged[f"{column}_a"].to_numpy(), merged[f"{column}_b"].to_numpy()


def significance(best: pd.DataFrame, other: pd.DataFrame, column: str) -> Tuple[float, float]:
    """(Wilcoxon signed-rank p, paired t-test p) of ``best`` vs ``other`` on ``column``.

    Queries are paired by (fold, qid); queries excluded by the no-relevant rule
    (NaN) are dropped. Identical results give p = 1.
    """
    from scipy import stats
    a, b = _paired(best, other, column)
    diff = a - b
    if a.size < 2 or np.allclose(diff, 0.0):
        return 1.0, 1.0
    wilcoxon = float(stats.wilcoxon(a, b, zero_method="wilcox").pvalue)
    ttest = float(stats.ttest_rel(a, b).pvalue)
    return wilcoxon, (1.0 if math.isnan(ttest) else ttest)


def comparison_table(rows: Sequence[Row], metrics: Sequence[str] = REPORT_METRICS
                     ) -> pd.DataFrame:
    """Means per method and, per metric, best flag and p-values against the best."""
    table = pd.DataFrame({
        "method": [r.key for r in rows], "label": [r.label for r in rows],
        "family": [r.family for r in rows],
        "folds": [",".join(str(f) for f in sorted(r.selected)) for r in rows],
        "num_queries": [int(r.per_query[list(metrics)].notna().all(axis=1).sum()) for r in rows],
        "selected": [";".join(f"{f}:{p}" for f, p in sorted(r.selected.items())) for r in rows],
        "train_seconds": [round(r.seconds, 1) for r in rows]})
    for metric in metrics:
        means = np.array([r.per_query[metric].mean() for r in rows])
        table[metric] = means
        best = int(np.nanargmax(means))
        table[f"best_{metric}"] = [i == best for i in range(len(rows))]
        pvalues = [significance(rows[best].per_query, r.per_query, metric) if i != best
                   else (np.nan, np.nan) for i, r in enumerate(rows)]
        table[f"wilcoxon_p_{metric}"] = [p[0] for p in pvalues]
        table[f"ttest_p_{metric}"] = [p[1] for p in pvalues]
    return table


def markdown_table(table: pd.DataFrame, metrics: Sequence[str] = REPORT_METRICS) -> str:
    """Bold = best per column; ``*`` Wilcoxon p < 0.01 vs the best, ``†`` t-test p < 0.01."""
    header = "| Method | " + " | ".join(metrics) + " |"
    lines = [header, "|" + "---|" * (len(metrics) + 1)]
    for _, row in table.iterrows():
        cells = []
        for metric in metrics:
            value = f"{row[metric]:.4f}"
            if row[f"best_{metric}"]:
                value = f"**{value}**"
            else:
                value += ("*" if row[f"wilcoxon_p_{metric}"] < SIGNIFICANCE_LEVEL else "") + \
                         ("†" if row[f"ttest_p_{metric}"] < SIGNIFICANCE_LEVEL else "")
            cells.append(value)
        lines.append(f"| {row['label']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def no_relevant_table(rows: Sequence[Row], metric: str = SELECTION_METRIC) -> pd.DataFrame:
    """``metric`` under the three no-relevant rules (and on lists of >= 10 documents
    only, as PT-Ranking filters MQ2008), from the same per-query results."""
    out = {}
    for r in rows:
        values = r.per_query[metric]
        relevant = r.per_query["has_relevant"].astype(bool)
        long = r.per_query["num_docs"] >= 10
        out[r.label] = {"exclude": values[relevant].mean(),
                        "zero": values.where(relevant, 0.0).mean(),
                        "one": values.where(relevant, 1.0).mean(),
                        "exclude, >=10 docs": values[relevant & long].mean(),
                        "zero, >=10 docs": values.where(relevant, 0.0)[long].mean()}
    return pd.DataFrame(out).T


def plot_curves(row: Row, path: str) -> Optional[str]:
    """Figure 2 style: training loss and validation/test nDCG@5 per epoch (first fold)."""
    if row.curves_run is None:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(os.path.join(row.curves_run, "results.json")) as f:
        results = json.load(f)
    curves = results["players"][row.player]["curves"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.0, 2.6), dpi=80)
    if results["kind"] == "lambdamart":
        x = curves["iterations"]
        left.plot(x, curves["train_ndcg@5"], color="C2")
        left.set_xlabel("trees")
        left.set_ylabel("train nDCG@5")
        right.set_xlabel("trees")
    else:
        history = results["history"]
        keys = [k for k in ("loss", "d_loss", "g_loss") if k in history]
        for k in keys:
            left.plot(range(1, len(history[k]) + 1), history[k], label=k)
        if len(keys) > 1:
            left.legend(fontsize=7)
        left.set_xlabel("epoch")
        left.set_ylabel("training loss")
        x = list(range(1, len(curves["vali_ndcg@5"]) + 1))
        right.set_xlabel("epoch")
    for name, label in (("vali_ndcg@5", "validation"), ("test_ndcg@5", "test")):
        right.plot(x, [np.nan if v is None else v for v in curves[name]], label=label)
    right.set_ylabel("nDCG@5")
    right.legend(fontsize=7)
    fold = min(row.selected)
    fig.suptitle(f"{row.label}, fold {fold} ({row.selected[fold]})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_report(cv: CVConfig, wall_seconds: Optional[float] = None,
                 command: Optional[str] = None) -> Dict[str, Any]:
    """The Markdown table, the CSV and the curve PNGs from the finished runs."""
    rows = collect_rows(cv)
    if not rows:
        raise ValueError(f"no finished runs of these settings under {cv.resolved_output_dir} "
                         "(runs of other settings are not reported: train them first).")
    table = comparison_table(rows)
    os.makedirs(cv.report_dir, exist_ok=True)
    csv_path = os.path.join(cv.report_dir, f"{cv.name}.csv")
    table.to_csv(csv_path, index=False, float_format="%.6g")
    curves_dir = os.path.join(cv.report_dir, f"{cv.name}_curves")
    os.makedirs(curves_dir, exist_ok=True)
    plots = {r.key: plot_curves(r, os.path.join(curves_dir, f"{r.key}.png")) for r in rows}

    rules = no_relevant_table(rows)
    lines = [f"# Cross-validated comparison: {cv.name}", "",
             f"Data `{cv.data}`, folds {', '.join(map(str, cv.folds))}; test metrics over "
             f"queries pooled across folds (no-relevant rule `{cv.no_relevant}`). Per fold the "
             f"grid point with the best validation {SELECTION_METRIC} is used. **Bold**: best "
             f"per column; `*`: Wilcoxon signed-rank p < {SIGNIFICANCE_LEVEL} against the best; "
             f"`†`: paired t-test p < {SIGNIFICANCE_LEVEL}.", ""]
    if command:
        lines += ["Regenerate:", "", "```", command, "```", ""]
    if wall_seconds is not None:
        lines += [f"Wall time of this invocation: {wall_seconds:.0f} s.", ""]
    lines += [markdown_table(table), "",
              f"{SELECTION_METRIC} under the three no-relevant rules, and on the queries "
              f"with at least 10 documents only:", "",
              "| Method | " + " | ".join(rules.columns) + " |",
              "|---|" + "---|" * len(rules.columns)]
    lines += [f"| {label} | " + " | ".join(f"{v:.4f}" for v in r) + " |"
              for label, r in rules.iterrows()]
    lines += ["", "Selected grid points and training time:", "",
              "| Method | selected (fold:config) | train s |", "|---|---|---|"]
    lines += [f"| {r['label']} | {r['selected']} | {r['train_seconds']:.0f} |"
              for _, r in table.iterrows()]
    lines += ["", "Curves (first fold):", ""]
    lines += [f"![{r.label}]({os.path.relpath(plots[r.key], cv.report_dir)})"
              for r in rows if plots[r.key]]
    md_path = os.path.join(cv.report_dir, f"{cv.name}_table.md")
    with open(md_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return {"table": table, "markdown": md_path, "csv": csv_path,
            "plots": [p for p in plots.values() if p]}


# ----------------------------------------------------------------------------- CLI
def parse_args(argv=None) -> Tuple[CVConfig, argparse.Namespace]:
    """Flags -> (:class:`CVConfig`, the remaining flags); only ``main`` calls this."""
    defaults = CVConfig()
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.cross_validate", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--name", default=defaults.name)
    parser.add_argument("--data", default=defaults.data, help="a folder with Fold<k>/")
    parser.add_argument("--folds", default=",".join(map(str, defaults.folds)))
    parser.add_argument("--methods", default=",".join(defaults.methods),
                        help=f"comma-separated presets: {', '.join(METHODS)}")
    parser.add_argument("--grid", action="append", default=[],
                        help="PATTERN:PARAM=V1,V2 (repeatable); PARAM is a TrainConfig field "
                             f"{NEURAL_GRID_FIELDS}, 'loss.<arg>', a LambdaMART field "
                             f"{LAMBDAMART_GRID_FIELDS} or a LightGBM parameter")
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--l2", type=float, default=defaults.l2)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--lambdamart-preset", default=defaults.lambdamart_preset)
    parser.add_argument("--lambdamart-rounds", type=int, default=defaults.lambdamart_rounds)
    parser.add_argument("--lambdamart-early-stopping", type=int,
                        default=defaults.lambdamart_early_stopping)
    parser.add_argument("--num-threads", type=int, default=defaults.num_threads,
                        help="LightGBM threads (0: its default)")
    parser.add_argument("--no-relevant", default=defaults.no_relevant,
                        choices=("exclude", "zero", "one"))
    parser.add_argument("--output-dir", default=None, help="default runs/cv_<name>")
    parser.add_argument("--report-dir", default=defaults.report_dir)
    parser.add_argument("--report-only", action="store_true",
                        help="rebuild the report from finished runs, train nothing")
    args = parser.parse_args(argv)
    config = CVConfig(
        name=args.name, data=args.data, folds=tuple(int(f) for f in args.folds.split(",")),
        methods=tuple(m for m in args.methods.split(",") if m), grid=parse_grid(args.grid),
        epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.learning_rate,
        l2=args.l2, seed=args.seed, lambdamart_preset=args.lambdamart_preset,
        lambdamart_rounds=args.lambdamart_rounds,
        lambdamart_early_stopping=args.lambdamart_early_stopping, num_threads=args.num_threads,
        no_relevant=args.no_relevant, output_dir=args.output_dir, report_dir=args.report_dir)
    return config, args


def main(argv=None) -> Dict[str, Any]:
    argv = sys.argv[1:] if argv is None else list(argv)
    config, args = parse_args(argv)
    start = time.perf_counter()
    counts = {"trained": 0, "skipped": 0}
    if not args.report_only:
        counts = run_all(config, log=lambda line: print(line, flush=True))
        print(f"{counts['trained']} runs trained, {counts['skipped']} skipped", flush=True)
    wall = time.perf_counter() - start
    command = "python -m pipelines.cross_validate " + " ".join(
        a if a.replace(",", "").replace("=", "").replace(".", "").replace("_", "")
        .replace("/", "").replace("-", "").replace("@", "").isalnum() else f"'{a}'"
        for a in argv)
    report = write_report(config, wall_seconds=None if args.report_only else wall,
                          command=command)
    columns = ["label", SELECTION_METRIC, f"wilcoxon_p_{SELECTION_METRIC}"]
    print(report["table"][columns].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"report: {report['markdown']}, {report['csv']}, {len(report['plots'])} plots")
    return {**report, "counts": counts}


if __name__ == "__main__":
    main()
