"""Output shared by every command: tables for people, JSON for machines, exit codes, errors."""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, NoReturn, TypeVar

import typer
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import Markdown, MarkdownElement, TableElement
from rich.table import Table
from rich.text import Text

from gpufarm.config import ConfigError
from gpufarm.debug import EXIT_BAD_INPUT as EXIT_BAD_INPUT
from gpufarm.debug import EXIT_CHECK_FAILED as EXIT_CHECK_FAILED
from gpufarm.debug import EXIT_OK as EXIT_OK
from gpufarm.debug import debugging, internal_error_message

console = Console(stderr=False, highlight=False)
errors = Console(stderr=True, highlight=False, soft_wrap=True)


def table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    drop_first: Sequence[str] = (),
    caption: str | None = None,
) -> None:
    """Print a table to standard output (numbers right-aligned) that fits the terminal.

    Cells wrap at spaces and fold a word longer than their column, so no cell is ever cut with
    an ellipsis. When even the longest word of each column cannot fit side by side (an
    80-column terminal and a wide table), the columns named in `drop_first` are left out, in
    that order, until the rest fit, and a line under the table names them (`--json` and a
    wider terminal show them). `caption`, plain text, is printed under the table too. The
    layout: docs/decisions/0059-output-a-person-reads.md.
    """
    # Piped or captured output has no terminal width: use COLUMNS, else room for the widest cells.
    width = None if console.is_terminal else int(os.environ.get("COLUMNS") or 200)
    out = Console(highlight=False, width=width)
    left_out: list[str] = []
    candidates = [c for c in drop_first if c in columns]
    while candidates and sum(w + 3 for w in _minimum_widths(columns, rows, left_out)) + 1 > out.width:
        left_out.append(candidates.pop(0))
    # The title and the notes span the terminal, not squeezed to the width of a narrow table.
    out.print(Text.from_markup(title, style="table.title"))
    out.print(_table(columns, rows, left_out, room=out.width))
    if caption:
        out.print(caption, markup=False)
    if left_out:
        shown = ", ".join(Text.from_markup(name).plain for name in left_out)
        out.print(f"Not shown at this width: {shown} (a wider terminal or --json shows them)", markup=False)


def _table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    left_out: list[str],
    *,
    room: int,
) -> Table:
    out = Table()
    kept = [i for i, column in enumerate(columns) if column not in left_out]
    cells = [[_cell(row[i]) for i in kept] for row in rows]
    widths = _fitted_widths(columns, rows, left_out, room=room)
    for n, i in enumerate(kept):
        # A column of numbers with some cells empty (None) is still a column of numbers.
        numeric = any(isinstance(row[i], int | float) for row in rows) and all(
            isinstance(row[i], int | float) or row[i] is None for row in rows
        )
        out.add_column(
            columns[i],
            justify="right" if numeric else "left",
            overflow="fold",
            width=widths[n] if widths else None,
        )
    for row_cells in cells:
        out.add_row(*row_cells)
    return out


def _texts(columns: Sequence[str], rows: Sequence[Sequence[Any]], left_out: list[str]) -> list[list[str]]:
    """The plain text of each kept column: its header, then its cells."""
    return [
        [Text.from_markup(columns[i]).plain, *(Text.from_markup(_cell(row[i])).plain for row in rows)]
        for i, column in enumerate(columns)
        if column not in left_out
    ]


def _minimum_widths(columns: Sequence[str], rows: Sequence[Sequence[Any]], left_out: list[str]) -> list[int]:
    """Each kept column as narrow as its longest word: no narrower without folding a word."""
    return [
        max(cell_len(word) for text in texts for word in [*text.split(), ""])
        for texts in _texts(columns, rows, left_out)
    ]


def _fitted_widths(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], left_out: list[str], *, room: int
) -> list[int] | None:
    """Column widths that fit `room` with no word cut, or None when every cell fits unwrapped.

    Rich, left to itself, narrows the widest column first, below its longest word (a unit such
    as `[instance-month]` then folds); here each column starts at its longest word and the room
    left is shared in proportion to what each column lacks of its widest cell.
    """
    natural = [
        max(cell_len(line) for text in texts for line in [*text.splitlines(), ""])
        for texts in _texts(columns, rows, left_out)
    ]
    # One space of padding each side of a cell; columns are separated and edged by one line.
    free = room - 3 * len(natural) - 1
    if sum(natural) <= free:
        return None
    minimum = _minimum_widths(columns, rows, left_out)
    spare = free - sum(minimum)
    if spare <= 0:
        # A word wider than the room left (a long URL): the widest columns give way and fold it.
        widths = list(minimum)
        for _ in range(-spare):
            widest = max(range(len(widths)), key=lambda i: widths[i])
            widths[widest] = max(1, widths[widest] - 1)
        return widths
    lacking = [n - m for n, m in zip(natural, minimum, strict=True)]
    # A column that lacks little of its widest cell gets all of it first, narrowest need first,
    # while that need is at most half of what is spare: a short label ("node launch") reads
    # better whole than split over two lines to give a wide column two more characters.
    minimum = list(minimum)
    for i in sorted(range(len(lacking)), key=lambda i: lacking[i]):
        if 0 < lacking[i] <= spare // 2:
            minimum[i] += lacking[i]
            spare -= lacking[i]
            lacking[i] = 0
    total = sum(lacking)
    if total == 0:
        return minimum
    widths = [m + min(gap, spare * gap // total) for m, gap in zip(minimum, lacking, strict=True)]
    # What integer division left over goes to the columns still short of their widest cell.
    left = free - sum(widths)
    for i in sorted(range(len(widths)), key=lambda i: natural[i] - widths[i], reverse=True):
        give = min(left, natural[i] - widths[i])
        widths[i] += give
        left -= give
    return widths


class _FoldedTable(TableElement):
    """A Markdown table whose cells wrap and fold long words (rich's own cuts them with `…`)."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for table in super().__rich_console__(console, options):
            if isinstance(table, Table):
                for column in table.columns:
                    column.overflow = "fold"
            yield table


class _TerminalMarkdown(Markdown):
    elements: ClassVar[dict[str, type[MarkdownElement]]] = {**Markdown.elements, "table_open": _FoldedTable}


def say(text: str) -> None:
    """Print a line of prose to standard output: wrapped at words to a terminal's width, one line
    when piped (so scripts and grep see it whole)."""
    console.print(text, markup=False, soft_wrap=not console.is_terminal)


def markdown(text: str) -> None:
    """Print a Markdown document: rendered on a terminal (tables that fit it), as written otherwise.

    Piped or redirected, the text is unchanged, so `gpufarm review ... > review.md` stays Markdown.
    """
    if console.is_terminal:
        console.print(_TerminalMarkdown(text))
    else:
        sys.stdout.write(text)


def _cell(value: Any) -> str:
    if value is None:
        return ""
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
