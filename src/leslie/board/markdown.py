"""Markdown from a repository, as HTML that cannot run anything.

Two locks, either enough on its own: markdown-it-py with raw HTML disabled (a `<script>` in plan.md is text),
then nh3 (the ammonia sanitizer) with an allow-list of tags and attributes and of URL schemes, so a
`javascript:` link or an `onerror` attribute cannot come through even if the parser let one by.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

TAGS = {"a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "li", "ol", "p",
        "pre", "s", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul"}
# No `style` (the page's Content-Security-Policy allows no inline style), no `img` (it would load from elsewhere).
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}


@lru_cache(maxsize=1)
def _parser() -> Any:
    from markdown_it import MarkdownIt

    # commonmark with tables and strikethrough; "html": False makes raw HTML literal text, linkify stays off
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
        ["table", "strikethrough"])


def render_markdown(text: str) -> str:
    """Sanitized HTML for `text`: no raw HTML, no scripts or event handlers, links only to http(s)/mailto
    (opened without a referrer), images dropped (the page loads nothing from elsewhere)."""
    import nh3

    html = _parser().render(text)
    return nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, url_schemes=URL_SCHEMES,
                     link_rel="noopener noreferrer", strip_comments=True)
