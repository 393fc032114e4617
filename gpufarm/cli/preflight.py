"""`gpufarm preflight`: checks the account can run a tier before a deploy.

Exit status: 0 when no check failed (warnings allowed), 1 when one failed or the checks could not
run (no credentials), 2 on bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import TypeAdapter, ValidationError

from gpufarm.cli._output import (
    EXIT_CHECK_FAILED,
    EXIT_OK,
    bad_input,
    config_errors,
    console,
    emit_json,
    errors,
    progress,
    table,
)
from gpufarm.config import TierConfig, load_preset, load_tier_file
from gpufarm.config.model import Region

_REGION = TypeAdapter(Region)


def select_tier(tier: str | None, tier_file: Path | None) -> TierConfig:
    """The tier named by exactly one of `--tier` and `--tier-file` (exit 2 otherwise)."""
    if tier is not None and tier_file is not None:
        bad_input(
            f"give either --tier or --tier-file, not both (got --tier {tier} and --tier-file {tier_file})"
        )
    if tier is None and tier_file is None:
        bad_input("give the tier to check: --tier NAME (a preset) or --tier-file PATH")
    with config_errors():
        return load_preset(tier) if tier is not None else load_tier_file(str(tier_file))


def check_region(region: str) -> str:
    """`region` when it is an AWS region name (exit 2 otherwise)."""
    try:
        return _REGION.validate_python(region)
    except ValidationError:
        bad_input(f"--region must be an AWS region name such as 'us-east-1', got {region!r}")


def load_template(path: Path) -> dict[str, Any]:
    """The CloudFormation template in `path` (exit 2 when it cannot be read or is not a template)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        bad_input(f"--template {path}: cannot read the file: {exc.strerror or exc}")
    except json.JSONDecodeError as exc:
        bad_input(f"--template {path}: not JSON ({exc.msg} at line {exc.lineno})")
    except UnicodeDecodeError as exc:
        bad_input(
            f"--template {path}: not JSON (not UTF-8 text: byte {exc.start} is {exc.object[exc.start]:#04x})"
        )
    except RecursionError:
        bad_input(f"--template {path}: not a template (nested too deeply to read)")
    if not isinstance(document, dict) or not isinstance(document.get("Resources"), dict):
        bad_input(
            f"--template {path}: must be a synthesized CloudFormation template with a 'Resources' "
            "mapping (such as cdk.out/gpufarm-poc.template.json)"
        )
    return document


def register(app: typer.Typer) -> None:
    """Add the `preflight` command to the app."""

    @app.command()
    def preflight(
        region: Annotated[str, typer.Option("--region", help="AWS region to check, such as us-east-1.")],
        tier: Annotated[
            str | None, typer.Option("--tier", help="A preset tier name (poc, production, ...).")
        ] = None,
        tier_file: Annotated[
            Path | None, typer.Option("--tier-file", help="A tier YAML file.", dir_okay=False)
        ] = None,
        template_file: Annotated[
            Path | None,
            typer.Option(
                "--template",
                help="The tier's synthesized template (from gpufarm synth): checks the network quotas.",
                dir_okay=False,
            ),
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    ) -> None:
        """Check the account can run a tier: quotas, offerings, reservations, Bedrock, Kubernetes."""
        from gpufarm.aws.preflight import PreflightError, Status, run_preflight

        config = select_tier(tier, tier_file)
        region = check_region(region)
        template = load_template(template_file) if template_file is not None else None
        try:
            with progress(f"Checking {config.name} in {region}", quiet=as_json):
                report = run_preflight(config, region=region, template=template)
        except PreflightError as exc:
            errors.print(f"preflight could not run: {exc}", markup=False)
            raise typer.Exit(EXIT_CHECK_FAILED) from None
        if as_json:
            emit_json(report.to_dict())
        else:
            table(
                f"Preflight: tier {report.tier} in {report.region} (account {report.account})",
                ["Check", "Subject", "Status", "Detail", "Fix"],
                [
                    (r.check.value, r.subject, r.status.value.upper(), r.message, r.fix)
                    for r in report.results
                ],
            )
            counts = report.counts()
            verdict = "failed" if report.failed else "passed"
            console.print(
                f"preflight {verdict}: {counts[Status.PASS]} pass, {counts[Status.WARN]} warn, "
                f"{counts[Status.FAIL]} fail",
                markup=False,
            )
        raise typer.Exit(EXIT_CHECK_FAILED if report.failed else EXIT_OK)
