"""`dataclass`, `field`, `replace` and `asdict` as leslie uses them, without importing `dataclasses`.

`import dataclasses` imports `inspect` (and with it `ast`, `dis`, `tokenize`, `enum`...): about 15 ms, a
tenth of a read command's budget, spent before any work. leslie uses a small part of it: `frozen`, `slots`,
defaults, `field(default_factory=...)`, `ClassVar` annotations left out, `__eq__`, `__repr__`, the hash of
a frozen class, `__match_args__`, `replace` and `asdict`. This module generates exactly those the way
`dataclasses` does (source text compiled once per class), and `tests/test_record.py` holds the two side by
side.

For the type checker these names *are* the standard library's (the `TYPE_CHECKING` branch at the end), so
mypy checks every constructor call, field and `replace` as it would for a real dataclass. Anything beyond the
subset (`order`, `kw_only`, `field(init=False)`, a record inheriting fields...) is refused when the class is
defined, never silently approximated.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing `typing` costs what this module saves
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

FIELDS = "__record_fields__"  # the class attribute naming a record's fields, in order


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a frozen record (as `dataclasses.FrozenInstanceError`)."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Any = _Missing()


class _Field:
    __slots__ = ("default", "default_factory")

    def __init__(self, default: Any, default_factory: Any) -> None:
        self.default = default
        self.default_factory = default_factory


def _field(*, default: Any = _MISSING, default_factory: Any = _MISSING) -> Any:
    """A field's default value or factory (the only options leslie uses)."""
    if default is not _MISSING and default_factory is not _MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return _Field(default, default_factory)


