"""The Jinja environment factories, the renderer of every template, and the lxml check of rendered XML.

Every template renders in Jinja2's immutable sandbox with leslie's limits (`leslie.context.sandbox`), packaged ones
too; the board's HTML pages are the one exception (see `html_environment`). A repository's override in
`.leslie/templates/` is used only when the user approved its content with `leslie trust` (`leslie.context.trust`);
otherwise it is ignored with one warning and the packaged template is used.

Jinja2 and lxml are imported inside the functions: the hook path imports this module's callers but must
not pay for either unless it really renders.
"""

from __future__ import annotations

import contextlib
import os
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

from leslie.errors import CorruptStateError, UsageError

if TYPE_CHECKING:
    import jinja2
    from lxml import etree

# Markupsafe escapes & < > " ' but leaves TAB, LF and CR alone, and an XML parser folds those to spaces in
# attribute values; character references keep them exact, so every text round-trips through the XML.
_WHITESPACE_REFS = str.maketrans({"\t": "&#9;", "\n": "&#10;", "\r": "&#13;"})


def _finalize(eval_ctx: Any, value: Any) -> Any:
    """Every `{{ value }}`: refused when too large to print (see `leslie.context.sandbox`); in an autoescaped
    template, escaped so it is safe even inside an attribute."""
    markup, escape, weight, max_chars = _finalize_parts or _load_finalize_parts()
    if (len(value) if value.__class__ is str else weight(value)) > max_chars:  # a str's weight is its length
        from jinja2.exceptions import SecurityError

        raise SecurityError(f"a printed value would exceed the sandbox's limit of {max_chars} characters")
    if not eval_ctx.autoescape or isinstance(value, markup):
        return value
    return markup(str(escape(value)).translate(_WHITESPACE_REFS))


# What `_finalize` needs, imported at its first call (not at this module's import: see the module docstring),
# and kept: it runs for every printed value, about 900 times for a block with 50 references.
_finalize_parts: tuple[Any, Any, Any, int] | None = None


def _load_finalize_parts() -> tuple[Any, Any, Any, int]:
    global _finalize_parts
    from markupsafe import Markup, escape

    from leslie.context.sandbox import MAX_CHARS, weight

    _finalize_parts = (Markup, escape, weight, MAX_CHARS)
    return _finalize_parts


# Element text needs far less than an attribute value: `&` and `<` always, `>` only where it would close a
# `]]>`, and CR as a reference (a parser turns a literal CR into LF). Quotes, `>` and TAB/LF stay literal, so
# the agent reads `key_ids=["2025"]`, not `key_ids=[&#34;2025&#34;]` (docs/context.md, "Text that reaches the
# XML", has the measurements behind this choice over CDATA).
def xml_element_text(text: str) -> str:
    """`text` escaped for XML element content with the fewest entities: decoding gives `text` back exactly."""
    # Chained replaces, `&` first: ten times faster than str.translate on a file-sized text.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace("\r", "&#13;").replace("]]>", "]]&gt;")


def _xml_text(value: Any) -> Any:
    """Filter for element text: minimally escaped (see `xml_element_text`), newlines and tabs literal."""
    from markupsafe import Markup

    if hasattr(value, "__html__"):  # already markup (a template's own): kept, but a CR must stay exact
        return Markup(str(value.__html__()).replace("\r", "&#13;"))
    return Markup(xml_element_text(str(value)))


def jinja_environment(loader: jinja2.BaseLoader | None = None, *, autoescape_xml: bool = True) -> jinja2.Environment:
    """The sandboxed environment every template renders in; `loader` defaults to the packaged templates.

    Strict undefined so a typo in a template fails loudly; XML autoescaping for `.xml.j2` templates, with
    TAB/LF/CR written as character references so attribute values survive parsing unchanged; the
    `xml_text` filter for multi-line element text.
    """
    import jinja2

    from leslie.context.sandbox import LeslieSandbox, TemplateLoader

    env = LeslieSandbox(
        loader=loader if loader is not None else TemplateLoader(),
        autoescape=jinja2.select_autoescape(enabled_extensions=("xml.j2", "xml"), default_for_string=False,
                                            default=False) if autoescape_xml else False,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=jinja2.pass_eval_context(_finalize),
    )
    env.filters["xml_text"] = _xml_text
    return env


def html_environment(templates_dir: str) -> jinja2.Environment:
    """The environment of leslie's own HTML templates in `templates_dir` (`leslie board`): autoescaped, strict
    undefined.

    Not sandboxed, on purpose: these templates ship with leslie and are never a repository's (a repository's
    text only ever arrives as escaped values), and the sandbox's per-value checks made a 1,000-thread page
    ten times slower (docs/benchmarks.md).
    """
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(templates_dir), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


