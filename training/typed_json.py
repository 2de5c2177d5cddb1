"""One reader and one writer between JSON and typed dataclasses.

A run folder's files (``config.json`` as a :class:`~training.config.TrainConfig`, each
checkpoint's ``NAME.json`` as a :class:`~training.checkpoints.Checkpoint`) and the settings that
``tune.py`` samples are read through :func:`from_json` and written through :func:`to_json`.

The reader checks every value against its field's type hint as it reads it: whole numbers,
finite numbers, strings, true or false, paths, one of a ``Literal``'s values, ``None`` where
the hint allows it, the first type of a union that reads the value (``int | Literal["auto"]``),
tuples (of any length, or of one fixed length), ``dict[K, V]`` and nested dataclasses; a bound
written into the hint is checked too (``Annotated[int, Range(0, 255)]``,
``Annotated[tuple[int, ...], Length(624)]``, ``Annotated[str, Pattern(...)]``). Anything
missing, unknown or out of bounds raises :class:`FieldError`, one sentence naming the file
and the field (a field marked :class:`Omittable` may be left out: it takes its default).
What one field cannot say alone, a dataclass checks in ``__post_init__``: its ``ValueError``
becomes a :class:`FieldError` naming the file and the object.

The same hints check values made in Python (:func:`check_fields`): the bounds written once
into a dataclass, such as :class:`~training.config.TrainConfig`'s, hold a command line, a
saved ``config.json`` and a config built in code alike.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Annotated, Any, Literal, TypeVar

from buttonup_env.game.records import shown

T = TypeVar("T")


class FieldError(ValueError):
    """A JSON value that is not what its dataclass field allows; the message is one sentence
    naming the file (or where the value came from) and the field."""


@dataclass(frozen=True)
class Range:
    """The bounds of a number field, both included (``high`` None: no upper bound)."""

    low: float
    high: float | None = None


@dataclass(frozen=True)
class Length:
    """The number of items a tuple field holds."""

    items: int


@dataclass(frozen=True)
class Omittable:
    """The field may be left out of the JSON object; it then takes its default."""


@dataclass(frozen=True)
class Pattern:
    """What a string field must look like (a regular expression it matches in full), and what
    that is, in words."""

    regex: str
    what: str


def key_shown(key: object) -> str:
    """A JSON object's key as a message names it: as it is when it is short, printable and
    without spaces, else as :func:`shown` writes it (a key read from a file can hold a newline
    or an escape code, which would forge a line of the message)."""
    if isinstance(key, str) and 0 < len(key) <= 60 and key.isprintable() and " " not in key:
        return key
    return shown(key, 40)


def read_json_file(path: Path) -> object:
    """The JSON in ``path``; :class:`FieldError` in one sentence when it is not JSON."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise FieldError(f"{path} is damaged ({error})") from None
    return parse_json(data, path)


