"""`gpufarm synth`: synthesize tiers in-process behind the compliance gate and cfn-lint, and sum them up.

The same result as `make synth`: the app of :mod:`gpufarm.app` (cdk-nag packs as validation
plugins, so unacknowledged findings fail synth), with the CDK feature flags gpufarm is tested
under (:mod:`gpufarm.cdk_context`; a `cdk.json` in the working folder is not read, so the
templates are the same from any folder), then cfn-lint on every written template. aws-cdk-lib
is imported only when the command runs, after the Node it runs in is chosen (:mod:`gpufarm.node`).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from gpufarm.cdk_context import describe_context, tested_context
from gpufarm.cli._output import (
    EXIT_CHECK_FAILED,
    bad_input,
    config_errors,
    emit_json,
    errors,
    progress,
    table,
)
from gpufarm.config import TierConfig
from gpufarm.config.regions import stack_tiers
from gpufarm.core.cold_start import cold_start_warnings
from gpufarm.node import NodeNotFoundError, prepare_node

ANNOTATIONS_PLUGIN = "Construct Annotations"
"""The validation report's plugin for CDK warnings: not a compliance pack, never a failure."""


@dataclass(frozen=True, kw_only=True)
class NagFinding:
    """An unacknowledged compliance finding from the validation report."""

    plugin: str
    rule: str
    path: str
    description: str

    def to_json(self) -> dict[str, str]:
        """The finding as a JSON-ready mapping."""
        return {"plugin": self.plugin, "rule": self.rule, "path": self.path, "description": self.description}


@dataclass(frozen=True, kw_only=True)
class LintError:
    """An error-level cfn-lint finding in a template."""

    rule: str
    message: str
    line: int

    def to_json(self) -> dict[str, Any]:
        """The error as a JSON-ready mapping."""
        return {"rule": self.rule, "message": self.message, "line": self.line}


@dataclass(kw_only=True)
class StackSummary:
    """One synthesized stack: what it holds, what it costs, and how it fared at the gates."""

    stack: str
    tier: str
    template: Path
    resources: int
    gpus: dict[str, int] | None
    monthly_cost_usd: float | None
    """The floor: the base monthly bill (fewest replicas; reserved node groups always)."""
    ceiling_monthly_cost_usd: float | None = None
    """The ceiling: every model at its most replicas all month."""
    estimate_error: str | None = None
    nag: list[NagFinding] = field(default_factory=list)
    lint: list[LintError] | None = None

    @property
    def ok(self) -> bool:
        """True when the compliance gate and cfn-lint (when it ran) found nothing."""
        return not self.nag and not self.lint

    def to_json(self) -> dict[str, Any]:
        """The summary as a JSON-ready mapping."""
        return {
            "stack": self.stack,
            "tier": self.tier,
            "template": str(self.template),
            "resources": self.resources,
            "gpus": self.gpus,
            "monthly_cost_usd": None if self.monthly_cost_usd is None else round(self.monthly_cost_usd, 2),
            "ceiling_monthly_cost_usd": (
                None if self.ceiling_monthly_cost_usd is None else round(self.ceiling_monthly_cost_usd, 2)
            ),
            "estimate_error": self.estimate_error,
            "nag": {
                "status": "failed" if self.nag else "passed",
                "findings": [f.to_json() for f in self.nag],
            },
            "cfn_lint": {
                "status": "skipped" if self.lint is None else "failed" if self.lint else "passed",
                "errors": [e.to_json() for e in self.lint or []],
            },
        }


def nag_findings(outdir: Path) -> list[NagFinding]:
    """Unacknowledged findings of the compliance packs in `outdir/validation-report.json`.

    Findings of plugins that concluded 'failure', at severity 'error'; CDK's own annotations
    (warnings) are left out. No report: no findings.
    """
    report_file = outdir / "validation-report.json"
    if not report_file.is_file():
        return []
    report = json.loads(report_file.read_text(encoding="utf-8"))
    out: list[NagFinding] = []
    for plugin in report.get("pluginReports", []):
        if plugin.get("pluginName") == ANNOTATIONS_PLUGIN or plugin.get("conclusion") != "failure":
            continue
        for violation in plugin.get("violations", []):
            if violation.get("severity", "error") != "error":
                continue
            out += [
                NagFinding(
                    plugin=str(plugin["pluginName"]),
                    rule=str(violation["ruleName"]),
                    path=str(construct["constructPath"]),
                    description=str(violation.get("description", "")),
                )
                for construct in violation.get("violatingConstructs", [])
            ]
    return out


