"""advisor/errors.py: an error's text is one printable line, whatever names the input supplied."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from advisor.errors import LogError, display_path


def test_names_from_a_log_are_escaped_in_a_log_error():
    """Found by fuzzing (fuzz/corpus/log/crash-bc50...): a role named 't\\rget' echoed raw split the refusal."""
    e = LogError("a\nb.jsonl", 3, "queue 'pre' feeds 't\rget\x1b[2J', which is not a role in 'roles'", "queues")
    assert str(e) == "a\\nb.jsonl:3: field 'queues' queue 'pre' feeds 't\\rget\\x1b[2J', which is not a role in 'roles'"
    assert e.message == "queue 'pre' feeds 't\rget\x1b[2J', which is not a role in 'roles'"  # kept as given


@given(st.text(), st.text())
def test_a_log_error_is_always_one_printable_line(path, message):
    text = str(LogError(path, None, message))
    assert text.isprintable()
    assert text == f"{display_path(path)}: {display_path(message)}"
    assert display_path("plain é name") == "plain é name"
