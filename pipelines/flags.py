"""Command-line flags generated from a frozen config dataclass.

Every field of the class becomes a flag ``--<field-name>`` (underscores as
dashes) whose type, choices, default and help come from the class itself, so
that the flags cannot drift from the config:

* ``int``, ``float``, ``str``: a value of that type; ``Optional[...]`` of one
  of them too (None, usually the default, is the flag left out);
* ``bool``: ``--<name>`` and ``--no-<name>`` (and the field's ``false_alias``);
* ``Mapping`` / ``Dict``: a JSON object, e.g. ``'{"topn": 10}'``;
* ``Tuple[int, ...]`` / ``Tuple[str, ...]``: comma-separated, e.g. ``1,2,3``;
* ``Literal[...]`` or the field's ``choices``: one of those values;
* anything else: the field's own ``parse`` and ``format`` (:func:`option`);
* a field that holds a config dataclass (a template, e.g. ``CVConfig.train``, a
  ``TrainConfig``): no flag of its own, but one for each of its fields that
  :func:`nested` names, typed, checked and documented by that field (a flag may
  carry another name: ``--lambdamart-rounds`` sets ``lambdamart.num_boost_round``).

The help of a flag is the field's entry in the ``Attributes:`` section of the
class docstring (every field must have one) and its default.
:func:`add_config_flags` adds the flags to a parser, :func:`config_from_args`
builds the config from the parsed flags (a flag left out keeps the
dataclass's default), and :func:`config_to_argv` gives the flags of a config
(its fields that differ from the defaults): flags -> config -> flags
round-trips. :func:`with_flags` sets fields by their flags' names, nested ones
included.

>>> @dataclasses.dataclass(frozen=True)
... class Example:
...     '''A run.
...
...     Attributes:
...       epochs: training epochs.
...       folds: the folds to run.
...       verbose: print progress.
...     '''
...     epochs: int = 20
...     folds: Tuple[int, ...] = (1, 2)
...     verbose: bool = True
>>> parser = argparse.ArgumentParser()
>>> add_config_flags(parser, Example)
>>> config = config_from_args(Example, parser.parse_args(["--folds", "3", "--no-verbose"]))
>>> config
Example(epochs=20, folds=(3,), verbose=False)
>>> config_to_argv(config)
['--folds', '3', '--no-verbose']
"""
import argparse
import collections.abc
import dataclasses
import inspect
import json
import re
import typing
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Type

#: the key of a field's metadata that holds its :class:`FlagOptions`
METADATA_KEY = "flag"


@dataclasses.dataclass(frozen=True)
class FlagOptions:
    """What a field's type alone does not say about its flag (see :func:`option`)."""

    choices: Optional[Sequence[Any]] = None
    parse: Optional[Callable[[str], Any]] = None
    format: Optional[Callable[[Any], str]] = None
    repeated: bool = False
    false_alias: Optional[str] = None
    metavar: Optional[str] = None
    #: for a field holding a config dataclass: (flag field name, nested field name) pairs
    nested: Tuple[Tuple[str, str], ...] = ()
    #: for a field holding a config dataclass: the start of its flags' help
    help_prefix: str = ""


def option(*, choices: Optional[Sequence[Any]] = None,
           parse: Optional[Callable[[str], Any]] = None,
           format: Optional[Callable[[Any], str]] = None, repeated: bool = False,
           false_alias: Optional[str] = None, metavar: Optional[str] = None) -> Dict[str, Any]:
    """Field metadata for a flag that needs more than the field's type.

    Args:
      choices: the values allowed (after ``parse``).
      parse: the flag's text -> the value (e.g. an alias -> its canonical name).
      format: the value -> the flag's text (the inverse of ``parse``).
      repeated: the flag may be given several times; the field is the tuple of
        the parsed values (``parse`` and ``format`` then work on one entry).
      false_alias: another flag that sets a ``bool`` field to False, beside
        ``--no-<name>`` (e.g. ``--keep-no-relevant``).
      metavar: the value's name in ``--help``.

    Use as ``dataclasses.field(default=..., metadata=option(...))``.
    """
    return {METADATA_KEY: FlagOptions(choices=tuple(choices) if choices is not None else None,
                                      parse=parse, format=format, repeated=repeated,
                                      false_alias=false_alias, metavar=metavar)}


