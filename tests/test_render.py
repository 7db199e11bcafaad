"""render.py: the one sandboxed Jinja environment, approved overrides only, template limits, the lxml check."""

from __future__ import annotations

import os
import re
from pathlib import Path

import jinja2
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from lxml import etree

from leslie.context import trust
from leslie.context.block import Asset, RefContext
from leslie.context.loading import Inline
from leslie.context.render import check_xml, jinja_environment, packaged_environment, parse_xml, render_template
from leslie.context.sandbox import MAX_CHARS, TemplateLoader
from leslie.errors import UsageError

SRC = Path(__file__).parents[1] / "src" / "leslie"


def override(root: Path, name: str, text: str) -> Path:
    folder = root / ".leslie" / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def approve(root: Path) -> None:
    trust.grant(root, [], trust.template_overrides(root / ".leslie" / "templates"))


def test_the_environment_is_configured_in_one_place() -> None:
    offenders = [
        path.relative_to(SRC).as_posix()
        for path in SRC.rglob("*.py")
        if re.search(r"(jinja2\.(\w+\.)?(Environment|Template|FileSystemLoader)|(?<![\w.])(\w*Environment|"
                     r"FileSystemLoader))\(", path.read_text(encoding="utf-8"))
        and path.name not in ("render.py", "sandbox.py")
    ]
    assert offenders == []


def test_every_environment_is_the_immutable_sandbox() -> None:
    assert isinstance(jinja_environment(), ImmutableSandboxedEnvironment)
    assert isinstance(packaged_environment(), ImmutableSandboxedEnvironment)


def test_strict_undefined() -> None:
    env = jinja_environment()
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()


def test_xml_templates_are_escaped_and_attribute_safe() -> None:
    env = jinja_environment(jinja2.DictLoader({"t.xml.j2": '<x a="{{ v }}">{{ v }}|{{ v | xml_text }}</x>'}))
    value = 'q"\'<>&]]>\tTAB\nLF\rCR'
    text = env.get_template("t.xml.j2").render(v=value)
    root = etree.fromstring(text.encode())
    assert root.get("a") == value  # TAB, LF and CR survive attribute-value normalisation
    assert root.text == value + "|" + value
    assert "\nLF" in text  # xml_text keeps newlines readable in element text


def test_markdown_templates_are_not_escaped() -> None:
    env = jinja_environment(jinja2.DictLoader({"t.md.j2": "{{ v }}"}))
    assert env.get_template("t.md.j2").render(v="<a & b>\n") == "<a & b>\n"


# -- overrides: only approved ones ------------------------------------------------------------------------
def test_an_approved_override_wins_and_is_named(tmp_path: Path) -> None:
    override(tmp_path, "agents_md_block.md.j2", "mine {{ version }}")
    approve(tmp_path)
    notes: list[str] = []
    rendered = render_template("agents_md_block.md.j2", {"version": "9"}, root=tmp_path, warnings=notes)
    assert rendered == ("mine 9", ".leslie/templates/agents_md_block.md.j2") and notes == []


def test_an_unapproved_or_changed_override_is_ignored_with_one_note(tmp_path: Path) -> None:
    packaged = render_template("agents_md_block.md.j2", {"version": "9"}).text
    path = override(tmp_path, "agents_md_block.md.j2", "mine {{ version }}")
    notes: list[str] = []
    rendered = render_template("agents_md_block.md.j2", {"version": "9"}, root=tmp_path, warnings=notes)
    assert rendered == (packaged, "agents_md_block.md.j2 (packaged)")
    assert notes == ["template override .leslie/templates/agents_md_block.md.j2 ignored: not approved on this "
                     "machine (review it, then run `leslie trust`); the packaged template is used"]
    approve(tmp_path)
    path.write_text("changed {{ version }}", encoding="utf-8")
    notes.clear()
    assert render_template("agents_md_block.md.j2", {"version": "9"}, root=tmp_path, warnings=notes).text == packaged
    assert len(notes) == 1 and "changed since it was approved" in notes[0]


