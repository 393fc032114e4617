"""One-line error messages and the switch that shows their tracebacks.

The app (`app.py`) and every `gpufarm` command report an error in one line, never a traceback;
``GPUFARM_DEBUG=1`` prints the traceback before that line, for debugging.
"""

from __future__ import annotations

import os

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT = 0, 1, 2
"""Exit status of the app and every command. 0: everything passed; 1: a check failed (the
compliance gate, preflight, ...) or an internal error; 2: the input was invalid."""

DEBUG_ENV = "GPUFARM_DEBUG"
"""Set to 1 (or true, yes, on) to print the traceback of an error reported in one line."""


def debugging() -> bool:
    """True when :data:`DEBUG_ENV` asks for tracebacks."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def one_line(text: str) -> str:
    """`text` with its non-blank lines joined by '; ' (jsii and CDK messages span several lines)."""
    return "; ".join(line.strip() for line in str(text).splitlines() if line.strip()) or "(no message)"


def internal_error_message(where: str, exc: BaseException) -> str:
    """One line for an error that is neither bad input nor a failed check: a bug, or the machine."""
    return (
        f"{where}: internal error: {type(exc).__name__}: {one_line(str(exc))} "
        f"(run again with {DEBUG_ENV}=1 for the traceback)"
    )


def yaml_problem(exc: Exception) -> str:
    """A PyYAML error in one line, to follow "is not valid YAML": " at line L, column C: problem"
    (counted from 1, as the tier loader says it), or ": message" when PyYAML gives no position."""
    problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
    if problem and mark is not None:
        return f" at line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return f": {one_line(str(exc))}"


def kind_of(value: object) -> str:
    """What a value read from YAML or JSON is, in its file's words, not Python's type names.

    For messages such as "must hold a mapping, got a list" (rather than "got list").
    """
    if value is None:
        return "an empty value (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    kinds: tuple[tuple[type, str], ...] = (
        (int, "a number"),
        (float, "a number"),
        (str, "a string"),
        (list, "a list"),
        (dict, "a mapping"),
    )
    return next((word for kind, word in kinds if isinstance(value, kind)), "a value of another kind")
