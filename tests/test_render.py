"""render.py: the one Jinja environment (XML escaping, strict undefined, overrides) and the safe lxml check."""

from __future__ import annotations

import re
from pathlib import Path

import jinja2
import pytest
from lxml import etree

from leslie.errors import UsageError
from leslie.render import check_xml, jinja_environment, parse_xml, render_template, template_label

SRC = Path(__file__).parents[1] / "src" / "leslie"


def test_the_environment_is_configured_in_one_place() -> None:
    offenders = [
        path.relative_to(SRC).as_posix()
        for path in SRC.rglob("*.py")
        if re.search(r"jinja2\.(Environment|Template)\(", path.read_text(encoding="utf-8"))
        and path.name != "render.py"
    ]
    assert offenders == []


def test_strict_undefined() -> None:
    env = jinja_environment()
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()


def test_xml_templates_are_escaped_and_attribute_safe(tmp_path: Path) -> None:
    (tmp_path / "t.xml.j2").write_text('<x a="{{ v }}">{{ v }}|{{ v | xml_text }}</x>', encoding="utf-8")
    value = 'q"\'<>&]]>\tTAB\nLF\rCR'
    text = jinja_environment(tmp_path).get_template("t.xml.j2").render(v=value)
    root = etree.fromstring(text.encode())
    assert root.get("a") == value  # TAB, LF and CR survive attribute-value normalisation
    assert root.text == value + "|" + value
    assert "\nLF" in text  # xml_text keeps newlines readable in element text


def test_markdown_templates_are_not_escaped(tmp_path: Path) -> None:
    (tmp_path / "t.md.j2").write_text("{{ v }}", encoding="utf-8")
    assert jinja_environment(tmp_path).get_template("t.md.j2").render(v="<a & b>\n") == "<a & b>\n"


def test_override_folder_wins_over_packaged(tmp_path: Path) -> None:
    (tmp_path / "thread_context.xml.j2").write_text("<override/>", encoding="utf-8")
    assert render_template("thread_context.xml.j2", {}, override_dir=tmp_path) == "<override/>"
    assert template_label("thread_context.xml.j2", tmp_path, tmp_path) == "thread_context.xml.j2"
    assert template_label("thread_context.xml.j2", tmp_path / "none", None).endswith("(packaged)")


def test_an_override_added_or_removed_later_is_noticed(tmp_path: Path) -> None:
    variables = {"version": "9"}
    packaged = render_template("agents_md_block.md.j2", variables, override_dir=tmp_path)
    (tmp_path / "agents_md_block.md.j2").write_text("mine {{ version }}", encoding="utf-8")
    assert render_template("agents_md_block.md.j2", variables, override_dir=tmp_path) == "mine 9"
    (tmp_path / "agents_md_block.md.j2").unlink()
    assert render_template("agents_md_block.md.j2", variables, override_dir=tmp_path) == packaged


@pytest.mark.parametrize(("source", "needle"), [
    ("{% for %}", "is invalid"),
    ("{{ nope }}", "nope"),
    ("{% include 'missing.j2' %}", "missing.j2"),
])
def test_template_errors_are_usage_errors_naming_the_template(tmp_path: Path, source: str, needle: str) -> None:
    (tmp_path / "x.xml.j2").write_text(source, encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        render_template("x.xml.j2", {}, override_dir=tmp_path, label="LABEL")
    assert caught.value.exit_code == 2
    assert "LABEL" in caught.value.message and needle in caught.value.message


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
    assert len(etree.tostring(parse_xml(laughs, "t"))) < 200
