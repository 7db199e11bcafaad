"""The one Jinja environment factory, and the lxml check that every rendered XML block must pass."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from leslie.errors import UsageError

if TYPE_CHECKING:
    import jinja2


def jinja_environment(override_dir: Path | None = None, *, autoescape_xml: bool = True) -> jinja2.Environment:
    """Templates from `override_dir` (a repo's `.leslie/templates/`) first, then the packaged ones.

    Strict undefined so a typo in a template fails loudly; XML autoescaping for `.xml.j2` templates.
    """
    import jinja2

    loaders: list[jinja2.BaseLoader] = []
    if override_dir is not None and override_dir.is_dir():
        loaders.append(jinja2.FileSystemLoader(str(override_dir)))
    loaders.append(jinja2.PackageLoader("leslie", "templates"))
    return jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        autoescape=jinja2.select_autoescape(enabled_extensions=("xml.j2", "xml")) if autoescape_xml else False,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def check_xml(text: str, template_name: str) -> None:
    """Parse `text` with lxml (no entities, no network); malformed output is a UsageError naming the template."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        etree.fromstring(text.encode("utf-8"), parser)
    except etree.XMLSyntaxError as exc:
        raise UsageError(f"template {template_name} rendered malformed XML: {exc}") from None
