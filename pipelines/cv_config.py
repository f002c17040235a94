"""The settings of a cross-validated comparison: :class:`CVConfig` and its grids.

:class:`CVConfig` holds the comparison's settings (written as ``cv_config.json``
next to its runs), the training ones as templates: a
:class:`pipelines.train.TrainConfig` for the neural methods and a
:class:`pipelines.lambdamart.LambdaMARTConfig` for the tree methods. The
comparison itself sets some fields of each run's config
(:data:`NEURAL_RUN_FIELDS`, :data:`LAMBDAMART_RUN_FIELDS`: its name, data, fold,
seed, folder, ...); a grid (:func:`parse_grid`, :func:`grid_points`) may set
every other field of the template (:data:`NEURAL_GRID_FIELDS`,
:data:`LAMBDAMART_GRID_FIELDS`, derived from the dataclasses). A report's
rows are the methods' :func:`row_keys`; ``reference`` names some of them
(:func:`reference_matches`). :mod:`pipelines.cv_runner` trains the runs.

>>> config = CVConfig(methods=("twin_ndcg_type3", "ranknet"), grid=parse_grid(
...     ["twin_*:learning_rate=0.001,0.01"]), seeds=(0, 1, 2), reference="twin_*")
>>> [config_name(point) for point in grid_points(config, resolve_method("twin_ndcg_type3"))]
['learning_rate=0.001', 'learning_rate=0.01']
>>> config.seeds, reference_matches(config.reference, config.methods)
((0, 1, 2), ['twin_ndcg_type3'])
"""
import dataclasses
import fnmatch
import itertools
import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from . import common
from . import flags
from . import trainable
from .cv_presets import Method, canonical_spec, default_methods, parse_value, resolve_method
from .lambdamart import LambdaMARTConfig
from .train import TrainConfig
from tfr_extensions import evaluation
from tfr_extensions.ops import validation

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
        than those the comparison sets for each run (pipelines.cv_config.NEURAL_GRID_FIELDS:
        learning_rate, l2, scorer, batch_size, epochs, hidden_units, ...) or 'loss.<arg>';
        for tree methods, such a LambdaMARTConfig field (LAMBDAMART_GRID_FIELDS: preset,
        num_boost_round, early_stopping_rounds, objective, ...), 'objective.<arg>' or a
        LightGBM parameter.
      train: the TrainConfig template of the neural methods (flags: its epochs, batch_size,
        learning_rate and l2); each run sets its name, data, fold, loss, seed, folder and
        the protocol's fields (NEURAL_RUN_FIELDS), then the preset's and the grid's.
      seed: the seed of every run, and of the synthetic data's sample and folds; with
        --seeds leave it out (seeds replaces it).
      seeds: comma-separated seeds, e.g. 0,1,2: every neural method (and a tree method whose
        seed changes its trees: a twin-sigmoid objective with tie breaking, LightGBM's bagging,
        feature sampling or extra trees) trains once per seed, in
        <method>/<config>/seed<s>/fold<k>/, and the report adds each method's mean and spread
        across seeds; other tree methods train once, as without seeds. The data (the synthetic
        sample of seed 0 and its folds) is the same for every seed. None: one run of --seed
        per method, in <method>/<config>/fold<k>/.
      lambdamart: the LambdaMARTConfig template of the tree methods (flags: --lambdamart-preset,
        --lambdamart-rounds, --lambdamart-early-stopping, --num-threads); its params are
        the base of each run's.
      no_relevant: evaluation rule for lists without a relevant document: exclude, count as
        zero, or count as one.
      reference: the method every other is tested against in each column of the report: a
        --methods entry, an IRGAN player's row (irgan_pair_generator), or an fnmatch pattern
        of them ('twin_*': per column the best matching method); none: the best method of
        the column.
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
    seeds: Tuple[int, ...] = ()
    lambdamart: LambdaMARTConfig = dataclasses.field(
        default_factory=LambdaMARTConfig, metadata=flags.nested(
            {"lambdamart_preset": "preset", "lambdamart_rounds": "num_boost_round",
             "lambdamart_early_stopping": "early_stopping_rounds",
             "num_threads": "num_threads"}, help_prefix="tree methods: "))
    no_relevant: str = dataclasses.field(
        default="exclude", metadata=flags.option(choices=evaluation.NO_RELEVANT_RULES))
    reference: Optional[str] = None
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
        self._check_seeds()
        if self.reference is not None:
            object.__setattr__(self, "reference", canonical_spec(self.reference))
            if not reference_matches(self.reference, self.methods):
                raise ValueError(
                    f"`reference` must be one of the methods {list(self.methods)}, an IRGAN "
                    f"player's row (e.g. irgan_pair_generator) or an fnmatch pattern matching "
                    f"one of them; got {self.reference!r}.")

    def _check_seeds(self) -> None:
        seeds = tuple(self.seeds)
        object.__setattr__(self, "seeds", seeds)
        bad = [s for s in seeds if isinstance(s, bool) or not isinstance(s, int) or s < 0]
        if bad or len(set(seeds)) != len(seeds):
            raise ValueError(f"`seeds` must be distinct ints >= 0; got {seeds!r}.")
        if seeds and self.seed != 0:
            raise ValueError(
                f"`seed` and `seeds` exclude each other: give --seeds alone (each seed s in "
                f"seed<s>/ folders) or --seed alone (one run per method); got seed="
                f"{self.seed!r} and seeds={seeds!r}.")

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
            for name in ("folds", "methods", "seeds"):
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


def row_keys(method: Method) -> Tuple[str, ...]:
    """The report's rows of ``method``: its key, or per IRGAN player ``<key>_<player>``."""
    return tuple(f"{method.key}{trainable.player_suffix(p)}" for p in method.players)


def reference_matches(reference: str, specs: Sequence[str]) -> List[str]:
    """The report rows (:func:`row_keys` of the methods ``specs``) that ``reference``
    names: a row, a method (each of its rows), or an fnmatch pattern of either.

    >>> reference_matches("twin_*", ["ranknet", "twin_ndcg_type3", "twin_ap_type2"])
    ['twin_ndcg_type3', 'twin_ap_type2']
    >>> reference_matches("irgan_pair", ["irgan_pair", "ranknet"])
    ['irgan_pair_generator', 'irgan_pair_discriminator']
    """
    rows: List[str] = []
    for spec in specs:
        method = resolve_method(spec)
        keys = row_keys(method)
        if reference == method.key or fnmatch.fnmatchcase(method.key, reference):
            rows += keys
        else:
            rows += [k for k in keys if k == reference or fnmatch.fnmatchcase(k, reference)]
    return rows


def config_name(point: Mapping[str, Any]) -> str:
    """A folder name for a grid point: ``default`` or ``learning_rate=0.01,...``."""
    if not point:
        return "default"
    return ",".join(f"{k}={v}" for k, v in sorted(point.items())).replace("/", "_")