def cfn_lint_installed() -> bool:
    """True when cfn-lint (a dev dependency) can be imported."""
    return importlib.util.find_spec("cfnlint") is not None


def lint_template(template: Path, region: str) -> list[LintError] | None:
    """cfn-lint's error-level findings in `template` for `region`; None when cfn-lint is not installed."""
    try:
        api: Any = importlib.import_module("cfnlint.api")
    except ImportError:
        return None
    matches = api.lint_file(template, api.ManualArgs(regions=[region]))
    return [
        LintError(rule=str(m.rule.id), message=str(m.message), line=int(m.linenumber))
        for m in matches
        if str(m.rule.severity).lower() == "error"
    ]


@contextmanager
def _step(message: str, done: str) -> Iterator[None]:
    """A spinner while the step runs, then one line on standard error with its duration."""
    started = time.monotonic()
    with progress(message):
        yield
    errors.print(f"{done} ({time.monotonic() - started:.1f} s)", markup=False, soft_wrap=True)


def synthesize(configs: list[TierConfig], outdir: Path, context: dict[str, Any]) -> bool:
    """Synthesize `configs` into `outdir` behind the compliance gate; False when the gate failed.

    Prints a warning for each tier whose Kubernetes version is in, or near, EKS extended support,
    and one for each documentation value left in a tier (:mod:`gpufarm.config.placeholders`).
    The assembly reaches `outdir` only when synth completes or the gate fails
    (:func:`gpufarm.app.staged`); raises :class:`gpufarm.app.ConstructInputError` when a construct
    rejects a tier and :class:`gpufarm.app.OutputFolderError` when `outdir` cannot be written.
    """
    from gpufarm.app import (
        CONSTRUCT_VALIDATION_PREFIX,
        ConstructInputError,
        GateFailedError,
        add_tiers,
        building,
        is_gate_failure,
        new_app,
        staged,
        support_warning,
    )
    from gpufarm.config.placeholders import find_placeholders
    from gpufarm.debug import one_line

    try:
        with staged(outdir) as staging:
            app = new_app(context=context, outdir=str(staging))

            @contextmanager
            def each(config: TierConfig) -> Iterator[None]:
                with (
                    building(_source(config), config.stack_name),
                    _step(f"building {config.stack_name}", f"built {config.stack_name}"),
                ):
                    yield

            add_tiers(app, configs, each=each)
            for config in stack_tiers(configs):
                if warning := support_warning(config):
                    errors.print(f"warning: {config.stack_name}: {warning}", markup=False, soft_wrap=True)
                for found in find_placeholders(config):
                    errors.print(
                        f"warning: {config.stack_name}: {found.describe()}", markup=False, soft_wrap=True
                    )
            try:
                with _step("synthesizing and running the compliance gate", "synthesized"):
                    app.synth()
            except RuntimeError as exc:
                if is_gate_failure(exc):
                    raise GateFailedError(str(exc)) from exc
                if str(exc).startswith(CONSTRUCT_VALIDATION_PREFIX):
                    where = ", ".join(sorted({_source(config) for config in configs}))
                    raise ConstructInputError(
                        f"invalid {where}: a construct rejected the tier at synth: "
                        f"{one_line(str(exc).removeprefix(CONSTRUCT_VALIDATION_PREFIX))}"
                    ) from exc
                raise
    except GateFailedError:
        return False
    return True


def _source(config: TierConfig) -> str:
    """The tier, for messages (a preset's name is the preset's; a tier file's is its `name`)."""
    return f"tier {config.name!r}"


