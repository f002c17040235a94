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
* anything else: the field's own ``parse`` and ``format`` (:func:`option`).

The help of a flag is the field's entry in the ``Attributes:`` section of the
class docstring (every field must have one) and its default.
:func:`add_config_flags` adds the flags to a parser, :func:`config_from_args`
builds the config from the parsed flags (a flag left out keeps the
dataclass's default), and :func:`config_to_argv` gives the flags of a config
(its fields that differ from the defaults): flags -> config -> flags
round-trips.

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


def add_config_flags(parser: argparse.ArgumentParser, config_class: type,
                     exclude: Sequence[str] = ()) -> None:
    """Adds a flag for every field of ``config_class`` but ``exclude``.

    Raises:
      ValueError: a field has no entry in the class docstring's ``Attributes:``.
      TypeError: a field's type has no flag and no ``parse``/``format``.
    """
    helps = field_help(config_class)
    hints = typing.get_type_hints(config_class)
    for field in dataclasses.fields(config_class):
        if field.name in exclude:
            continue
        if field.name not in helps:
            raise ValueError(f"{config_class.__name__}.{field.name} has no entry in the class "
                             "docstring's Attributes: section (it is the flag's help).")
        help_text = helps[field.name].replace("%", "%%")
        options = _options(field)
        annotation = hints[field.name]
        default = _default(field)
        name = flag_name(field.name)
        if _is_bool(annotation):
            parser.add_argument(name, action=argparse.BooleanOptionalAction,
                                default=argparse.SUPPRESS,
                                help=f"{help_text} (default: {name if default else '--no-' + name[2:]})")
            if options.false_alias:
                parser.add_argument(options.false_alias, dest=field.name, action="store_false",
                                    default=argparse.SUPPRESS,
                                    help=f"the same as --no-{name[2:]}")
            continue
        parse, format, choices = _codec(field, annotation)
        if default is not None and default != () and default != {}:
            shown = (" ".join(f"{name} {format(item)}" for item in default)
                     if options.repeated else format(default))
            help_text += f" (default: {shown})".replace("%", "%%")
        parser.add_argument(name, dest=field.name, type=parse, choices=choices,
                            action="append" if options.repeated else "store",
                            default=argparse.SUPPRESS, help=help_text,
                            metavar=options.metavar or (
                                None if choices else field.name.upper()))


def config_from_args(config_class: Type[Any], args: argparse.Namespace, **overrides: Any) -> Any:
    """The ``config_class`` of the parsed flags (fields without a flag given keep their
    defaults), with ``overrides`` on top; other attributes of ``args`` are ignored."""
    values = {}
    for field in dataclasses.fields(config_class):
        if hasattr(args, field.name):
            value = getattr(args, field.name)
            values[field.name] = tuple(value) if _options(field).repeated else value
    return config_class(**{**values, **overrides})


def config_to_argv(config: Any, exclude: Sequence[str] = ()) -> List[str]:
    """The flags that give ``config`` back through :func:`config_from_args`: one for each
    field (but ``exclude``) whose value differs from the class's default.

    Raises:
      ValueError: a field is None where its default is not (no flag says None).
    """
    config_class = type(config)
    hints = typing.get_type_hints(config_class)
    defaults = config_class()
    argv: List[str] = []
    for field in dataclasses.fields(config_class):
        value = getattr(config, field.name)
        if field.name in exclude or value == getattr(defaults, field.name):
            continue
        name = flag_name(field.name)
        annotation = hints[field.name]
        if _is_bool(annotation):
            argv.append(name if value else "--no-" + name[2:])
            continue
        if value is None:
            raise ValueError(f"`{field.name}` is None, which no flag can say (its default is "
                             f"{getattr(defaults, field.name)!r}).")
        _, format, _ = _codec(field, annotation)
        if _options(field).repeated:
            for item in value:
                argv += [name, format(item)]
        else:
            argv += [name, format(value)]
    return argv