def nested(fields: Mapping[str, str], *, help_prefix: str = "") -> Dict[str, Any]:
    """Field metadata for a field that holds a config dataclass (a template): a flag for
    each entry of ``fields``, flag name (written as a field name) -> the nested field.

    Each flag takes its type, choices, parsing and help from the nested field (its
    help after ``help_prefix``), and its default from the field's default template;
    the template's other fields have no flag.

    >>> @dataclasses.dataclass(frozen=True)
    ... class Trees:
    ...     '''Trees.
    ...
    ...     Attributes:
    ...       rounds: the most trees.
    ...     '''
    ...     rounds: int = 10
    >>> @dataclasses.dataclass(frozen=True)
    ... class Comparison:
    ...     '''A comparison.
    ...
    ...     Attributes:
    ...       trees: the settings of the tree methods.
    ...     '''
    ...     trees: Trees = dataclasses.field(default_factory=Trees, metadata=nested(
    ...         {"tree_rounds": "rounds"}, help_prefix="tree methods: "))
    >>> parser = argparse.ArgumentParser()
    >>> add_config_flags(parser, Comparison)
    >>> config = config_from_args(Comparison, parser.parse_args(["--tree-rounds", "3"]))
    >>> config, config_to_argv(config)
    (Comparison(trees=Trees(rounds=3)), ['--tree-rounds', '3'])
    >>> with_flags(Comparison(), tree_rounds=5)
    Comparison(trees=Trees(rounds=5))
    """
    return {METADATA_KEY: FlagOptions(nested=tuple(dict(fields).items()),
                                      help_prefix=help_prefix)}


def flag_name(field_name: str) -> str:
    """``"batch_size"`` -> ``"--batch-size"``."""
    return "--" + field_name.replace("_", "-")


def field_help(config_class: type) -> Dict[str, str]:
    """Field name -> the text of its entry in the ``Attributes:`` section of the
    class docstring (continuation lines joined)."""
    doc = inspect.getdoc(config_class) or ""
    lines = doc.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Attributes:")
    except StopIteration:
        return {}
    entries: Dict[str, List[str]] = {}
    indent, current = None, None
    for line in lines[start + 1:]:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if depth == 0:
            break  # the next section
        match = re.match(r"(\w+)(?: \([^)]*\))?: ?(.*)$", line.strip())
        if match and (indent is None or depth == indent):
            indent, current = depth, match.group(1)
            entries[current] = [match.group(2)]
        elif current is not None and depth > (indent or 0):
            entries[current].append(line.strip())
    return {name: " ".join(" ".join(words).split()) for name, words in entries.items()}


def _options(field: dataclasses.Field) -> FlagOptions:
    return field.metadata.get(METADATA_KEY, FlagOptions())


def _default(field: dataclasses.Field) -> Any:
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return field.default_factory()  # type: ignore[misc]
    return None if field.default is dataclasses.MISSING else field.default


def _strip_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _json_object(text: str) -> Dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _tuple_of(item_type: type) -> Callable[[str], Tuple[Any, ...]]:
    def parse(text: str) -> Tuple[Any, ...]:
        return tuple(item_type(item) for item in text.split(",") if item)
    parse.__name__ = f"comma-separated {item_type.__name__}"
    return parse