def summarize(
    configs: list[TierConfig], outdir: Path, *, findings: list[NagFinding], lint: bool = True
) -> list[StackSummary]:
    """One summary per stack from the written templates, the findings and (optionally) cfn-lint."""
    from gpufarm.estimate import EstimateError, gpu_capacity, monthly_cost
    from gpufarm.pricing import PriceNotFoundError

    out: list[StackSummary] = []
    for config in configs:
        template = outdir / f"{config.stack_name}.template.json"
        resources = json.loads(template.read_text(encoding="utf-8")).get("Resources", {})
        lint_errors: list[LintError] | None = None
        if lint:
            with _step(f"cfn-lint {template.name}", f"linted {template.name}"):
                lint_errors = lint_template(template, config.environment.region)
        gpus: dict[str, int] | None = None
        cost: float | None = None
        ceiling: float | None = None
        problem: str | None = None
        try:
            estimate = monthly_cost(config)
            gpus, cost, ceiling = gpu_capacity(config), estimate.total_usd, estimate.peak_total_usd
        except (PriceNotFoundError, EstimateError) as exc:
            problem = str(exc)
        out.append(
            StackSummary(
                stack=config.stack_name,
                tier=config.name,
                template=template,
                resources=len(resources),
                gpus=gpus,
                monthly_cost_usd=cost,
                ceiling_monthly_cost_usd=ceiling,
                estimate_error=problem,
                nag=[f for f in findings if f.path.split("/", 1)[0] == config.stack_name],
                lint=lint_errors,
            )
        )
    return out


def _gpus(gpus: dict[str, int] | None) -> str:
    if gpus is None:
        return "n/a"
    return " / ".join(str(gpus.get(kind, 0)) for kind in ("reserved", "on-demand", "spot"))


def _dollars(usd: float | None) -> int | str:
    """Whole dollars: a monthly estimate to the cent is false precision, and cents cost columns."""
    return "n/a" if usd is None else round(usd)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _print(summaries: list[StackSummary], outdir: Path) -> None:
    table(
        f"gpufarm synth: {outdir}",
        (
            "Stack",
            "Resources",
            "Peak GPUs reserved / on-demand / spot",
            "Floor $ / month",
            "Ceiling $ / month",
            "cdk-nag",
            "cfn-lint",
        ),
        [
            (
                s.stack,
                s.resources,
                _gpus(s.gpus),
                _dollars(s.monthly_cost_usd),
                _dollars(s.ceiling_monthly_cost_usd),
                _count(len(s.nag), "finding") if s.nag else "passed",
                "skipped" if s.lint is None else _count(len(s.lint), "error") if s.lint else "passed",
            )
            for s in summaries
        ],
        drop_first=("Resources",),
    )


def _report_failures(summaries: list[StackSummary], outdir: Path) -> None:
    for s in summaries:
        if s.estimate_error:
            errors.print(
                f"note: {s.stack}: no GPU or cost estimate: {s.estimate_error}", markup=False, soft_wrap=True
            )
        if s.nag:
            errors.print(
                f"compliance gate failed for {s.stack}: {len(s.nag)} cdk-nag finding(s) not acknowledged "
                f"(see {outdir / 'validation-report.json'}):",
                markup=False,
                soft_wrap=True,
            )
            for f in s.nag:
                errors.print(f"  - {f.rule} at {f.path}: {f.description}", markup=False, soft_wrap=True)
        if s.lint:
            errors.print(
                f"cfn-lint found {len(s.lint)} error(s) in {s.template}:", markup=False, soft_wrap=True
            )
            for e in s.lint:
                errors.print(f"  - {e.rule} (line {e.line}): {e.message}", markup=False, soft_wrap=True)


def start_cdk() -> None:
    """Choose the Node jsii runs in (:func:`gpufarm.node.prepare_node`; none: exit 2 saying what to
    install), then load aws-cdk-lib once, with a progress line. Every command that synthesizes
    calls this before importing :mod:`gpufarm.app`."""
    try:
        _, node_warning = prepare_node()
    except NodeNotFoundError as exc:
        bad_input(str(exc))
    if node_warning:
        errors.print(node_warning, markup=False, soft_wrap=True)
    with _step("loading aws-cdk-lib", "aws-cdk-lib loaded"):
        import gpufarm.app  # noqa: F401  (starts the Node process)


