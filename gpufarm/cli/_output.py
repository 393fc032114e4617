"""Output shared by every command: tables for people, JSON for machines, exit codes, errors."""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from gpufarm.config import ConfigError
from gpufarm.debug import EXIT_BAD_INPUT as EXIT_BAD_INPUT
from gpufarm.debug import EXIT_CHECK_FAILED as EXIT_CHECK_FAILED
from gpufarm.debug import EXIT_OK as EXIT_OK
from gpufarm.debug import debugging, internal_error_message

console = Console(stderr=False, highlight=False)
errors = Console(stderr=True, highlight=False, soft_wrap=True)


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a table to standard output (numbers right-aligned)."""
    out = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        numeric = bool(rows) and all(isinstance(row[i], int | float) for row in rows)
        out.add_column(column, justify="right" if numeric else "left")
    for row in rows:
        out.add_row(*(_cell(value) for value in row))
    # Piped or captured output has no terminal width: use COLUMNS, else room for the widest cells.
    width = None if console.is_terminal else int(os.environ.get("COLUMNS") or 200)
    Console(highlight=False, width=width).print(out)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def emit_json(document: Any) -> None:
    """Print one JSON document to standard output (the `--json` form of a command)."""
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n")


def bad_input(message: str) -> NoReturn:
    """Report invalid input and exit with status 2 (no traceback)."""
    errors.print(message, markup=False)
    raise SystemExit(EXIT_BAD_INPUT)


F = TypeVar("F", bound=Callable[..., Any])


def guarded(name: str, command: F) -> F:
    """`command` with every error it does not handle turned into one line and an exit status.

    A ConfigError is bad input (2, its message); anything else is an internal error (1): its
    type and message, and how to see the traceback (:data:`DEBUG_ENV`). Exits, click's own
    errors (usage, abort) and KeyboardInterrupt pass through.
    """

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except ConfigError as exc:
            if debugging():
                traceback.print_exception(exc, file=sys.stderr)
            bad_input(exc.render())
        except Exception as exc:
            if debugging():
                traceback.print_exception(exc, file=sys.stderr)
            errors.print(
                internal_error_message(f"gpufarm {name}", exc),
                markup=False,
                soft_wrap=True,
            )
            raise SystemExit(EXIT_CHECK_FAILED) from None

    return run  # type: ignore[return-value]


@contextmanager
def config_errors() -> Iterator[None]:
    """Turn a ConfigError raised inside the block into its message and exit status 2."""
    try:
        yield
    except ConfigError as exc:
        bad_input(exc.render())


@contextmanager
def progress(message: str, *, quiet: bool = False) -> Iterator[None]:
    """A spinner on standard error while a step that takes more than a second runs."""
    if quiet or not errors.is_terminal:
        yield
        return
    with errors.status(message):
        yield