def _is_classvar(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return isinstance(text, str) and (text.startswith(("ClassVar", "typing.ClassVar")))


def _frozen_setattr(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _slots_getstate(self: object) -> list[object]:
    return [getattr(self, name) for name in getattr(type(self), FIELDS)]


def _slots_setstate(self: object, state: list[object]) -> None:
    for name, value in zip(getattr(type(self), FIELDS), state, strict=True):
        object.__setattr__(self, name, value)


def _init_source(cls: type, names: list[str], frozen: bool, slots: bool,
                 namespace: dict[str, Any]) -> str:
    """`__init__`'s text; defaults and factories go into `namespace`, and leave the class as dataclasses does."""
    params: list[str] = []
    body: list[str] = []
    seen_default = False
    for name in names:
        declared = cls.__dict__.get(name, _MISSING)
        spec = declared if isinstance(declared, _Field) else _Field(declared, _MISSING)
        value = name
        if spec.default_factory is not _MISSING:
            namespace[f"_factory_{name}"] = spec.default_factory
            params.append(f"{name}=_MISSING")
            value = f"_factory_{name}() if {name} is _MISSING else {name}"
        elif spec.default is not _MISSING:
            if isinstance(spec.default, list | dict | set):
                raise ValueError(f"mutable default {type(spec.default)} for field {name} is not allowed: "
                                 "use default_factory")
            namespace[f"_default_{name}"] = spec.default
            params.append(f"{name}=_default_{name}")
        elif seen_default:
            raise TypeError(f"non-default argument {name!r} follows default argument")
        else:
            params.append(name)
        seen_default = seen_default or spec.default is not _MISSING or spec.default_factory is not _MISSING
        body.append(f"_setattr(self, {name!r}, {value})" if frozen else f"self.{name} = {value}")
        if isinstance(declared, _Field) and not slots and spec.default is not _MISSING:
            setattr(cls, name, spec.default)  # as dataclasses leaves it: the class attribute is the default
        elif declared is not _MISSING and (slots or isinstance(declared, _Field)):
            delattr(cls, name)
    return f"def __init__(self, {', '.join(params)}):\n    " + ("\n    ".join(body) or "pass") + "\n"


def _methods_source(names: list[str]) -> str:
    """`__eq__`, `__hash__` and `__repr__`: the fields compared, hashed and shown in order."""
    values = "".join(f"self.{name}, " for name in names)
    shown = " + ', ' + ".join(f"'{name}=' + repr(self.{name})" for name in names) or "''"
    return ("def __eq__(self, other):\n"
            "    if other.__class__ is self.__class__:\n"
            f"        return ({values}) == ({values.replace('self.', 'other.')})\n"
            "    return NotImplemented\n"
            "def __hash__(self):\n"
            f"    return hash(({values}))\n"
            "def __repr__(self):\n"
            f"    return self.__class__.__qualname__ + '(' + {shown} + ')'\n")


def _first_use(cls: type, name: str, source: str, namespace: dict[str, Any], generated: list[str]) -> Any:
    """A stand-in for generated method `name` that compiles all of `generated` at its first call, sets them on
    the class and calls the real one. Compiling a record's methods costs about a millisecond, and a command
    imports many records it never makes (the four of `config.toml` on every read): paid when one is made."""

    def stand_in(self: object, *args: Any, **kwargs: Any) -> Any:
        if "__init__" not in namespace:  # text built by `_build` from the field names
            exec(compile(source, f"<record {cls.__qualname__}>", "exec"), namespace)
            for method in generated:
                namespace[method].__qualname__ = f"{cls.__qualname__}.{method}"
                setattr(cls, method, namespace[method])
        return namespace[name](self, *args, **kwargs)

    stand_in.__qualname__ = f"{cls.__qualname__}.{name}"
    return stand_in


def _build(cls: type, frozen: bool, slots: bool) -> type:
    for base in cls.__mro__[1:]:
        if FIELDS in base.__dict__:
            raise TypeError(f"{cls.__name__}: a record inheriting a record's fields is not supported")
    # The class's own annotations (not `inspect.get_annotations`: importing `inspect` is what this avoids).
    own = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    names = [name for name, annotation in own.items() if not _is_classvar(annotation)]
    namespace: dict[str, Any] = {"_MISSING": _MISSING, "_setattr": object.__setattr__}
    source = _init_source(cls, names, frozen, slots, namespace) + _methods_source(names)
    if slots:
        attributes = {key: value for key, value in cls.__dict__.items() if key not in ("__dict__", "__weakref__")}
        attributes["__slots__"] = tuple(names)
        qualname = cls.__qualname__
        cls = type(cls)(cls.__name__, cls.__bases__, attributes)
        cls.__qualname__ = qualname
    # A method the class defines itself is kept, as dataclasses does; the others are compiled at first use.
    generated = [name for name in ("__init__", "__eq__", "__repr__") if name not in cls.__dict__]
    if frozen:
        generated.append("__hash__")
    for name in generated:
        setattr(cls, name, _first_use(cls, name, source, namespace, generated))
    if frozen and slots:  # copy and pickle set a slotted object's state with setattr: not on a frozen one
        setattr(cls, "__getstate__", _slots_getstate)  # noqa: B010 (mypy refuses the attribute form)
        setattr(cls, "__setstate__", _slots_setstate)  # noqa: B010
    if frozen:
        cls.__setattr__ = _frozen_setattr  # type: ignore[method-assign,assignment]
        cls.__delattr__ = _frozen_delattr  # type: ignore[method-assign,assignment]
    elif cls.__dict__.get("__hash__") is None:
        cls.__hash__ = None  # type: ignore[assignment]  # mutable and compared by value: unhashable
    setattr(cls, FIELDS, tuple(names))
    if "__match_args__" not in cls.__dict__:
        setattr(cls, "__match_args__", tuple(names))  # noqa: B010 (mypy refuses the attribute form)
    return cls


def _dataclass(cls: type | None = None, /, *, frozen: bool = False, slots: bool = False) -> Any:
    """The class with the generated methods; `@dataclass`, `@dataclass(frozen=True, slots=True)`."""

    def wrap(cls: type) -> type:
        return _build(cls, frozen, slots)

    return wrap if cls is None else wrap(cls)


def _fields(instance: object) -> tuple[str, ...]:
    names: tuple[str, ...] | None = getattr(type(instance), FIELDS, None)
    if names is None:
        raise TypeError(f"{type(instance).__name__} is not a record")
    return names


def _replace(instance: Any, /, **changes: Any) -> Any:
    """A new record like `instance` with `changes` applied (as `dataclasses.replace`)."""
    names = _fields(instance)
    for name in changes:
        if name not in names:
            raise TypeError(f"{type(instance).__name__}.__init__() got an unexpected keyword argument {name!r}")
    return type(instance)(**{name: changes[name] if name in changes else getattr(instance, name)
                             for name in names})


def _copy(value: Any) -> Any:
    if getattr(type(value), FIELDS, None) is not None:
        return _asdict(value)
    if isinstance(value, tuple | list):
        return type(value)(_copy(item) for item in value)
    if isinstance(value, dict):
        return type(value)((_copy(key), _copy(item)) for key, item in value.items())
    return value


def _asdict(instance: Any) -> dict[str, Any]:
    """The record's fields as a dict, records and containers in it copied too (as `dataclasses.asdict`)."""
    return {name: _copy(getattr(instance, name)) for name in _fields(instance)}


if TYPE_CHECKING:
    # Explicit re-exports (`X as X`): to mypy these are the standard library's.
    from dataclasses import asdict as asdict  # noqa: PLC0414
    from dataclasses import dataclass as dataclass  # noqa: PLC0414
    from dataclasses import field as field  # noqa: PLC0414
    from dataclasses import replace as replace  # noqa: PLC0414
else:
    dataclass: Callable[..., Any] = _dataclass
    field = _field
    replace = _replace
    asdict = _asdict
