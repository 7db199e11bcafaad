"""The one helper that makes text safe to show on a terminal: `visible`.

Repositories come from git and are untrusted: a thread title, a file name, a session file or a hook command
may hold ESC (`\\x1b]52;c;...\\x07` writes the clipboard, `\\x1b[2J` clears the screen), C1 controls (U+009B is
a CSI of its own), a carriage return that overwrites what came before, or bidi overrides and zero-width
characters that make text read differently from what it is. Every text from the repository or its state that
reaches a person passes through `visible` once, where it is printed (docs/security.md, "Terminal output").

It sits below every layer (it imports nothing) so that the library's own human texts (`leslie trust`'s
listing, a note naming a template) use the same rule as the commands that print them.
"""

from __future__ import annotations

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str, *, lines: bool = False, backslashes: bool = False) -> str:
    """`text` with every character that could act on a terminal, or hide or disguise what it says, shown as
    an escape: `\\t`, `\\n`, `\\r`, `\\xHH`, `\\uHHHH` or `\\UHHHHHHHH`.

    Escaped is every character Python does not call printable (`str.isprintable`): the C0 controls (ESC
    among them), DEL, the C1 controls, format characters (bidi embeddings, overrides and isolates
    U+202A-U+202E and U+2066-U+2069, zero-width characters U+200B-U+200F, U+FEFF), the line and paragraph
    separators U+2028/U+2029, spaces other than U+0020, surrogates, private-use and unassigned code points.

    `lines=True` keeps line feeds (text printed as several lines: a message, a listing). By default a
    backslash stays as it is, so escaping twice changes nothing (a message that quotes a value with `repr`
    is shown as written); `backslashes=True` doubles it, so what is shown is unambiguous (`leslie trust`'s
    listing, `leslie list --plain`'s fields, which `cli.list_view.unescape_field` reads back).
    """
    if text.isprintable() and not (backslashes and "\\" in text):  # the common case, in C
        return text
    if lines and "\n" in text:
        return "\n".join(visible(line, backslashes=backslashes) for line in text.split("\n"))
    return "".join(("\\\\" if backslashes and char == "\\" else char) if char.isprintable() else _escape(char)
                   for char in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a JSON string writes a code point past the BMP as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


_PRINTABLE_ASCII = bytes(range(0x20, 0x7F)) + b"\n"


def visible_json(document: str) -> str:
    """`document`, JSON text from `json.dumps(ensure_ascii=False)`, with every character `visible` escapes
    written as a JSON `\\uXXXX` escape (line feeds between values aside): the same data once parsed, and nothing
    that acts on a terminal. `json.dumps` escapes the C0 controls itself, not DEL, the C1 controls or bidi and
    zero-width characters; outside its strings there is nothing but line feeds and spaces to leave alone."""
    if document.isascii():  # a flag, not a scan: most documents
        if not document.encode("ascii").translate(None, _PRINTABLE_ASCII):  # in C: only printables and LF
            return document
    elif all(line.isprintable() for line in document.split("\n")):  # the common case otherwise, in C
        return document
    return "".join(char if char == "\n" or char.isprintable() else _json_escape(char) for char in document)
