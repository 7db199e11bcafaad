"""Jinja2's immutable sandbox, with limits on what a template may make leslie allocate or compute.

Every template renders here, packaged ones too (`leslie.context.render.jinja_environment` is the only factory). The
sandbox refuses attributes that lead out of the template (`__globals__`, `__class__`, `_TemplateReference__…`)
and calls of unsafe callables; on top of it:

- strings, lists and numbers a template builds are capped before they are built: `*`, `+`, `%` and `**`
  (intercepted binary operators), `~` (concatenation, through our code generator), calls and filters
  (arguments checked, and the few that multiply their input estimated first), `{{ value }}` output, and
  `str.format` widths. `range` is capped at `MAX_RANGE` items by Jinja itself;
- in a process's main thread, a render gets at most `CPU_SECONDS` of CPU time and `MEMORY_BUDGET` bytes of
  address space more than it started with (a loop nest or an allocation the caps above did not foresee ends
  in a clear error, never in a hung hook or an exhausted machine).

Imported only by `leslie.context.render`, inside the functions that render: it imports Jinja2.
"""

from __future__ import annotations

import operator
import os
import re
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import wraps
from typing import Any

import jinja2
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.nodes import Concat
from jinja2.runtime import markup_join, str_join
from jinja2.sandbox import MAX_RANGE, ImmutableSandboxedEnvironment

from leslie.context import TEMPLATE_DATA, TEMPLATES, trust

MAX_CHARS = 1 << 20  # characters (or bytes) of one value a template builds
MAX_ITEMS = MAX_RANGE  # items of one list a template builds
MAX_INT_BITS = 1 << 14  # about 4,900 decimal digits
MAX_OUTPUT = 4 << 20  # characters one render may produce
CPU_SECONDS = 2.0  # CPU time of one render (a legitimate one takes milliseconds)
MEMORY_BUDGET = 256 << 20  # bytes of address space one render may add (main thread, Linux)
_DIGITS = re.compile(r"\d+")
_PERCENT_FIELD = re.compile(r"%(?:\([^)]*\))?[-#0 +]*((?:\d+|\*)?(?:\.(?:\d+|\*))?)")  # width.precision
_FORMAT_FIELD = re.compile(r"\{[^{}]*\}")


class RenderLimitError(Exception):
    """A render ran out of CPU time (raised from the timer's signal handler)."""


def _too_big(what: str, limit: int, unit: str) -> SecurityError:
    return SecurityError(f"{what} would exceed the sandbox's limit of {limit} {unit}")


def weight(value: Any, depth: int = 0) -> int:
    """About how many characters `value` takes as text; stops counting once past MAX_CHARS."""
    if isinstance(value, str | bytes | bytearray):
        return len(value)
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, int):
        return value.bit_length() // 3
    if isinstance(value, Mapping):
        value = [item for pair in value.items() for item in pair] if depth < 3 else value
    if isinstance(value, list | tuple | set | frozenset):
        total = len(value)
        if depth >= 3:
            return total
        for item in value:
            total += weight(item, depth + 1)
            if total > MAX_CHARS:
                break
        return total
    return 0


def _check_weight(value: Any, what: str) -> Any:
    if weight(value) > MAX_CHARS:
        raise _too_big(what, MAX_CHARS, "characters")
    return value


def _check_int(value: Any, what: str) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_CHARS:
        raise SecurityError(f"{what}: a number beyond ±{MAX_CHARS} is refused by the sandbox")


def _check_repeat(seq: Any, times: Any) -> None:
    if not isinstance(times, int) or isinstance(times, bool) or times <= 1:
        return
    if isinstance(seq, list | tuple) and len(seq) * times > MAX_ITEMS:
        raise _too_big("a repeated list", MAX_ITEMS, "items")
    if weight(seq) * times > MAX_CHARS:
        raise _too_big("a repeated value", MAX_CHARS, "characters")


def _check_format(spec: str, args: Any, fields: re.Pattern[str]) -> None:
    """`%` and `str.format` widths and precisions (`%99999999s`, `{:>99999999}`) allocate that much."""
    for field in fields.findall(spec):
        for number in _DIGITS.findall(field):
            if len(number) > 7 or int(number) > MAX_CHARS:
                raise _too_big("a formatted width", MAX_CHARS, "characters")
    values = args if isinstance(args, tuple | list) else list(args.values()) if isinstance(args, Mapping) else [args]
    for value in values:
        _check_int(value, "formatting")  # `%*s` takes its width from the arguments


def _checked_binop(op: str, left: Any, right: Any) -> Any:
    if op == "*":
        _check_repeat(left, right)
        _check_repeat(right, left)
        if isinstance(left, int) and isinstance(right, int) and left.bit_length() + right.bit_length() > MAX_INT_BITS:
            raise _too_big("a product", MAX_INT_BITS, "bits")
        return operator.mul(left, right)
    if op == "**":
        if isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0 \
                and left.bit_length() * right > MAX_INT_BITS:
            raise _too_big("a power", MAX_INT_BITS, "bits")
        return operator.pow(left, right)
    if op == "+":
        if not isinstance(left, int | float) and weight(left) + weight(right) > MAX_CHARS:
            raise _too_big("a sum", MAX_CHARS, "characters")
        return operator.add(left, right)
    # op == "%"
    if isinstance(left, str):
        _check_format(left, right, _PERCENT_FIELD)
    return operator.mod(left, right)


