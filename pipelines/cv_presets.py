"""The methods :mod:`pipelines.cross_validate` compares, as named presets.

A :class:`Method` says what to train (a ``tfrx.losses.get`` loss with its
arguments and a scorer, an IRGAN mode, or LightGBM trees) and how the report
labels it. :data:`METHODS` holds the presets in report order;
:func:`resolve_method` reads a preset name, an alias of an older name
(:data:`METHOD_ALIASES`), or a preset with fixed settings in brackets.

>>> METHODS["twin_ndcg_type3"].loss, METHODS["listnet"].overrides["learning_rate"]
('twin_ndcg_type3', 0.01)
>>> METHODS["lambda_loss"].loss, METHODS["neural_ndcg"].family
('lambda_loss', 'metric approximation')
>>> resolve_method("lambdamart_seeds").key
'lambdamart_paper'
"""
import dataclasses
import json
import warnings
from typing import Any, Dict, Mapping, Optional, Tuple

@dataclasses.dataclass(frozen=True)
class Method:
    """A named method preset: what to train and how to label it.

    ``kind`` is ``"loss"`` (a scorer trained with ``loss``), ``"irgan"`` (an
    IRGAN's players trained with ``loss`` ``irgan_<mode>``) or ``"lambdamart"``
    (LightGBM trees).
    ``overrides`` are fixed settings applied before any grid point, with the
    names of ``--grid`` parameters (e.g. ``learning_rate``, ``loss.topn``,
    ``objective``).
    """

    key: str
    label: str
    family: str
    kind: str = "loss"
    loss: Optional[str] = None
    loss_args: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    scorer: str = "R4.L"
    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def needs_tf_ranking(self) -> bool:
        """Whether the loss is one of TF-Ranking's (not available on the tf221 and keras3
        stacks)."""
        from tfr_extensions.losses import registry
        return self.kind == "loss" and self.loss not in registry.tfrx_loss_names()

    @property
    def players(self) -> Tuple[str, ...]:
        """Scorers evaluated from one training ("" = the only one): those the ``loss``
        trains (:func:`pipelines.trainable.scorer_names`; trees: one)."""
        from . import trainable
        return trainable.scorer_names(self.loss or "")


def _twin(metric: str, gradient: str, label: str) -> Method:
    return Method(f"twin_{metric}_{gradient}", f"{label}-{gradient}", f"twin-sigmoid {gradient}",
                  loss=f"twin_{metric}_{gradient}",
                  loss_args={"topn": 10} if metric == "nerr" else {})


def _twinmart(metric: str, gradient: str, label: str) -> Method:
    """LightGBM trees on the twin-sigmoid objective (tfrx.gbdt), trained and
    selected like LambdaMART; grids may set ``objective.<arg>`` (e.g. hessian)."""
    overrides: Dict[str, Any] = {"objective": f"twin_{metric}_{gradient}"}
    if metric == "nerr":
        overrides["objective.topn"] = 10
    return Method(f"twinmart_{metric}_{gradient}", f"TwinMART {label}-{gradient}",
                  "gradient boosted trees", kind="lambdamart", overrides=overrides)


_TWIN_METRICS = (("precision", "Pre"), ("ap", "AP"), ("nerr", "nERR10"), ("ndcg", "nDCG"))
_GRADIENTS = ("type1", "type2", "type3")

#: Named presets, in report order. ``lambda_weight`` strings in ``loss_args`` are
#: resolved by `tfrx.losses.get` (:data:`tfr_extensions.losses.registry.LAMBDA_WEIGHTS`).
METHODS: Dict[str, Method] = {m.key: m for m in [
    Method("ranknet", "RankNet", "pairwise surrogate", loss="ranknet"),
    Method("lambdarank", "LambdaRank", "pairwise surrogate", loss="pairwise_logistic_loss",
           loss_args={"lambda_weight": "ndcg_v2"}),
    # TF-Ranking's softmax loss under-trains at the default 1e-3 on some collections
    Method("listnet", "ListNet", "listwise surrogate", loss="softmax_loss",
           overrides={"learning_rate": 0.01}),
    Method("listmle", "ListMLE", "listwise surrogate", loss="list_mle_loss"),
    Method("approxndcg", "ApproxNDCG", "metric approximation", loss="approx_ndcg_loss",
           loss_args={"temperature": 0.1}),  # alpha = 1 / temperature = 10
    # (the registry's name and defaults: NDCG-Loss2++)
    Method("lambda_loss", "LambdaLoss (NDCG-Loss2++)", "pairwise surrogate", loss="lambda_loss"),
    Method("neural_ndcg", "NeuralNDCG", "metric approximation", loss="neural_ndcg"),
    Method("wassrank", "WassRank", "listwise surrogate", loss="wassrank"),
    Method("softndcg", "SoftNDCG", "metric approximation", loss="softndcg"),
    *[_twin(metric, gradient, label)
      for gradient in _GRADIENTS for metric, label in _TWIN_METRICS],
    Method("expected_utility", "ExptUtility", "policy gradient", loss="expected_utility"),
    Method("mdprank", "MDPRank", "policy gradient", loss="mdprank"),
    Method("irgan_point", "IRGAN-point", "adversarial", kind="irgan", loss="irgan_point"),
    Method("irgan_pair", "IRGAN-pair", "adversarial", kind="irgan", loss="irgan_pair"),
    Method("irgan_list", "IRGAN-list", "adversarial", kind="irgan", loss="irgan_list"),
    Method("lambdamart", "LambdaMART(L)", "gradient boosted trees", kind="lambdamart"),
    # the papers' parameters as given (min_sum_hessian_in_leaf 200: one constant tree on
    # LETOR 4.0 sizes, see pipelines.lambdamart)
    Method("lambdamart_paper", "LambdaMART(L, the paper's parameters)", "gradient boosted trees",
           kind="lambdamart", overrides={"preset": "paper"}),
    *[_twinmart(metric, gradient, label)
      for gradient in _GRADIENTS for metric, label in _TWIN_METRICS],
]}

