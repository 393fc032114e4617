"""Options and checks shared by the commands that act on one deployed tier (deploy, diff, destroy,
status, kubeconfig)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpufarm.cli._output import bad_input, config_errors
from gpufarm.config import TierConfig, load_preset, load_tier_file

TierOption = Annotated[
    str | None, typer.Option("--tier", help="A preset tier (poc, production, enterprise).")
]
TierFileOption = Annotated[
    Path | None, typer.Option("--tier-file", help="A tier YAML file (may start with `extends: <preset>`).")
]
OutOption = Annotated[Path, typer.Option("--out", help="Cloud assembly folder to synthesize into.")]


def one_tier(tier: str | None, tier_file: Path | None, *, verb: str) -> TierConfig:
    """The tier named by exactly one of `--tier` and `--tier-file`, validated (exit 2 otherwise).

    `verb` says what the command does with it, for the message when neither is given.
    """
    if tier is not None and tier_file is not None:
        bad_input(
            f"give either --tier or --tier-file, not both (got --tier {tier} and --tier-file {tier_file})"
        )
    if tier is None and tier_file is None:
        bad_input(f"give the tier to {verb}: --tier NAME (a preset) or --tier-file PATH")
    with config_errors():
        return load_preset(tier) if tier is not None else load_tier_file(str(tier_file))