@lru_cache(maxsize=1)
def packaged_environment() -> jinja2.Environment:
    """The environment of the packaged templates only, made once per process.

    Only this one is kept: it holds nothing a repository wrote. An environment that loads a repository's
    overrides is made for one render and dropped (a long-running process, such as `leslie watch` or the
    board, serves many renders).

    It compiles each template once per machine, not once per process: Jinja2's bytecode cache keeps the
    compiled templates in this user's cache folder (`templates/` in `machine.cache_folder()`), keyed by the
    template's name and the checksum of its source (a command that runs without the warm process would
    otherwise spend about 20 ms compiling the block's template).
    """
    env = jinja_environment()
    env.bytecode_cache = _bytecode_cache()
    return env


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Jinja2's file-system bytecode cache in this user's private cache folder; None where there is none.
    A damaged cache file is compiled again, and a cache that cannot be written (a full disk, a read-only
    home) leaves templates compiled in memory: the cache never makes a render fail."""
    import jinja2

    from leslie.store import machine

    base = machine.cache_folder()
    if base is None or not machine.private_folder(base):
        return None
    folder = os.path.join(base, "templates")
    if not machine.private_folder(folder):
        return None

    class Cache(jinja2.FileSystemBytecodeCache):
        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            try:
                super().load_bytecode(bucket)
            except Exception:  # cut short or garbled (Jinja2 checks its magic and checksum, not the pickle)
                bucket.reset()

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            with contextlib.suppress(OSError):
                super().dump_bytecode(bucket)

    return Cache(folder)


class Rendered(NamedTuple):
    """A rendered template and how errors name it: the override's path, or `<name> (packaged)`."""

    text: str
    label: str


def render_template(name: str, variables: dict[str, Any], *, root: str | os.PathLike[str] | None = None,
                    warnings: list[str] | None = None) -> Rendered:
    """Render template `name`: the approved override of the repository at `root`, else the packaged one.

    An override that is not approved (or changed since), or cannot be read safely, is ignored with one note
    added to `warnings` (a `TemplateOverrideWarning` when `warnings` is None). A template that fails to
    load or render, or that the sandbox stops, is a UsageError (exit 2) naming it.
    """
    import jinja2
    from jinja2.exceptions import SecurityError

    from leslie.context import trust
    from leslie.context.sandbox import RenderLimitError, TemplateLoader, render_limited

    notes: list[str] = []
    loader = None
    templates_dir = os.path.join(root, ".leslie", "templates") if root is not None else None
    if templates_dir is not None and trust.template_names(templates_dir):
        try:
            approved = trust.approved_templates(root) if root is not None else {}
        except CorruptStateError as exc:  # no approval can be read: none is assumed
            approved = {}
            notes.append(f"template overrides ignored: {exc.message}")
        loader = TemplateLoader(templates_dir, approved)
        env = jinja_environment(loader)
    else:
        env = packaged_environment()
    label = f"{name} (packaged)"
    try:
        template = env.get_template(name)
        label = _label(name, loader, root)
        return Rendered(render_limited(template, variables), label)
    except jinja2.TemplateSyntaxError as exc:
        raise UsageError(f"template {_label(name, loader, root)} is invalid: {exc.message} "
                         f"(line {exc.lineno})") from None
    except SecurityError as exc:
        raise UsageError(f"template {label} was stopped by the sandbox: {exc}") from None
    except jinja2.TemplateError as exc:
        raise UsageError(f"template {label} failed to render: {exc}") from None
    except (RenderLimitError, MemoryError, RecursionError) as exc:
        raise UsageError(f"template {label} was stopped: {_what(exc)}") from None
    except Exception as exc:  # a template can raise anything Python can (1/0, int('x'), ...): never exit 70
        raise UsageError(f"template {label} failed to render: {type(exc).__name__}: {exc}") from None
    finally:
        if loader is not None and name in loader.refused:
            notes.append(trust.ignored_note(_relative(loader.templates_dir, name, root), loader.refused[name]))
        report_notes(notes, warnings)


def _what(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "it needed more memory than a render may use"
    if isinstance(exc, RecursionError):
        return "it recursed too deeply"
    return str(exc)


def _relative(templates_dir: str | None, name: str, root: str | os.PathLike[str] | None) -> str:
    path = os.path.join(templates_dir or "", name)
    return os.path.relpath(path, root) if root is not None else path


def _label(name: str, loader: Any, root: str | os.PathLike[str] | None) -> str:
    if loader is not None and name in loader.used:
        return _relative(loader.templates_dir, name, root)
    return f"{name} (packaged)"


def override_notes(name: str, root: str | os.PathLike[str]) -> list[str]:
    """The notes `render_template(name, root=root)` would give about the overrides, without rendering (for a
    block served from a cache)."""
    from leslie.context import trust

    templates_dir = os.path.join(root, ".leslie", "templates")
    if not trust.template_names(templates_dir):
        return []
    notes = []
    try:
        approved = trust.approved_templates(root)
    except CorruptStateError as exc:
        approved = {}
        notes.append(f"template overrides ignored: {exc.message}")
    override = trust.read_override(templates_dir, name) if name in trust.template_names(templates_dir) else None
    reason = override.verdict(approved) if override is not None else None
    if reason is not None:
        notes.append(trust.ignored_note(_relative(templates_dir, name, root), reason))
    return notes


def report_notes(notes: list[str], warnings: list[str] | None) -> None:
    """Add `notes` to `warnings`, or issue each as a `TemplateOverrideWarning` when `warnings` is None."""
    if warnings is not None:
        warnings.extend(notes)
        return
    if notes:
        import warnings as python_warnings

        from leslie.context.trust import TemplateOverrideWarning

        for note in notes:
            python_warnings.warn(note, TemplateOverrideWarning, stacklevel=4)


def parse_xml(text: str, template_name: str) -> etree._Element:
    """Parse `text` with lxml (no entities, no network); malformed output is a UsageError naming the template."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        return etree.fromstring(text.encode("utf-8"), parser)
    except etree.XMLSyntaxError as exc:
        raise UsageError(f"template {template_name} rendered malformed XML: {exc}") from None


def check_xml(text: str, template_name: str) -> None:
    """Raise UsageError naming the template unless `text` is well-formed XML."""
    parse_xml(text, template_name)
