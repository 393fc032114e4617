"""The CDK app: which tiers to synthesize, from context, with clean errors and exit codes.

Context keys: ``tier`` (a preset name), ``tier_file`` (a YAML path). With neither, every preset
is synthesized. Exit status: 0 ok, 1 compliance gate failed, 2 invalid input.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import aws_cdk as cdk

from gpufarm.config import ConfigError, ConfigIssue, TierConfig, load_preset, load_tier_file, preset_names
from gpufarm.constructs.compliance import enable_compliance_checks
from gpufarm.stacks import GpuFarmStack

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def select_tiers(context: Mapping[str, Any]) -> list[TierConfig]:
    """The tier configs the context asks for; raises :class:`ConfigError` on bad input."""
    tier, tier_file = context.get("tier"), context.get("tier_file")
    return select(
        [str(tier)] if tier else [],
        str(tier_file) if tier_file else None,
        options=("-c tier", "-c tier_file"),
        source="context",
    )


def select(
    tiers: Sequence[str],
    tier_file: str | None,
    *,
    options: tuple[str, str] = ("-c tier", "-c tier_file"),
    source: str = "context",
) -> list[TierConfig]:
    """Presets by name (in order, each once), or one tier file, or every preset when given neither.

    `options` names the two inputs in the message for giving both (the CDK context keys by
    default; the command line passes its flags); raises :class:`ConfigError` on bad input.
    """
    names = list(dict.fromkeys(tiers))
    if names and tier_file:
        given = names[0] if len(names) == 1 else names
        raise ConfigError(
            [
                ConfigIssue(
                    path="tier",
                    message=f"give either {options[0]} or {options[1]}, not both (got tier={given!r}, "
                    f"tier_file={tier_file!r}); a tier file can start with `extends: {names[0]}`",
                )
            ],
            source=source,
        )
    if tier_file:
        return [load_tier_file(tier_file)]
    if names:
        return [load_preset(name) for name in names]
    return [load_preset(name) for name in preset_names()]


def new_app(*, context: Mapping[str, Any] | None = None, outdir: str | None = None) -> cdk.App:
    """A CDK app as gpufarm synthesizes it: aws-cdk-lib's built-in template validation is off.

    That plugin (a WebAssembly CloudFormation validator, on by default since aws-cdk-lib 2.27x)
    reports its findings as warnings only and costs about 2 s per synth; cfn-lint, pinned and
    run by `make synth`, `gpufarm synth` and every tier test, is the gate instead
    (docs/decisions/0028-builtin-template-validation-off.md).
    """
    return cdk.App(context=dict(context or {}), outdir=outdir, builtin_cloud_formation_validation=False)


def build_app(
    configs: list[TierConfig], *, context: Mapping[str, Any] | None = None, outdir: str | None = None
) -> cdk.App:
    """An app holding one stack per config, with the compliance checks enabled."""
    return add_tiers(new_app(context=context, outdir=outdir), configs)


def add_tiers(
    app: cdk.App,
    configs: list[TierConfig],
    *,
    each: Callable[[TierConfig], AbstractContextManager[object]] | None = None,
) -> cdk.App:
    """Add one stack per config to `app` and put the compliance gate on it.

    `each` wraps the building of each stack (the command line shows progress with it); default:
    nothing.
    """
    for config in configs:
        with each(config) if each else nullcontext():
            GpuFarmStack(app, config=config)
    enable_compliance_checks(app)
    return app


def main() -> int:
    """Entry point of `app.py` (run by the CDK CLI)."""
    probe = cdk.App(builtin_cloud_formation_validation=False)
    context = {
        key: probe.node.try_get_context(key)
        for key in ("tier", "tier_file")
        if probe.node.try_get_context(key)
    }
    try:
        configs = select_tiers(context)
    except ConfigError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_BAD_INPUT
    app = add_tiers(probe, configs)
    try:
        app.synth()
    except RuntimeError as exc:
        if "ValidationFailed" in str(exc):
            print(
                "compliance gate failed: unacknowledged cdk-nag findings or broken deploy rules; "
                f"see {app.outdir}/validation-report.json",
                file=sys.stderr,
            )
            return EXIT_CHECK_FAILED
        raise
    return EXIT_OK
