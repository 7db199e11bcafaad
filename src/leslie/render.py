"""The one Jinja environment factory, and the lxml check that every rendered XML block must pass.

Jinja2 and lxml are imported inside the functions: the hook path imports this module's callers but must
not pay for either unless it really renders.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leslie.errors import UsageError

if TYPE_CHECKING:
    import jinja2
    from lxml import etree

# Markupsafe escapes & < > " ' but leaves TAB, LF and CR alone, and an XML parser folds those to spaces in
# attribute values; character references keep them exact, so every text round-trips through the XML.
_WHITESPACE_REFS = str.maketrans({"\t": "&#9;", "\n": "&#10;", "\r": "&#13;"})


def _finalize_xml(eval_ctx: Any, value: Any) -> Any:
    """Escape every `{{ value }}` of an autoescaped template so it is safe even inside an attribute."""
    from markupsafe import Markup, escape

    if not eval_ctx.autoescape or isinstance(value, Markup):
        return value
    return Markup(str(escape(value)).translate(_WHITESPACE_REFS))


def _xml_text(value: Any) -> Any:
    """Filter for element text: escaped, newlines and tabs kept literal (readable), CR as a reference."""
    from markupsafe import Markup, escape

    return Markup(str(escape(value)).replace("\r", "&#13;"))


def jinja_environment(override_dir: Path | None = None, *, autoescape_xml: bool = True) -> jinja2.Environment:
    """Templates from `override_dir` (a repo's `.leslie/templates/`) first, then the packaged ones.

    Strict undefined so a typo in a template fails loudly; XML autoescaping for `.xml.j2` templates, with
    TAB/LF/CR written as character references so attribute values survive parsing unchanged; the
    `xml_text` filter for multi-line element text.
    """
    import jinja2

    loaders: list[jinja2.BaseLoader] = []
    if override_dir is not None and override_dir.is_dir():
        loaders.append(jinja2.FileSystemLoader(str(override_dir)))
    loaders.append(jinja2.PackageLoader("leslie", "templates"))
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        autoescape=jinja2.select_autoescape(enabled_extensions=("xml.j2", "xml"), default_for_string=False,
                                            default=False) if autoescape_xml else False,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=jinja2.pass_eval_context(_finalize_xml) if autoescape_xml else None,
    )
    env.filters["xml_text"] = _xml_text
    return env


def template_label(name: str, override_dir: Path | None, root: Path | None = None) -> str:
    """How errors name a template: the override's path (relative to `root`) if one exists, else packaged."""
    if override_dir is not None and (override_dir / name).is_file():
        path = override_dir / name
        try:
            return path.relative_to(root).as_posix() if root is not None else str(path)
        except ValueError:
            return str(path)
    return f"{name} (packaged)"


@lru_cache(maxsize=8)
def cached_environment(override_dir: Path | None) -> jinja2.Environment:
    """The environment of `jinja_environment(override_dir)`, made once per process."""
    # One environment per folder, so a long-running process (watch, the ACP proxy) compiles a template once;
    # Jinja's auto_reload still notices an edited override.
    return jinja_environment(override_dir)


def render_template(name: str, variables: dict[str, Any], *, override_dir: Path | None = None,
                    label: str | None = None) -> str:
    """Render template `name`; a template that fails to load or render is a UsageError naming it."""
    import jinja2

    # Keyed on whether this template has an override now: Jinja's cache would keep serving the packaged
    # template after an override appears, since only the packaged file's mtime is checked for it.
    has_override = override_dir is not None and (override_dir / name).is_file()
    env = cached_environment(override_dir if has_override else None)
    try:
        return env.get_template(name).render(**variables)
    except jinja2.TemplateSyntaxError as exc:
        raise UsageError(f"template {label or name} is invalid: {exc.message} (line {exc.lineno})") from None
    except jinja2.TemplateError as exc:
        raise UsageError(f"template {label or name} failed to render: {exc}") from None


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
