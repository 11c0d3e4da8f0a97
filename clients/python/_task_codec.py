"""Python values to JSON and back, typed by annotations: a task's arguments and its return value.

JSON has no datetime, UUID or dataclass: they are written as ISO text, text and objects, and read back as
what the function's annotations say (`datetime`, `list[Order]`, `int | None`...). Unannotated values stay as
JSON gave them.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

__all__ = ["TaskArgumentError", "from_json", "to_json", "typed"]


class TaskArgumentError(ValueError):
    """A value that does not fit its annotation (or JSON)."""


def _encodable(value: object) -> object:
    """What `json.dumps` cannot write itself, as JSON values."""
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (uuid.UUID, Decimal)):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def to_json(value: object) -> str:
    """JSON text; TypeError or ValueError (NaN, a cycle) names what cannot be written."""
    return json.dumps(value, default=_encodable, allow_nan=False, ensure_ascii=False, separators=(",", ":"))


def from_json(text: str) -> Any:
    return json.loads(text)


_SCALARS: Mapping[type, Callable[[Any], Any]] = {
    datetime: datetime.fromisoformat,
    date: date.fromisoformat,
    time: time.fromisoformat,
    timedelta: lambda seconds: timedelta(seconds=seconds),
    uuid.UUID: uuid.UUID,
    Decimal: lambda text: Decimal(str(text)),
}


def typed(value: Any, hint: Any, where: str) -> Any:
    """`value` (from JSON) as the annotation `hint` says; TaskArgumentError, naming `where`, if it cannot."""
    try:
        return _typed(value, hint)
    except TaskArgumentError as exc:
        raise TaskArgumentError(f"{where}: {exc}") from None
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise TaskArgumentError(f"{where}: {value!r} is not a {_name(hint)} ({exc})") from None


def _typed(value: Any, hint: Any) -> Any:
    if hint is Any or hint is object or isinstance(hint, (str, typing.TypeVar)):
        return value
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _union(value, typing.get_args(hint))
    if origin is typing.Literal:
        if value not in typing.get_args(hint):
            raise TaskArgumentError(f"{value!r} is not one of {typing.get_args(hint)}")
        return value
    if origin is not None:
        return _generic(value, origin, typing.get_args(hint))
    if hint is None or hint is type(None):
        return _exact(value, type(None))
    return _typed_class(value, hint) if isinstance(hint, type) else value


def _typed_class(value: Any, hint: type) -> Any:
    if hint in _SCALARS:
        return value if isinstance(value, hint) else _SCALARS[hint](value)
    if issubclass(hint, enum.Enum):
        return hint(value)
    if dataclasses.is_dataclass(hint):
        return _dataclass(value, hint)
    if hint is float:
        return float(_exact(value, (int, float)))
    if hint in (bool, int, str):
        if hint is int and isinstance(value, bool):
            raise TaskArgumentError(f"{value!r} is not an int")
        return _exact(value, hint)
    return value


def _exact(value: Any, kinds: type | tuple[type, ...]) -> Any:
    if not isinstance(value, kinds):
        raise TaskArgumentError(f"{value!r} is not a {_name(kinds)}")
    return value


def _union(value: Any, members: Sequence[Any]) -> Any:
    if value is None and type(None) in members:
        return None
    for member in members:
        if member is type(None):
            continue
        try:
            return _typed(value, member)
        except (TaskArgumentError, TypeError, ValueError, ArithmeticError):
            continue
    raise TaskArgumentError(f"{value!r} is none of {', '.join(_name(m) for m in members)}")


def _generic(value: Any, origin: Any, args: Sequence[Any]) -> Any:
    item = args[0] if args else Any
    if origin in (list, Sequence, typing.Sequence, set, frozenset) or (
        isinstance(origin, type) and issubclass(origin, (list, set, frozenset))
    ):
        items = [_typed(element, item) for element in _exact(value, list)]
        return origin(items) if origin in (set, frozenset) else items
    if origin is tuple:
        elements = _exact(value, list)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_typed(element, args[0]) for element in elements)
        if args and len(args) != len(elements):
            raise TaskArgumentError(f"{value!r} does not have {len(args)} items")
        return tuple(
            _typed(element, hint)
            for element, hint in zip(elements, args or [Any] * len(elements), strict=True)
        )
    if origin in (dict, Mapping, typing.Mapping):
        values = args[1] if len(args) == 2 else Any
        keys = args[0] if args else Any
        return {_typed(k, keys): _typed(v, values) for k, v in _exact(value, dict).items()}
    return value


def _dataclass(value: Any, cls: type) -> Any:
    fields = _exact(value, dict)
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise TaskArgumentError(f"{cls.__name__} has no field {', '.join(unknown)}")
    return cls(
        **{name: typed(v, hints.get(name, Any), f"{cls.__name__}.{name}") for name, v in fields.items()}
    )


def _name(hint: Any) -> str:
    if isinstance(hint, tuple):
        return " or ".join(_name(h) for h in hint)
    return getattr(hint, "__name__", None) or str(hint)