def test_without_a_warnings_list_the_note_is_a_python_warning(tmp_path: Path) -> None:
    override(tmp_path, "agents_md_block.md.j2", "mine")
    with pytest.warns(trust.TemplateOverrideWarning, match="not approved"):
        render_template("agents_md_block.md.j2", {"version": "9"}, root=tmp_path)


def test_an_override_added_or_removed_later_is_noticed(tmp_path: Path) -> None:
    variables = {"version": "9"}
    packaged = render_template("agents_md_block.md.j2", variables, root=tmp_path).text
    path = override(tmp_path, "agents_md_block.md.j2", "mine {{ version }}")
    approve(tmp_path)
    assert render_template("agents_md_block.md.j2", variables, root=tmp_path).text == "mine 9"
    path.unlink()
    assert render_template("agents_md_block.md.j2", variables, root=tmp_path).text == packaged


def test_a_corrupt_trust_file_means_nothing_is_approved(tmp_path: Path) -> None:
    override(tmp_path, "agents_md_block.md.j2", "mine")
    Path(trust.trust_file()).parent.mkdir(parents=True)
    Path(trust.trust_file()).write_text("{nope", encoding="utf-8")
    notes: list[str] = []
    assert render_template("agents_md_block.md.j2", {"version": "9"}, root=tmp_path, warnings=notes).text != "mine"
    assert len(notes) == 2 and "trust.json" in notes[0] and "not approved" in notes[1]


@pytest.mark.parametrize("kind", ["symlink to /dev/zero", "symlink to a file", "fifo", "folder", "oversized",
                                  "not utf-8"])
