"""The one way an error becomes a line (``errors.one_line``, ``errors.validation_line``), and a check that no
module formats one by hand again."""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel, ValidationError
from test_layout import PACKAGE, ROOT

from antlm_bench.errors import EnvironmentFailure, UserError, one_line, validation_line


def test_a_multi_line_message_is_one_line_with_single_spaces():
    err = ValueError("first line\n    indented detail\t and  more\n\nlast")
    assert one_line(err) == "first line indented detail and more last"
    assert one_line("  stderr of a tool\r\n  second line  \n") == "stderr of a tool second line"


def test_an_empty_message_is_the_type_name():
    assert one_line(KeyError()) == "KeyError"
    assert one_line(OSError("  \n ")) == "OSError"
    assert one_line(TimeoutError(), typed=True) == "TimeoutError"  # not "TimeoutError: "
    assert one_line(ValueError("bad\nvalue"), typed=True) == "ValueError: bad value"


def test_text_is_not_an_exception():
    assert one_line("") == ""  # a text has no type to stand in for it: the caller says what an empty one means
    assert one_line("", 10) == ""
    assert one_line("ValueError") == "ValueError"


def test_a_limit_cuts_with_an_ellipsis_and_only_past_it():
    assert one_line("abcdefghij", 10) == "abcdefghij"
    assert one_line("abcdefghijk", 10) == "abcdefghij..."
    assert one_line(RuntimeError("x" * 500), 200) == "x" * 200 + "..."
    assert one_line(RuntimeError("a\n" * 3), 3) == "a a..."  # cut after the whitespace is folded
    assert one_line(ValueError("abcdef"), 10, typed=True) == "ValueError..."  # the limit is the whole line's


def test_our_own_messages_keep_their_spacing():
    """A path with two spaces in it is named as it is; only the line breaks go."""
    assert one_line("/tmp/my  folder:\nmissing", keep_spacing=True) == "/tmp/my  folder: missing"
    assert str(UserError("/data/a  b.txt: missing\nfetch it")) == "/data/a  b.txt: missing fetch it"
    assert str(EnvironmentFailure("/x\r\nno space left")) == "/x no space left"


class _Inner(BaseModel):
    epochs: int


class _Outer(BaseModel):
    inner: _Inner


def test_validation_line_names_the_section_before_the_field():
    with pytest.raises(ValidationError) as caught:
        _Outer.model_validate({"inner": {"epochs": "many"}})
    assert validation_line(caught.value) == (
        "field inner.epochs: Input should be a valid integer, unable to parse string as an integer (got 'many')")
    assert validation_line(caught.value, section="glue").startswith("field glue.inner.epochs: ")
    with pytest.raises(ValidationError) as top:
        _Inner.model_validate([1])
    assert validation_line(top.value).startswith("field (top level): ")
    assert validation_line(top.value, section="defaults").startswith("field defaults: ")


# an exception's text made one line by hand, the ways it was pasted before errors.one_line existed
HAND_MADE = [
    re.compile(r"""join\(\s*str\(\s*\w+\s*\)\s*\.\s*split"""),  # " ".join(str(err).split())
    re.compile(r"""str\(\s*\w+\s*\)(\s*\.\s*strip\(\))?\s*\.\s*splitlines\(\)\s*\[\s*0\s*\]"""),  # first line only
    re.compile(r"""join\(\s*message\s*\.\s*split\(\s*["']\\n["']\s*\)"""),  # " ".join(message.split("\n"))
]


def hand_made_error_lines(source: str) -> list[int]:
    """The line numbers in ``source`` where an error line is made by hand."""
    return [number for number, line in enumerate(source.splitlines(), start=1)
            if any(pattern.search(line) for pattern in HAND_MADE)]


def test_the_hand_made_patterns_are_found():
    assert hand_made_error_lines('    why = " ".join(str(err).split())[:300]\n') == [1]
    assert hand_made_error_lines("x = 1\nfirst = str(err).strip().splitlines()[0]\n") == [2]
    assert hand_made_error_lines("raise UserError(f\"({str(exc).splitlines()[0][:160]})\")\n") == [1]
    assert hand_made_error_lines("text = one_line(err, 200)\nwords = ' '.join(line.split())\n") == []


def test_no_module_makes_an_error_line_by_hand():
    """Every error line goes through errors.one_line: the same whitespace, empty-message and cut rules
    everywhere."""
    found = [f"{path.relative_to(ROOT)}:{number}" for path in sorted(PACKAGE.rglob("*.py"))
             if path != PACKAGE / "errors.py"
             for number in hand_made_error_lines(path.read_text(encoding="utf-8"))]
    assert not found, "use antlm_bench.errors.one_line: " + ", ".join(found)