def _estimated_result(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """The size of what a multiplying string operation would return, before it runs (0: nothing to fear)."""
    name = getattr(func, "__name__", "")
    owner = getattr(func, "__self__", None)
    if isinstance(owner, str):  # a bound str method: `s.replace(...)`, `sep.join(...)`, `s.expandtabs(n)`
        args = (owner, *args)
    if name == "do_join" and args:  # the join filter: `items | join(sep)`
        sep = args[1] if len(args) > 1 else kwargs.get("d", "")
        items = args[0] if isinstance(args[0], list | tuple) else ()
        return weight(items) + len(str(sep)) * len(items)
    if not args or not isinstance(args[0], str):
        return 0
    text = args[0]
    if name == "do_format":  # the format filter: `"%s" | format(...)` is `%`
        _check_format(text, (*args[1:], *kwargs.values()), _PERCENT_FIELD)
        return 0
    if name in ("replace", "do_replace") and len(args) >= 3 and isinstance(args[1], str):
        old, new = args[1], str(args[2])
        count = text.count(old) if old else len(text) + 1
        return len(text) + count * max(0, len(new) - len(old))
    if name == "join" and len(args) >= 2 and isinstance(args[1], list | tuple):
        return weight(args[1]) + len(text) * len(args[1])
    if name in ("expandtabs", "do_indent"):
        width = args[1] if len(args) > 1 else kwargs.get("tabsize", kwargs.get("width", 8))
        lines = text.count("\t") if name == "expandtabs" else text.count("\n") + 1
        return len(text) + lines * (width if isinstance(width, int) else len(str(width)))
    return 0


def _checked_call(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], what: str, *,
                  target: Any = None, passed: int = 0) -> Any:
    """Call `func` (from a template) after checking its arguments; check what it returns. `target` is the
    callable the template named (when `func` wraps it); the first `passed` arguments are Jinja's own."""
    for value in (*args[passed:], *kwargs.values()):
        _check_int(value, what)
        _check_weight(value, f"an argument of {what}")
    if _estimated_result(target if target is not None else func, args[passed:], kwargs) > MAX_CHARS:
        raise _too_big(f"the result of {what}", MAX_CHARS, "characters")
    return _check_weight(func(*args, **kwargs), f"the result of {what}")


def _guarded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    # Filters that Jinja passes a context, eval context or environment get it as their first argument;
    # `wraps` keeps the marker Jinja reads, and the checks skip that argument.
    passed = 1 if hasattr(func, "jinja_pass_arg") else 0

    @wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        return _checked_call(func, args, kwargs, f"filter {name}", passed=passed)

    return guarded