def parse_json(data: bytes, source: Path | str) -> object:
    """The JSON in ``data`` (read from ``source``); :class:`FieldError` in one sentence naming
    ``source`` when it is not JSON."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else error
        raise FieldError(f"{source} is damaged ({reason})") from None


def from_json(cls: type[T], data: object, source: Path | str, where: str = "") -> T:
    """The dataclass ``cls`` from the JSON value ``data``, every field checked (see the
    module's docstring). ``source`` names the file in messages, ``where`` the object's place
    in it (``"resume.env"``; empty: the whole file)."""
    return _read(cls, data, Reader(source), where)


def value_from_json(cls: type, name: str, value: object, source: Path | str) -> Any:
    """The field ``name`` of the dataclass ``cls`` (dotted for a nested one:
    ``"opponents.perfect"``) read from the JSON value ``value``, checked as :func:`from_json`
    checks it."""
    *parents, last = name.split(".")
    for parent in parents:
        cls = type_hints(cls)[parent]
    hints = type_hints(cls)
    if last not in hints:
        raise FieldError(f"{source}: {name} is not a field of {cls.__name__}")
    return _read(hints[last], value, Reader(source), name)


def check_fields(value: Any, source: Path | str | None = None) -> None:
    """Every field of the dataclass ``value`` checked against its type hint and bounds, as
    :func:`from_json` checks a file's: :class:`FieldError` naming the field, as ``source``'s
    (``config.json: n_epochs is ...``), or with ``source`` None as the command-line flag that
    sets it (``--n-epochs is 0; it must be a whole number from 1 to 100``)."""
    _read(type(value), to_json(value), Reader(source), "")


def to_json(value: Any) -> Any:
    """``value`` (a dataclass, or what one holds) as JSON data: dataclasses and dicts as
    objects (a field marked :class:`Omittable` left out when it is None), tuples and lists as
    lists, paths as strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        hints = type_hints(type(value))
        return {
            f.name: to_json(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not (getattr(value, f.name) is None and _omittable(hints[f.name]))
        }
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [to_json(item) for item in value]
    if isinstance(value, PurePath):
        return str(value)
    return value


# --- the reader ------------------------------------------------------------------------------


class Reader:
    """The errors of one file's reading, each naming the file (``source``) and the field; with
    ``source`` None, the values of a command line, each named by its flag."""

    def __init__(self, source: Path | str | None) -> None:
        self.source = source

    def _named(self, field: str) -> str:
        if self.source is None:
            name, bracket, rest = field.partition("[")
            return "--" + name.replace("_", "-") + bracket + rest
        return f"{self.source}: {field or 'the file'}"

    def error(self, field: str, value: object, allowed: str) -> FieldError:
        return FieldError(f"{self._named(field)} is {shown(value, 40)}; {allowed}")

    def say(self, field: str, text: str) -> FieldError:
        return FieldError(f"{self._named(field)} {text}")


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    """The type hints of the dataclass ``cls``'s fields, bounds included."""
    return typing.get_type_hints(cls, include_extras=True)


def _span(bounds: Range | None) -> str:
    if bounds is None:
        return ""
    if bounds.high is None:
        return f" >= {_number(bounds.low)}"
    return f" from {_number(bounds.low)} to {_number(bounds.high)}"


def _number(value: float) -> str:
    """A bound as a message writes it: powers of two less one as such (2**32 - 1), other
    large whole numbers with thousands separators."""
    if isinstance(value, int) and value >= 2**32 - 1 and (value + 1) & value == 0:
        return f"2**{value.bit_length()} - 1"
    if isinstance(value, int) and value >= 10_000:
        return f"{value:,}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _kind(hint: Any) -> str:
    """What a value of the type ``hint`` is, in words (for the message of a union's value)."""
    if typing.get_origin(hint) is Literal:
        return " or ".join(map(repr, typing.get_args(hint)))
    words = {int: "a whole number", float: "a number", str: "a string", bool: "true or false"}
    return words.get(hint, f"a {getattr(hint, '__name__', hint)}")


@dataclass(frozen=True)
class Bounds:
    """The bounds a field's hint carries (``Annotated[int, Range(0, 9)]``), none by default."""

    range: Range | None = None
    length: int | None = None
    pattern: Pattern | None = None


def unpacked(hint: Any) -> tuple[Any, Bounds]:
    """The type of ``hint`` and the bounds written into it."""
    if typing.get_origin(hint) is not Annotated:
        return hint, Bounds()
    hint, *extras = typing.get_args(hint)
    found: dict[str, Any] = {}
    for extra in extras:
        if isinstance(extra, Range):
            found["range"] = extra
        elif isinstance(extra, Length):
            found["length"] = extra.items
        elif isinstance(extra, Pattern):
            found["pattern"] = extra
    return hint, Bounds(**found)


def _read(hint: Any, value: object, reader: Reader, field: str) -> Any:
    """``value`` read as the type ``hint`` (see :func:`from_json`)."""
    hint, bounds = unpacked(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _read_union(args, value, reader, field)
    if hint is Any:
        return value
    if hint is type(None):
        if value is not None:
            raise reader.error(field, value, "it must be null")
        return None
    if origin is Literal:
        if any(type(value) is type(a) and value == a for a in args):
            return value
        raise reader.error(field, value, f"it must be one of {', '.join(map(repr, args))}")
    if origin is tuple:
        return _read_tuple(args, bounds.length, value, reader, field)
    if origin is dict:
        if not isinstance(value, dict):
            raise reader.error(field, value, "it must be a JSON object")
        key_hint, item_hint = args
        items = {}
        for key, item in value.items():
            key = _read(key_hint, key, reader, f"a key of {field}")
            items[key] = _read(item_hint, item, reader, f"{field}.{key_shown(key)}")
        return items
    if dataclasses.is_dataclass(hint):
        return _read_dataclass(hint, value, reader, field)
    return _read_plain(hint, bounds, value, reader, field)


def _read_union(args: tuple[Any, ...], value: object, reader: Reader, field: str) -> Any:
    """``value`` read as the first type of the union ``args`` that reads it (``int |
    Literal["auto"]``); None where the union allows it."""
    if value is None and type(None) in args:
        return None
    options = [a for a in args if a is not type(None)]
    if len(options) == 1:
        return _read(options[0], value, reader, field)
    for option in options:
        try:
            return _read(option, value, reader, field)
        except FieldError:
            pass
    raise reader.error(field, value, f"it must be {' or '.join(map(_kind, options))}")


def _read_tuple(
    args: tuple[Any, ...], length: int | None, value: object, reader: Reader, field: str
) -> tuple[Any, ...]:
    """``value`` read as a tuple of the item types ``args`` (``(T, ...)``: of any length, or
    of ``length``)."""
    if not isinstance(value, list):
        raise reader.error(field, value, "it must be a list")
    if len(args) == 2 and args[1] is Ellipsis:
        hints = [args[0]] * len(value)
    else:
        hints, length = list(args), len(args)
    if length is not None and len(value) != length:
        raise reader.say(field, f"has {len(value)} items; it must have {length}")
    if all(h is Any for h in hints):  # checked where they are used
        return tuple(value)
    item, bounds = unpacked(args[0]) if args else (None, Bounds())
    if len(args) == 2 and args[1] is Ellipsis and _is_plain(item):
        # many items of one plain type (a generator's 624 words): each item checked by
        # _read_plain at once, and read again one by one only to name the item at fault
        try:
            return tuple(_read_plain(item, bounds, v, reader, field) for v in value)
        except FieldError:
            pass
    return tuple(
        _read(h, v, reader, f"{field}[{i}]")
        for i, (h, v) in enumerate(zip(hints, value, strict=True))
    )


def _is_plain(hint: Any) -> bool:
    """Whether :func:`_read` reads ``hint`` (its bounds taken off) with :func:`_read_plain`."""
    return hint in (bool, int, float, str) or (
        isinstance(hint, type) and issubclass(hint, PurePath)
    )


def _read_plain(hint: Any, bounds: Bounds, value: object, reader: Reader, field: str) -> Any:
    """``value`` read as true or false, a whole or finite number in ``bounds``, a string
    matching its pattern, or a path."""
    span = bounds.range
    if hint is bool:
        if not isinstance(value, bool):
            raise reader.error(field, value, "it must be true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int) or not _within(value, span):
            raise reader.error(field, value, f"it must be a whole number{_span(span)}")
        return value
    if hint is float:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not _within(value, span)
        ):
            raise reader.error(field, value, f"it must be a finite number{_span(span)}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise reader.error(field, value, "it must be a string")
        if bounds.pattern is not None and not re.fullmatch(bounds.pattern.regex, value):
            raise reader.error(field, value, f"it must be {bounds.pattern.what}")
        return value
    if isinstance(hint, type) and issubclass(hint, PurePath):
        if not isinstance(value, str):
            raise reader.error(field, value, "it must be a path, as a string")
        return hint(value)
    raise TypeError(f"{field}: cannot read the type {hint} from JSON")  # pragma: no cover


def _within(value: float, bounds: Range | None) -> bool:
    """Whether ``value`` is within ``bounds`` (None: any)."""
    if bounds is None:
        return True
    return bounds.low <= value and (bounds.high is None or value <= bounds.high)


def _omittable(hint: Any) -> bool:
    return typing.get_origin(hint) is Annotated and any(
        isinstance(extra, Omittable) for extra in typing.get_args(hint)[1:]
    )


def _read_dataclass(cls: Any, value: object, reader: Reader, where: str) -> Any:
    if not isinstance(value, dict):
        raise reader.error(where, value, "it must be a JSON object")
    hints = type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    prefix = f"{where}." if where else ""
    unknown = sorted(set(value) - set(names), key=str)
    if unknown:
        raise reader.say(f"{prefix}{key_shown(unknown[0])}", f"is not a field of {cls.__name__}")
    for name in names:
        if name not in value and not _omittable(hints[name]):
            raise reader.say(f"{prefix}{name}", "is missing")
    values = {
        name: _read(hints[name], value[name], reader, f"{prefix}{name}")
        for name in names
        if name in value
    }
    try:
        return cls(**values)
    except ValueError as error:
        raise FieldError(f"{reader.source}: {where or 'the file'}: {error}") from None
