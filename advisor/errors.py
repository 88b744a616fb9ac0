"""Every error and typed warning of the advisor, in one place.

Errors are raised at the boundary, loud and specific: a :class:`LogError` names the file, the
line and the field; a :class:`SettingsError` names the option. Each typed warning becomes a
caveat of the advice.
"""

from __future__ import annotations

from collections.abc import Sequence


def display_path(path: str) -> str:
    """A file name (or any text from the input) as one printable line: each unprintable character
    as ``ascii`` escapes it, so no name echoed from a log breaks a one-line refusal or reaches a
    terminal as a control sequence."""
    if path.isprintable():
        return path
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in path)


class LogError(ValueError):
    """Unusable input. Its text names the file, the line and the field where known."""

    def __init__(self, path: str, line: int | None, message: str, field: str | None = None):
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message
        shown = display_path(self.path)
        where = shown if line is None else f"{shown}:{line}"
        what = f"field '{field}' {message}" if field else message
        super().__init__(f"{where}: {display_path(what)}")

    def __reduce__(self):
        # rebuilt from its parts, so a worker process's error is raised in the parent as it was
        return type(self), (self.path, self.line, self.message, self.field)


class LogRefused(LogError):
    """Unusable input that more data will not fix (special file, over a size limit, bomb)."""


class AdvisorWarning(UserWarning):
    """Base of the advisor's typed warnings; each becomes a caveat in the report."""


class LogWarning(AdvisorWarning):
    """Something in the input was skipped or repaired (partial last line, unknown events)."""


class SteadyStateWarning(AdvisorWarning):
    """Warm-up was long or the run never settled: rates rest on a short window."""


class AssumptionWarning(AdvisorWarning):
    """A number was assumed or bounded rather than measured (e.g. rates-only logs, M=1 sync)."""


class ContentionWarning(AssumptionWarning):
    """What one log shows about contention between workers, and what the projection assumes of it."""


class SettingsError(ValueError):
    """An option is unusable; the text names the option."""

    def __init__(self, option: str, message: str):
        self.option = option
        super().__init__(f"{option}: {message}")


SHORT_CHARS = 40  # a value quoted in an error message: a garbled line must not flood the terminal


def cut_text(text: str) -> str:
    """``text`` to quote in a message, cut to `SHORT_CHARS` characters with "..." where longer."""
    return text if len(text) <= SHORT_CHARS else text[: SHORT_CHARS - 3] + "..."


def short_repr(value: object) -> str:
    """How every error message quotes a value it refuses: its ``repr``, cut (`cut_text`); a whole
    number of 31 digits or more by its length, "a 4000-digit number" (so it stays one short line)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"a {len(str(abs(value)))}-digit number"
    return cut_text(repr(value))


def internal_error(e: BaseException, inputs: Sequence[object]) -> str:
    """An unexpected exception as one line that names the inputs being read and calls it a bug (the
    CLI's exit 2, never a traceback nor 1, which a CI gate reads as a fail); its text cut to 300
    characters."""
    what = " ".join(f"{type(e).__name__}: {e}".split())
    return (
        f"internal error while reading {', '.join(map(str, inputs)) or 'no input'}: {what[:300]} "
        f"(a bug in dflash-advise; please report it)"
    )