def test_an_override_that_cannot_be_read_safely_is_ignored_at_once(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / ".leslie" / "templates"
    folder.mkdir(parents=True)
    path = folder / "agents_md_block.md.j2"
    elsewhere = tmp_path / "elsewhere.j2"
    elsewhere.write_text("from elsewhere", encoding="utf-8")
    if kind == "symlink to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "symlink to a file":
        path.symlink_to(elsewhere)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "oversized":
        path.write_bytes(b"x" * (trust.TEMPLATE_CAP + 1))
    else:
        path.write_bytes(b"\xff\xfe")
    trust.grant(tmp_path, [], [trust.Override("agents_md_block.md.j2", str(path), text="",
                                              sha256="0" * 64)])  # even a (bogus) approval does not help
    notes: list[str] = []
    text = render_template("agents_md_block.md.j2", {"version": "9"}, root=tmp_path, warnings=notes).text
    assert "This repository uses **leslie**" in text  # the packaged template
    assert len(notes) == 1 and "agents_md_block.md.j2 ignored" in notes[0]


def test_includes_load_only_approved_overrides(tmp_path: Path) -> None:
    override(tmp_path, "agents_md_block.md.j2", "[{% include 'part.j2' %}]")
    part = override(tmp_path, "part.j2", "approved part")
    approve(tmp_path)
    assert render_template("agents_md_block.md.j2", {"version": "9"}, root=tmp_path).text == "[approved part]"
    part.write_text("{{ cycler.__init__.__globals__ }}", encoding="utf-8")  # changed after the approval
    with pytest.raises(UsageError, match=r"part\.j2 \(the override is changed since it was approved"):
        render_template("agents_md_block.md.j2", {"version": "9"}, root=tmp_path, warnings=[])


@pytest.mark.parametrize("name", ["../../secret.j2", "/etc/passwd", "plan.md", ".hidden.j2", "sub/x.j2"])
def test_the_loader_refuses_names_outside_the_folder_and_asset_templates(tmp_path: Path, name: str) -> None:
    (tmp_path / "secret.j2").write_text("secret", encoding="utf-8")
    override(tmp_path, "plan.md", "plan")
    override(tmp_path, ".hidden.j2", "hidden")
    loader = TemplateLoader(str(tmp_path / ".leslie" / "templates"), {"plan.md": "x", ".hidden.j2": "y"})
    with pytest.raises(jinja2.TemplateNotFound):
        loader.get_source(jinja_environment(), name)


# -- the sandbox and its limits ---------------------------------------------------------------------------
ESCAPES = [
    "{{ cycler.__init__.__globals__.os.popen('touch MARKER').read() }}",
    "{% set x = cycler.__init__.__globals__.os.popen('touch MARKER').read() %}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ lipsum.__globals__['os'].popen('touch MARKER') }}",
    "{{ self._TemplateReference__context.cycler.__init__.__globals__.os.system('touch MARKER') }}",
    "{{ joiner.__init__.__globals__.os.system('touch MARKER') }}",
    "{{ namespace.__init__.__globals__.os.system('touch MARKER') }}",
    "{{ ''.format.__self__.__class__ }}",
    "{{ '{0.__class__.__mro__}'.format('') }}",
    "{{ range(10**9) | list }}",
    "{{ 'x' * 10**9 }}",
    "{{ [1] * 10**9 }}",
    "{{ 10 ** 100000 }}",
    "{{ '%999999999s' % 'x' }}",
    "{{ '{:>999999999}'.format(1) }}",
    "{{ '%999999999s' | format('x') }}",
    "{{ '%*s' % (999999999, 'x') }}",
    "{{ ('x' * 1000000).replace('x', 'xxxx') }}",
    "{{ ('x' * 1000000) | replace('x', 'xxxx') }}",
    "{{ 'a' | center(10**9) }}",
    "{{ ('\t' * 1000) .expandtabs(100000) }}",
    "{% macro f(s) %}{{ f(s ~ s) }}{% endmacro %}{{ f('x') }}",
    "{% set s = 'x' * 1000000 %}{{ [s, s, s] | join }}",
    "{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% set s %}{% for i in range(100000) %}{{ 'y' * 1000000 }}{% endfor %}{% endset %}{{ s | length }}",
    "{{ 1 / 0 }}",
]


@pytest.mark.parametrize("source", ESCAPES)
def test_an_approved_hostile_template_runs_nothing_and_fails_clearly(tmp_path: Path, source: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    override(tmp_path, "agents_md_block.md.j2", source)
    approve(tmp_path)  # approval is the first line of defence; the sandbox is the second
    with pytest.raises(UsageError) as caught:
        render_template("agents_md_block.md.j2", {"version": "9"}, root=tmp_path, warnings=[])
    assert caught.value.exit_code == 2
    assert caught.value.message.startswith("template .leslie/templates/agents_md_block.md.j2 ")
    assert not (tmp_path / "MARKER").exists()


def test_ordinary_templates_stay_within_the_limits() -> None:
    env = jinja_environment()
    text = env.from_string("{{ 'ab' * 10 }}|{{ [1, 2] * 3 }}|{{ 2 ** 10 }}|{{ '%5s' % 'x' }}|{{ '{:>4}'.format(1) }}"
                           "|{{ 'a-b' | replace('-', '+') }}|{{ ['a', 'b'] | join(', ') }}|{{ 'x' ~ 1 }}"
                           "|{{ 'In 20240101: %s' % 'ok' }}|{{ 'build 123456789: {}'.format('ok') }}"
                           "|{{ '%(n)5d' % {'n': 42} }}").render()
    assert text == ("abababababababababab|[1, 2, 1, 2, 1, 2]|1024|    x|   1|a+b|a, b|x1"
                    "|In 20240101: ok|build 123456789: ok|   42")
    assert len(env.from_string("{{ 'x' * n }}").render(n=MAX_CHARS)) == MAX_CHARS


@pytest.mark.parametrize("source", [
    "{{ ref._replace(title='forged').title }}",
    "{{ ref._asdict() }}",
    "{{ ref.assets[0]._fields }}",
    "{{ ref.__class__.__mro__ }}",
    "{{ ref.assets[0].inline._make(['x', 1, 1, 1, 0, 1]).text }}",
])
def test_the_blocks_records_show_their_fields_and_nothing_private(source: str) -> None:
    """The block's data are NamedTuples (marked `template_data`): a template reads their public fields and
    methods, never a name starting with `_` (`_replace`, `_asdict`, `_make`, dunders)."""
    inline = Inline("text", 1, 1, 1, 0, 1)
    ref = RefContext("thread-a", "A title", "active", False, (Asset("plan", "plan.md", inline),))
    env = jinja_environment()
    assert env.from_string("{{ ref.title }} {{ ref.assets[0].inline.text }} {{ ref.assets[0].inline.lines }} "
                           "{{ ref.assets | length }}").render(ref=ref) == "A title text 1-1 1"
    with pytest.raises(jinja2.exceptions.SecurityError):
        env.from_string(source).render(ref=ref)


# -- errors -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("source", "needle"), [
    ("{% for %}", "is invalid"),
    ("{{ nope }}", "nope"),
    ("{% include 'missing.j2' %}", "missing.j2"),
])
def test_template_errors_are_usage_errors_naming_the_template(tmp_path: Path, source: str, needle: str) -> None:
    override(tmp_path, "x.xml.j2", source)
    approve(tmp_path)
    with pytest.raises(UsageError) as caught:
        render_template("x.xml.j2", {}, root=tmp_path)
    assert caught.value.exit_code == 2
    assert ".leslie/templates/x.xml.j2" in caught.value.message and needle in caught.value.message


