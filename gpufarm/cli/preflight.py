"""`gpufarm preflight`: checks the account can run a tier before a deploy.

The region is `--region`, else the tier's `environment.region` when the tier sets it, else
`AWS_REGION`, else the tier's default. The checks that read only the tier run without
credentials; `--offline` runs only those, and lists the others as needing an account.

Exit status: 0 when no check failed (warnings allowed), 1 when one failed or the account checks
could not run (no credentials), 2 on bad input. `--json` prints a document in every case.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import TypeAdapter, ValidationError

from gpufarm.cli._output import (
    EXIT_BAD_INPUT,
    EXIT_CHECK_FAILED,
    EXIT_OK,
    bad_input,
    console,
    emit_json,
    errors,
    progress,
    table,
)
from gpufarm.config import ConfigError, TierConfig, load_preset, load_tier_file
from gpufarm.config.model import Region
from gpufarm.config.regions import regional_tiers, source_buckets

_REGION = TypeAdapter(Region)


class _RefusedError(Exception):
    """Bad input, raised so that `--json` can still print its document."""


def _refuse(message: str) -> NoReturn:
    raise _RefusedError(message)


def select_tier(tier: str | None, tier_file: Path | None) -> TierConfig:
    """The tier named by exactly one of `--tier` and `--tier-file` (bad input otherwise: exit 2)."""
    if tier is not None and tier_file is not None:
        _refuse(
            f"give either --tier or --tier-file, not both (got --tier {tier} and --tier-file {tier_file})"
        )
    if tier is None and tier_file is None:
        _refuse("give the tier to check: --tier NAME (a preset) or --tier-file PATH")
    try:
        return load_preset(tier) if tier is not None else load_tier_file(str(tier_file))
    except ConfigError as exc:
        _refuse(exc.render())


def check_region(region: str) -> str:
    """`region` when it is an AWS region name (bad input otherwise: exit 2)."""
    try:
        return _REGION.validate_python(region)
    except ValidationError:
        _refuse(f"--region must be an AWS region name such as 'us-east-1', got {region!r}")


def load_template(path: Path) -> dict[str, Any]:
    """The CloudFormation template in `path` (exit 2 when it cannot be read or is not a template)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        _refuse(f"--template {path}: cannot read the file: {exc.strerror or exc}")
    except json.JSONDecodeError as exc:
        _refuse(f"--template {path}: not JSON ({exc.msg} at line {exc.lineno})")
    except UnicodeDecodeError as exc:
        _refuse(
            f"--template {path}: not JSON (not UTF-8 text: byte {exc.start} is {exc.object[exc.start]:#04x})"
        )
    except RecursionError:
        _refuse(f"--template {path}: not a template (nested too deeply to read)")
    if not isinstance(document, dict) or not isinstance(document.get("Resources"), dict):
        _refuse(
            f"--template {path}: must be a synthesized CloudFormation template with a 'Resources' "
            "mapping (such as cdk.out/gpufarm-poc.template.json)"
        )
    return document


def region_for(given: str | None, config: TierConfig) -> tuple[str, str]:
    """The region to check and where it came from: --region, else the tier's environment.region
    when the tier sets it, else AWS_REGION, else the tier's default (exit 2 on a bad name)."""
    if given is not None:
        return check_region(given), "--region"
    if "region" in config.environment.model_fields_set:
        return config.environment.region, "the tier's environment.region"
    if env := os.environ.get("AWS_REGION"):
        try:
            return _REGION.validate_python(env), "AWS_REGION"
        except ValidationError:
            _refuse(f"AWS_REGION must be an AWS region name such as 'us-east-1', got {env!r}")
    return config.environment.region, "the tier's default environment.region"


def _print_report(report: Any, *, note: str) -> None:
    from gpufarm.aws.preflight import Status

    account = f"account {report.account}" if report.account else "no account"
    table(
        f"Preflight: tier {report.tier} in {report.region} ({account})",
        ["Check", "Subject", "Status", "Detail", "Fix"],
        [(r.check.value, r.subject, r.status.value.upper(), r.message, r.fix) for r in report.results],
    )
    counts = report.counts()
    verdict = "failed" if report.failed else "passed"
    skipped = f", {counts[Status.SKIP]} need an account" if Status.SKIP in counts else ""
    console.print(
        f"preflight {verdict}: {counts[Status.PASS]} pass, {counts[Status.WARN]} warn, "
        f"{counts[Status.FAIL]} fail{skipped} ({note})",
        markup=False,
    )


def register(app: typer.Typer) -> None:
    """Add the `preflight` command to the app."""

    @app.command()
    def preflight(
        region: Annotated[
            str | None,
            typer.Option(
                "--region",
                help="AWS region to check (default: the tier's environment.region, else AWS_REGION).",
            ),
        ] = None,
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
        offline: Annotated[
            bool,
            typer.Option("--offline", help="Run only the checks that need no AWS account."),
        ] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    ) -> None:
        """Check the account can run a tier: quotas, offerings, reservations, Bedrock and its model
        access, the certificate, the model bucket, the token secret, CDK bootstrap, Kubernetes."""
        from gpufarm.aws.preflight import PreflightError, offline_report, run_preflight

        try:
            config = select_tier(tier, tier_file)
            checked, source = region_for(region, config)
            template = load_template(template_file) if template_file is not None else None
        except _RefusedError as exc:
            if as_json:
                emit_json({"ok": False, "exit_status": EXIT_BAD_INPUT, "error": str(exc), "results": []})
            bad_input(str(exc))
        note = f"region from {source}"
        # With `regions`, each region's stack is checked in its own region after the tier's own.
        buckets = source_buckets(config)
        tiers = regional_tiers(config)
        reports = []
        failure: str | None = None
        for stack_tier in tiers:
            where = checked if stack_tier is config else stack_tier.environment.region
            if offline:
                reports.append(offline_report(stack_tier, where, "--offline"))
                continue
            try:
                with progress(f"Checking {stack_tier.stack_name} in {where}", quiet=as_json):
                    # A secondary region checks the replication of the tier's model bucket (the
                    # keyword is passed only then: the call for one region is unchanged).
                    replicated = buckets[0] if stack_tier is not config and buckets else None
                    if replicated is None:
                        report = run_preflight(
                            stack_tier, region=where, template=template if stack_tier is config else None
                        )
                    else:
                        report = run_preflight(stack_tier, region=where, model_source_bucket=replicated)
                    reports.append(report)
            except PreflightError as exc:
                failure = f"preflight could not run: {exc}"
                reports.append(offline_report(stack_tier, where, str(exc)))
                break
        if as_json:
            documents = [
                {**r.to_dict(), "region_source": source if i == 0 else "regions.secondary"}
                for i, r in enumerate(reports)
            ]
            document = documents[0] if len(tiers) == 1 else {**documents[0], "regions": documents[1:]}
            emit_json({**document, **({"error": failure} if failure else {})})
        else:
            for i, report in enumerate(reports):
                _print_report(report, note=note if i == 0 else "region from regions.secondary")
        if failure is not None:
            errors.print(failure, markup=False)
            raise typer.Exit(EXIT_CHECK_FAILED)
        raise typer.Exit(EXIT_CHECK_FAILED if any(r.failed for r in reports) else EXIT_OK)