def _codec(field: dataclasses.Field, annotation: Any
           ) -> Tuple[Callable[[str], Any], Callable[[Any], str], Optional[Sequence[Any]]]:
    """(parse, format, choices) of a non-bool field."""
    options = _options(field)
    kind = _strip_optional(annotation)
    origin = typing.get_origin(kind)
    choices = options.choices
    if options.parse is not None:
        parse = options.parse
        format = options.format or str
    elif origin is typing.Literal:
        choices = choices or typing.get_args(kind)
        item_type = type(typing.get_args(kind)[0])
        parse, format = item_type, str
    elif kind in (int, float, str):
        parse, format = kind, str
    elif origin in (dict, collections.abc.Mapping) or kind in (dict, Mapping):
        parse, format = _json_object, lambda value: json.dumps(dict(value))
    elif origin is tuple and len(typing.get_args(kind)) == 2 \
            and typing.get_args(kind)[1] is Ellipsis \
            and typing.get_args(kind)[0] in (int, float, str):
        parse = _tuple_of(typing.get_args(kind)[0])
        format = lambda value: ",".join(str(item) for item in value)  # noqa: E731
    else:
        raise TypeError(f"{field.name}: no flag for the type {annotation!r}; give the field "
                        "`parse` and `format` (pipelines.flags.option).")
    return parse, format, choices


def _is_bool(annotation: Any) -> bool:
    return _strip_optional(annotation) is bool


@dataclasses.dataclass(frozen=True)
class Flag:
    """One flag of a config class (:func:`config_flags`): its name written as a field
    name, the field it sets (``path``: the field, or a template field and one of its
    fields) and that field's type, help and default."""

    name: str
    path: Tuple[str, ...]
    field: dataclasses.Field
    annotation: Any
    help: str
    default: Any


def _documented(config_class: type, name: str) -> str:
    helps = field_help(config_class)
    if name not in helps:
        raise ValueError(f"{config_class.__name__}.{name} has no entry in the class "
                         "docstring's Attributes: section (it is the flag's help).")
    return helps[name]


def _is_template(field: dataclasses.Field) -> bool:
    return bool(_options(field).nested)


def config_flags(config_class: type, exclude: Sequence[str] = ()) -> List[Flag]:
    """The flags of ``config_class``: one per field but ``exclude``, and for a template
    field (:func:`nested`) one per nested field it names.

    Raises:
      ValueError: a field has no entry in its class docstring's ``Attributes:``.
    """
    hints = typing.get_type_hints(config_class)
    flags: List[Flag] = []
    for field in dataclasses.fields(config_class):
        if field.name in exclude:
            continue
        help_text = _documented(config_class, field.name)
        options = _options(field)
        if not _is_template(field):
            flags.append(Flag(field.name, (field.name,), field, hints[field.name], help_text,
                              _default(field)))
            continue
        inner_class = hints[field.name]
        inner_fields = {f.name: f for f in dataclasses.fields(inner_class)}
        inner_hints = typing.get_type_hints(inner_class)
        template = _default(field)
        for name, inner in options.nested:
            flags.append(Flag(name, (field.name, inner), inner_fields[inner], inner_hints[inner],
                              options.help_prefix + _documented(inner_class, inner),
                              getattr(template, inner)))
    return flags


def add_config_flags(parser: argparse.ArgumentParser, config_class: type,
                     exclude: Sequence[str] = ()) -> None:
    """Adds a flag for every field of ``config_class`` but ``exclude`` (for a template
    field, its :func:`nested` flags).

    Raises:
      ValueError: a field has no entry in the class docstring's ``Attributes:``.
      TypeError: a field's type has no flag and no ``parse``/``format``.
    """
    for flag in config_flags(config_class, exclude):
        help_text = flag.help.replace("%", "%%")
        options = _options(flag.field)
        default = flag.default
        name = flag_name(flag.name)
        if _is_bool(flag.annotation):
            shown = name if default else "--no-" + name[2:]
            parser.add_argument(name, dest=flag.name, action=argparse.BooleanOptionalAction,
                                default=argparse.SUPPRESS, help=f"{help_text} (default: {shown})")
            if options.false_alias:
                parser.add_argument(options.false_alias, dest=flag.name, action="store_false",
                                    default=argparse.SUPPRESS,
                                    help=f"the same as --no-{name[2:]}")
            continue
        parse, format, choices = _codec(flag.field, flag.annotation)
        if default is not None and default != () and default != {}:
            shown = (" ".join(f"{name} {format(item)}" for item in default)
                     if options.repeated else format(default))
            help_text += f" (default: {shown})".replace("%", "%%")
        parser.add_argument(name, dest=flag.name, type=parse, choices=choices,
                            action="append" if options.repeated else "store",
                            default=argparse.SUPPRESS, help=help_text,
                            metavar=options.metavar or (
                                None if choices else flag.name.upper()))