class _CappedCodeGenerator(CodeGenerator):
    """Jinja's code generator, with `~` routed through the environment (which checks the sizes first)."""

    def visit_Concat(self, node: Concat, frame: Frame) -> None:
        if frame.eval_ctx.volatile:
            markup = "context.eval_ctx.volatile"
        else:
            markup = "True" if frame.eval_ctx.autoescape else "False"
        self.write(f"environment.checked_concat({markup}, (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class LeslieSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with leslie's size limits (see the module's docstring)."""

    code_generator_class = _CappedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # lipsum(n) makes text of any size, and no leslie template needs it.
        self.globals.pop("lipsum", None)
        self.filters = {name: _guarded_filter(name, f) for name, f in self.filters.items()}

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        """Jinja's check, with a fast answer for leslie's own template data (classes marked by
        `leslie.context.template_data`: NamedTuples of plain fields and methods). For them a public name is
        exactly what the full check allows (not internal, not a mutating method of a known mutable type),
        without its cost: a block with 50 references looks up about 1,500 attributes."""
        if getattr(type(obj), TEMPLATE_DATA, False) is True and not attr.startswith("_"):
            return True
        return bool(super().is_safe_attribute(obj, attr, value))

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        """`*`, `**`, `+` and `%`, refused when the result would be too large."""
        return _checked_binop(operator, left, right)

    def checked_concat(self, markup: bool, parts: tuple[Any, ...]) -> str:
        """`a ~ b ~ ...`, refused when the result would be too large."""
        if sum(weight(part) for part in parts) > MAX_CHARS:
            raise _too_big("a concatenation", MAX_CHARS, "characters")
        return markup_join(parts) if markup else str_join(parts)

    def call(__self, __context: jinja2.runtime.Context, __obj: Any, *args: Any,
             **kwargs: Any) -> Any:
        """A call from a template: the sandbox's checks, then leslie's limits."""
        if not __self.is_safe_callable(__obj):
            raise SecurityError(f"{__obj!r} is not safely callable")
        what = str(getattr(__obj, "__name__", type(__obj).__name__))
        return _checked_call(lambda *a, **k: __context.call(__obj, *a, **k), args, kwargs, what, target=__obj)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """`"...".format(...)`: the sandbox's formatter, after checking the widths it would pad to."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        spec = str(value.__self__)

        def checked(*args: Any, **kwargs: Any) -> str:
            _check_format(spec, [*args, *kwargs.values()], _FORMAT_FIELD)
            return _check_weight(wrapped(*args, **kwargs), "a formatted string")  # type: ignore[no-any-return]

        return checked


# -- loading --------------------------------------------------------------------------------------------

def _packaged(name: str) -> tuple[str, str, Callable[[], bool]] | None:
    path = os.path.join(TEMPLATES, name)
    try:
        with open(path, encoding="utf-8") as handle:  # leslie's own file, installed with it
            source = handle.read()
        mtime = os.path.getmtime(path)
    except OSError:
        return None

    def uptodate() -> bool:  # a development copy edited while a long-running process renders
        try:
            return os.path.getmtime(path) == mtime
        except OSError:
            return False

    return source, path, uptodate


class TemplateLoader(jinja2.BaseLoader):
    """Packaged templates, and a repository's approved overrides, read safely when asked for.

    For each name, includes and imports too: the repository's file of that name (one of the first
    `trust.MAX_TEMPLATES`) when it is a regular file of at most `trust.TEMPLATE_CAP` bytes, not reached through
    a link, whose SHA-256 the user approved
    (`approved`); else the packaged template of that name (the reason the override was not used is kept in
    `refused`); else TemplateNotFound. `used` holds the overrides that were loaded.
    """

    def __init__(self, templates_dir: str | None = None, approved: Mapping[str, str] | None = None) -> None:
        self.templates_dir = templates_dir
        self.names = set(trust.template_names(templates_dir)) if templates_dir is not None else set()
        self.approved = dict(approved or {})
        self.refused: dict[str, str] = {}
        self.used: dict[str, str] = {}

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str | None,
                                                                                   Callable[[], bool] | None]:
        """The source of `template` (see the class docstring)."""
        if not trust.is_template_name(template):
            raise jinja2.TemplateNotFound(template)
        if self.templates_dir is not None and template in self.names:
            override = trust.read_override(self.templates_dir, template)
            if override is not None:
                reason = override.verdict(self.approved)
                if reason is None and override.text is not None:
                    self.used[template] = override.path
                    # One loader per render: the file is not looked at again while this environment lives.
                    return override.text, override.path, lambda: True
                self.refused[template] = reason or "unreadable"
        packaged = _packaged(template)
        if packaged is None:
            why = self.refused.get(template)
            raise jinja2.TemplateNotFound(template if why is None else f"{template} (the override is {why})")
        return packaged


# -- the render limits ----------------------------------------------------------------------------------

def render_limited(template: jinja2.Template, variables: dict[str, Any]) -> str:
    """Render with the output cap, and the CPU and memory limits when this is the main thread."""
    with _limits():
        out: list[str] = []
        size = 0
        for chunk in template.generate(**variables):
            size += len(chunk)
            if size > MAX_OUTPUT:
                raise _too_big("the rendered text", MAX_OUTPUT, "characters")
            out.append(chunk)
        return "".join(out)


@contextmanager
def _limits() -> Iterator[None]:
    # Signals and process limits belong to the main thread: elsewhere (the ACP proxy's worker, watch's
    # observer) a render has the sandbox and the size caps only.
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return
    previous = signal.getsignal(signal.SIGVTALRM)
    if previous not in (signal.SIG_DFL, signal.SIG_IGN, None):  # someone else's timer: leave it alone
        yield
        return

    def out_of_time(signum: int, frame: object) -> None:
        raise RenderLimitError(f"took more than {CPU_SECONDS:g} s of CPU time")

    signal.signal(signal.SIGVTALRM, out_of_time)
    # Repeats every 0.1 s after the first: a handler swallowed by a template's `except` fires again.
    signal.setitimer(signal.ITIMER_VIRTUAL, CPU_SECONDS, 0.1)
    try:
        with _memory_budget():
            yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


@contextmanager
def _memory_budget() -> Iterator[None]:
    """Lower the address-space limit to what the process uses now plus MEMORY_BUDGET (Linux), so a huge
    allocation fails with MemoryError instead of exhausting the machine; restored afterwards."""
    limits = _lowered_limit()
    try:
        yield
    finally:
        if limits is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, limits)


def _lowered_limit() -> tuple[int, int] | None:
    """Set the lowered limit; the previous (soft, hard) limits, or None when nothing was changed."""
    try:
        import resource

        with open("/proc/self/statm", "rb") as handle:  # digits: no codec to look up
            in_use = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        budget = in_use + MEMORY_BUDGET
        if (soft != resource.RLIM_INFINITY and soft <= budget) or (hard != resource.RLIM_INFINITY and hard < budget):
            return None  # already limited at least as tightly
        resource.setrlimit(resource.RLIMIT_AS, (budget, hard))
    except (ImportError, OSError, ValueError, IndexError):
        return None
    return soft, hard