def gate(configs: list[TierConfig], out: Path, *, as_json: bool = False) -> bool:
    """Synthesize `configs` into `out` behind every gate `gpufarm synth` runs; True when all passed.

    The gates: the tier config (already loaded), the constructs' own checks, the deploy rules and
    cdk-nag packs (validation plugins, :func:`synthesize`), then cfn-lint on each template. Prints
    the summary table (or, with `as_json`, the JSON document) and each failure on standard error.
    Exits 2 on bad input (a construct rejects the tier, `out` cannot be written). `gpufarm
    deploy` and `gpufarm diff` call this before the CDK CLI.
    """
    from gpufarm.app import ConstructInputError, OutputFolderError

    if out.exists() and not out.is_dir():
        bad_input(f"--out {str(out)!r}: is a file, not a folder")
    context = tested_context()
    try:
        passed = synthesize(configs, out, context)
    except ConstructInputError as exc:
        # A construct rejected a value the config model let through: bad input, not a bug.
        bad_input(str(exc))
    except OutputFolderError as exc:
        bad_input(f"--out {exc}")
    # After synth, so that bad input stays one line.
    errors.print(describe_context(Path.cwd()), markup=False, soft_wrap=True)
    # What each model's time to ready says about its cooldown and startup timeout (ADR 0063).
    # One entry per stack: a tier with `regions` has one in each region.
    stacks = stack_tiers(configs)
    for config in stacks:
        for line in cold_start_warnings(config):
            errors.print(f"warning: {config.stack_name}: {line}", markup=False, soft_wrap=True)
    findings = [] if passed else nag_findings(out)
    if not passed and not findings:
        findings = [
            NagFinding(
                plugin="validation",
                rule="ValidationFailed",
                path="",
                description=f"synth failed validation; see {out / 'validation-report.json'}",
            )
        ]
    lint_available = cfn_lint_installed()
    if not lint_available:
        errors.print(
            "warning: cfn-lint is not installed (a dev dependency: pip install 'gpufarm[dev]'); "
            "templates were not linted",
            markup=False,
            soft_wrap=True,
        )
    summaries = summarize(stacks, out, findings=findings, lint=lint_available)
    orphans = [f for f in findings if not any(f in s.nag for s in summaries)]
    ok = all(s.ok for s in summaries) and not orphans
    if as_json:
        emit_json(
            {
                "outdir": str(out),
                "ok": ok,
                "stacks": [s.to_json() for s in summaries],
                "other_findings": [f.to_json() for f in orphans],
                "cfn_lint": "ran" if lint_available else "skipped",
            }
        )
    else:
        _print(summaries, out)
    _report_failures(summaries, out)
    for f in orphans:
        errors.print(
            f"compliance gate failed: {f.rule} at {f.path or '(app)'}: {f.description}",
            markup=False,
            soft_wrap=True,
        )
    return ok


def register(app: typer.Typer) -> None:
    """Add the `synth` command to the app."""

    @app.command()
    def synth(
        tier: Annotated[
            list[str] | None,
            typer.Option("--tier", help="A preset tier (repeat for several; default: every preset)."),
        ] = None,
        tier_file: Annotated[Path | None, typer.Option("--tier-file", help="A tier YAML file.")] = None,
        out: Annotated[Path, typer.Option("--out", help="Cloud assembly folder.")] = Path("cdk.out"),
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    ) -> None:
        """Synthesize tiers (as `make synth`: cdk-nag gate, then cfn-lint) and summarize each stack:
        resources, GPUs by capacity type, monthly cost estimate, gate results."""
        start_cdk()
        from gpufarm.app import select

        with config_errors():
            configs = select(
                tier or [],
                str(tier_file) if tier_file is not None else None,
                options=("--tier", "--tier-file"),
                source="command line",
            )
        if not gate(configs, out, as_json=as_json):
            raise SystemExit(EXIT_CHECK_FAILED)