def with_flags(config: Any, **values: Any) -> Any:
    """``config`` with the fields that the flags named in ``values`` set replaced (flag
    names written as field names: ``epochs``, or a :func:`nested` flag such as
    ``lambdamart_rounds``, which replaces a field of a template).

    Raises:
      TypeError: a name is not a flag of the config's class.
    """
    by_name = {flag.name: flag for flag in config_flags(type(config))}
    unknown = sorted(set(values) - set(by_name))
    if unknown:
        raise TypeError(f"{type(config).__name__} has no flags {unknown}.")
    top: Dict[str, Any] = {}
    inner: Dict[str, Dict[str, Any]] = {}
    for name, value in values.items():
        path = by_name[name].path
        if len(path) == 1:
            top[path[0]] = value
        else:
            inner.setdefault(path[0], {})[path[1]] = value
    for outer, fields in inner.items():
        top[outer] = dataclasses.replace(getattr(config, outer), **fields)
    return dataclasses.replace(config, **top)


def config_from_args(config_class: Type[Any], args: argparse.Namespace, **overrides: Any) -> Any:
    """The ``config_class`` of the parsed flags (fields without a flag given keep their
    defaults; a template field is its default template with its flags' fields
    replaced), with the fields ``overrides`` on top; other attributes of ``args`` are
    ignored."""
    values = {}
    for flag in config_flags(config_class):
        if hasattr(args, flag.name):
            value = getattr(args, flag.name)
            values[flag.name] = tuple(value) if _options(flag.field).repeated else value
    return dataclasses.replace(with_flags(config_class(), **values), **overrides)


def _get(config: Any, path: Sequence[str]) -> Any:
    for name in path:
        config = getattr(config, name)
    return config


def config_to_argv(config: Any, exclude: Sequence[str] = ()) -> List[str]:
    """The flags that give ``config`` back through :func:`config_from_args`: one for each
    field (but ``exclude``; of a template field, each flagged field) whose value differs
    from the class's default.

    Raises:
      ValueError: a field is None where its default is not (no flag says None), or a
        template's field without a flag differs from its default.
    """
    config_class = type(config)
    defaults = config_class()
    flags = config_flags(config_class, exclude)
    argv: List[str] = []
    for flag in flags:
        value = _get(config, flag.path)
        if value == _get(defaults, flag.path):
            continue
        name = flag_name(flag.name)
        if _is_bool(flag.annotation):
            argv.append(name if value else "--no-" + name[2:])
            continue
        if value is None:
            raise ValueError(f"`{'.'.join(flag.path)}` is None, which no flag can say (its "
                             f"default is {_get(defaults, flag.path)!r}).")
        _, format, _ = _codec(flag.field, flag.annotation)
        if _options(flag.field).repeated:
            for item in value:
                argv += [name, format(item)]
        else:
            argv += [name, format(value)]
    for field in dataclasses.fields(config_class):
        if field.name in exclude or not _is_template(field):
            continue
        template = getattr(config, field.name)
        flagged = [flag.path[1] for flag in flags if flag.path[0] == field.name]
        reachable = dataclasses.replace(getattr(defaults, field.name),
                                        **{name: getattr(template, name) for name in flagged})
        others = [f.name for f in dataclasses.fields(template)
                  if getattr(template, f.name) != getattr(reachable, f.name)]
        if others:
            raise ValueError(f"`{field.name}` sets {others}, which no flag can say (its flags "
                             f"set {flagged}).")
    return argv