def test_malformed_xml_is_a_usage_error_naming_the_template() -> None:
    with pytest.raises(UsageError) as caught:
        check_xml("<a><b></a>", "my.xml.j2")
    assert caught.value.exit_code == 2 and "my.xml.j2" in caught.value.message
    check_xml("<a/>", "ok")


def test_the_parser_resolves_no_entities_and_fetches_nothing(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET", encoding="utf-8")
    xxe = f'<!DOCTYPE x [<!ENTITY e SYSTEM "file://{secret}">]><x>&e;</x>'
    root = parse_xml(xxe, "t")
    assert "TOP-SECRET" not in etree.tostring(root, encoding="unicode")
    # An external DTD on the network is never fetched (this would hang or fail if it were).
    parse_xml('<!DOCTYPE x SYSTEM "http://192.0.2.1/x.dtd"><x/>', "t")
    laughs = ('<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
              '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]><x>&c;</x>')
    assert len(etree.tostring(parse_xml(laughs, "t"), encoding="unicode")) < 200


def _cached_templates(cache_home: Path) -> list[Path]:
    return sorted((cache_home / "leslie" / "templates").glob("__jinja2_*.cache"))


def _render_packaged_anew() -> str:
    packaged_environment.cache_clear()  # a new process, as far as the environment goes
    try:
        return render_template("agents_md_block.md.j2", {"version": "9"}).text
    finally:
        packaged_environment.cache_clear()


def test_packaged_templates_are_compiled_once_per_machine_in_a_private_cache(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = _render_packaged_anew()
    [compiled] = _cached_templates(tmp_path / "cache")
    assert (compiled.parent.stat().st_mode & 0o777) == 0o700
    assert (compiled.parent.parent.stat().st_mode & 0o777) == 0o700
    stamp = compiled.stat().st_mtime_ns
    assert _render_packaged_anew() == first  # read back from the cache, not compiled and written again
    assert compiled.stat().st_mtime_ns == stamp


@pytest.mark.parametrize("damage", ["garbage", "truncated", "folder in its place"])
def test_a_damaged_template_cache_is_compiled_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    damage: str) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = _render_packaged_anew()
    [compiled] = _cached_templates(tmp_path / "cache")
    if damage == "garbage":
        compiled.write_bytes(os.urandom(4096))
    elif damage == "truncated":
        compiled.write_bytes(compiled.read_bytes()[:40])
    else:
        compiled.unlink()
        compiled.mkdir()
    assert _render_packaged_anew() == first


def test_without_a_usable_cache_folder_templates_render_all_the_same(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    first = _render_packaged_anew()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert _render_packaged_anew() == first
    full = tmp_path / "full"
    (full / "leslie").mkdir(parents=True, mode=0o700)
    (full / "leslie" / "templates").mkdir(mode=0o700)
    (full / "leslie" / "templates" / "x").write_text("", encoding="utf-8")
    os.chmod(full / "leslie" / "templates", 0o500)  # cannot be written (for a user other than root)
    monkeypatch.setenv("XDG_CACHE_HOME", str(full))
    try:
        assert _render_packaged_anew() == first
    finally:
        os.chmod(full / "leslie" / "templates", 0o700)
