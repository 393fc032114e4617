"""Entry point of the `gpufarm` console script.

Each command lives in its own module with a `register(app)` function; exit status 0 means ok,
1 a failed check, 2 bad input (see :mod:`gpufarm.cli._output`).
"""

from __future__ import annotations

import typer

from gpufarm.cli import cost, plan, preflight, review, synth

app = typer.Typer(
    name="gpufarm",
    help="Synthesize, plan, cost, preflight and review gpufarm GPU inference tiers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for command in (synth, plan, cost, preflight, review):
    command.register(app)


def main() -> None:
    """Run the command line."""
    app()
