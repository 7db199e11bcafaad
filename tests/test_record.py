"""`leslie.store.record` side by side with the standard library's `dataclasses`, which mypy believes it is."""

from __future__ import annotations

import copy
import dataclasses
import subprocess
import sys
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leslie.store import record

MAKERS = {"dataclasses": dataclasses, "record": record}


def classes(lib: Any) -> dict[str, type]:
    """The same declarations, made with `lib` (the shapes leslie uses: frozen, slots, defaults, factories)."""

    @lib.dataclass(frozen=True)
    class Point:
        x: int
        label: str = "p"
        tags: dict[str, int] = lib.field(default_factory=dict)
        KIND: ClassVar[str] = "point"

        def doubled(self) -> int:
            return self.x * 2

    @lib.dataclass
    class Bag:
        items: list[Point] = lib.field(default_factory=list)
        note: str | None = None

    @lib.dataclass(slots=True)
    class Row:
        id: str
        when: int = 0

    @lib.dataclass(frozen=True, slots=True)
    class Pair:
        left: int
        right: tuple[int, ...] = ()

    @lib.dataclass
    class Empty:
        pass

    return {"Point": Point, "Bag": Bag, "Row": Row, "Pair": Pair, "Empty": Empty}


BOTH = [classes(dataclasses), classes(record)]


def same(check: Callable[[dict[str, type], Any], object]) -> None:
    """`check` gives the same answer (or raises the same exception type) with both libraries."""
    answers: list[object] = []
    for made, lib in zip(BOTH, (dataclasses, record), strict=True):
        try:
            answers.append(check(made, lib))
        except Exception as exc:
            answers.append(("raised", type(exc).__mro__[1] if type(exc).__name__ == "FrozenInstanceError"
                            else type(exc)))
    assert answers[0] == answers[1]


@given(x=st.integers(), label=st.text(max_size=5), tags=st.dictionaries(st.text(max_size=3), st.integers(),
                                                                         max_size=3))
def test_construction_equality_repr_and_replace_match(x: int, label: str, tags: dict[str, int]) -> None:
    same(lambda c, _: repr(c["Point"](x, label, tags)))
    same(lambda c, _: c["Point"](x) == c["Point"](x, "p", {}))
    same(lambda c, _: c["Point"](x, label) == c["Point"](x, label + "!"))
    same(lambda c, lib: repr(lib.replace(c["Point"](x, label, tags), label="q")))
    same(lambda c, lib: lib.asdict(c["Bag"]([c["Point"](x, label, tags)], "n")))
    same(lambda c, _: hash(c["Pair"](x, (x, 1))) == hash(c["Pair"](x, (x, 1))))
    same(lambda c, _: c["Point"](x).doubled())


def test_the_behaviour_leslie_relies_on_matches() -> None:
    same(lambda c, _: c["Point"].KIND)
    same(lambda c, _: c["Point"].__match_args__)
    same(lambda c, _: c["Point"](1) == (1, "p", {}))  # another type: not equal
    same(lambda c, _: c["Point"](1).tags is not c["Point"](1).tags)  # a fresh dict per instance
    same(lambda c, _: c["Bag"]().items is not c["Bag"]().items)
    same(lambda c, _: c["Bag"].__hash__ is None)  # mutable and compared by value: unhashable
    same(lambda c, _: hash(c["Bag"]()))
    same(lambda c, _: hash(c["Point"](1)))  # a dict field: unhashable even when frozen
    same(lambda c, _: setattr(c["Point"](1), "x", 2))
    same(lambda c, _: delattr(c["Point"](1), "x"))
    same(lambda c, _: setattr(c["Pair"](1), "left", 2))
    same(lambda c, _: (c["Row"]("a").__slots__, hasattr(c["Row"]("a"), "__dict__")))
    same(lambda c, _: c["Pair"].__slots__)
    same(lambda c, _: c["Row"].__qualname__.rsplit(".", 1)[-1])
    same(lambda c, _: repr(c["Empty"]()))
    same(lambda c, _: c["Empty"]() == c["Empty"]())
    same(lambda c, _: c["Point"]())  # a missing argument
    same(lambda c, _: c["Point"](1, label="a", colour="b"))  # an unknown one
    same(lambda c, lib: lib.replace(c["Point"](1), colour="b"))
    same(lambda c, lib: repr(lib.replace(c["Row"]("a", 3), id="b")))
    same(lambda c, lib: lib.asdict(c["Row"]("a", 3)))

    same(lambda c, _: repr(copy.copy(c["Pair"](1, (2, 3)))))  # a frozen, slotted record: state set past it
    same(lambda c, _: repr(copy.deepcopy(c["Point"](1, "a", {"k": 1}))))
    same(lambda c, _: repr(copy.deepcopy(c["Row"]("a", 2))))

    def mutate(c: dict[str, type], _: Any) -> object:
        row = c["Row"]("a")
        row.when = 5
        return row.when

    same(mutate)


def test_declarations_dataclasses_refuses_are_refused() -> None:
    for lib in MAKERS.values():
        with pytest.raises(ValueError, match="mutable default"):
            @lib.dataclass
            class Listy:
                items: list[int] = []  # noqa: RUF012

        with pytest.raises(TypeError, match="non-default argument"):
            @lib.dataclass
            class Order:
                a: int = 1
                b: int  # type: ignore[misc]

        with pytest.raises(ValueError, match="both default and default_factory"):
            lib.field(default=1, default_factory=list)


def test_what_leslie_does_not_use_is_refused_rather_than_approximated() -> None:
    @record.dataclass
    class Base:
        a: int

    with pytest.raises(TypeError, match="inheriting"):
        @record.dataclass
        class Child(Base):
            b: int

    with pytest.raises(TypeError):
        record.dataclass(order=True)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="not a record"):
        record.replace(object())


def test_importing_it_does_not_import_dataclasses_or_typing() -> None:
    code = "import sys, leslie.store.record; print(sorted({'dataclasses', 'typing', 'inspect'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
