"""Entry point of the `gpufarm` console script.

Each command lives in its own module with a `register(app)` function; exit status 0 means ok,
1 a failed check, 2 bad input (see :mod:`gpufarm.cli._output`). An error a command does not
handle itself is reported in one line as an internal error (exit 1), never as a traceback;
``GPUFARM_DEBUG=1`` prints the traceback too (:func:`gpufarm.cli._output.guarded`).
"""

from __future__ import annotations

import typer

from gpufarm.cli import cost, deploy, destroy, kubeconfig, plan, preflight, review, status, synth
from gpufarm.cli._output import guarded

app = typer.Typer(
    name="gpufarm",
    help="Synthesize, plan, cost, preflight and review gpufarm GPU inference tiers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for command in (synth, plan, cost, preflight, review):
    command.register(app)
deploy.register(app)  # deploy and diff
destroy.register(app)
status.register(app)
kubeconfig.register(app)

for info in app.registered_commands:
    if info.callback is not None:
        info.callback = guarded(info.name or info.callback.__name__, info.callback)


def main() -> None:
    """Run the command line."""
    app()