#: older method keys that still work: alias -> preset key
METHOD_ALIASES = {"lambdamart_seeds": "lambdamart_paper"}
#: method keys of an earlier release -> the key to use now: they work until the next
#: release, with a DeprecationWarning that names the new key
DEPRECATED_METHODS = {"lambdaloss": "lambda_loss"}


def _not_default(key: str) -> bool:
    """Presets left out of :func:`default_methods`: the paper's LambdaMART (one constant
    tree on LETOR 4.0 sizes) and the TwinMART variants (ask for them by name)."""
    return key == "lambdamart_paper" or key.startswith("twinmart_")


def parse_value(value: str) -> Any:
    """A setting's text as JSON where it is JSON, else the text itself.

    >>> parse_value("0.01"), parse_value("CE4.L"), parse_value('"1"')
    (0.01, 'CE4.L', '1')
    """
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def canonical_spec(spec: str) -> str:
    """A method spec with an alias of its preset name resolved:
    ``lambdamart_seeds[num_leaves=63]`` -> ``lambdamart_paper[num_leaves=63]``."""
    base, bracket, rest = str(spec).partition("[")
    if base in DEPRECATED_METHODS:
        warnings.warn(f"The method {base!r} is deprecated and goes in the next release: use "
                      f"{DEPRECATED_METHODS[base]!r}.", DeprecationWarning, stacklevel=2)
        return DEPRECATED_METHODS[base] + bracket + rest
    return METHOD_ALIASES.get(base, base) + bracket + rest


def resolve_method(spec: str) -> Method:
    """A preset name (or an alias), optionally with fixed settings:
    ``twin_ndcg_type3[scorer=CE4.L;loss.alpha_b=2]`` (names as for ``--grid``; values
    parsed as JSON where possible).

    >>> m = resolve_method("twin_ndcg_type3[scorer=CE4.L;loss.alpha_b=2]")
    >>> m.key, m.label, dict(m.overrides)
    ('twin_ndcg_type3[scorer=CE4.L;loss.alpha_b=2]', 'nDCG-type3 [scorer=CE4.L;loss.alpha_b=2]', {'scorer': 'CE4.L', 'loss.alpha_b': 2})
    """
    spec = canonical_spec(spec)
    base, bracket, rest = spec.partition("[")
    if base not in METHODS or (bracket and not rest.endswith("]")):
        raise ValueError(f"`methods` entries must be names of {list(METHODS)} (or aliases "
                         f"{list(METHOD_ALIASES)}), optionally followed by [PARAM=V;PARAM=V]; "
                         f"got {spec!r}.")
    method = METHODS[base]
    if not bracket:
        return method
    overrides = dict(method.overrides)
    for item in filter(None, rest[:-1].split(";")):
        param, eq, value = item.partition("=")
        if not eq or not param:
            raise ValueError(f"`methods` settings must look like PARAM=V; got {item!r} in {spec!r}.")
        overrides[param] = parse_value(value)
    return dataclasses.replace(method, key=spec, label=f"{method.label} [{rest[:-1]}]",
                               overrides=overrides)


def default_methods() -> Tuple[str, ...]:
    """Every preset but ``lambdamart_paper`` and the ``twinmart_*`` ones; without
    TF-Ranking, also without the presets of TF-Ranking's losses (LambdaRank, ListNet,
    ListMLE, ApproxNDCG); on Keras's JAX and PyTorch backends also without IRGAN's
    (a TensorFlow program)."""
    from tfr_extensions import backend, compat
    on_tensorflow = backend.uses_tensorflow_ops()
    return tuple(key for key, method in METHODS.items() if not _not_default(key)
                 and (compat.has_tf_ranking() or not method.needs_tf_ranking)
                 and (on_tensorflow or method.kind != "irgan"))

