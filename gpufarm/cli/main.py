"""Entry point of the `gpufarm` console script.

Each command lives in its own module with a `register(app)` function; exit status 0 means ok,
1 a failed check, 2 bad input (see :mod:`gpufarm.cli._output`). An error a command does not
handle itself is reported in one line as an internal error (exit 1), never as a traceback;
``GPUFARM_DEBUG=1`` prints the traceback too (:func:`gpufarm.cli._output.guarded`).
"""

from __future__ import annotations

import inspect
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from gpufarm.cli import cost, deploy, destroy, kubeconfig, plan, preflight, review, status, synth
from gpufarm.cli._output import guarded

METAVARS = {"str": "TEXT", "path": "PATH", "int": "INTEGER", "float": "NUMBER", "list[str]": "TEXT"}
"""The value shown after an option in help, by the type typer names (`<str>`, `<list[str]>`, ...)."""


def _name_values(params: list[Any], ctx: Any) -> list[Any]:
    """`params` with a metavar a user reads: none for a flag, TEXT rather than `<list[str]>`.

    typer 0.29 shows each option's Python type in help (`--json <bool>`, `--commitment
    <list[str]>`), the help option's too; an option that sets its own metavar keeps it.
    """
    for param in params:
        if isinstance(param, TyperArgument) and param.metavar is not None:
            # An argument shows its metavar as its name; its type column would repeat `<path>`.
            param.display_type_rich = _no_type  # type: ignore[method-assign]
        if isinstance(param, TyperOption) and param.metavar is None:
            if param.is_flag:
                param.metavar = ""
            else:
                shown = param.display_type(ctx).strip("<>")
                param.metavar = METAVARS.get(shown, shown.upper())
    return params


def _no_type(ctx: Any) -> None:
    return None


class _Command(TyperCommand):
    """A command whose help names values as TEXT, PATH, NUMBER, and flags as nothing."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _name_values(super().get_params(ctx), ctx)


class _Group(TyperGroup):
    """The `gpufarm` group, with the same help conventions as its commands."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _name_values(super().get_params(ctx), ctx)


app = typer.Typer(
    name="gpufarm",
    cls=_Group,
    help="Synthesize, plan, cost, preflight and review gpufarm GPU inference tiers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def gpufarm_version() -> str:
    """The installed package's version (from its metadata)."""
    try:
        return package_version("gpufarm")
    except PackageNotFoundError:  # imported from a checkout that was never installed
        return "unknown (not installed)"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"gpufarm {gpufarm_version()}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print gpufarm's version and exit."
        ),
    ] = False,
) -> None:
    """Synthesize, plan, cost, preflight and review gpufarm GPU inference tiers."""


for command in (synth, plan, cost, preflight, review):
    command.register(app)
deploy.register(app)  # deploy and diff
destroy.register(app)
status.register(app)
kubeconfig.register(app)

for info in app.registered_commands:
    if info.cls in (None, TyperCommand):
        info.cls = _Command
    if info.short_help is None and info.callback is not None and info.callback.__doc__:
        # The list of commands shows the docstring's first paragraph as one flowing line; typer
        # would keep the docstring's own line breaks there.
        info.short_help = " ".join(inspect.cleandoc(info.callback.__doc__).split("\n\n")[0].split())
    if info.callback is not None:
        info.callback = guarded(info.name or info.callback.__name__, info.callback)


def main() -> None:
    """Run the command line."""
    app()
