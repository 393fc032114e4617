"""The CDK app: which tiers to synthesize, from context, with clean errors and exit codes.

Context keys: ``tier`` (a preset name), ``tier_file`` (a YAML path). With neither, every preset
is synthesized. Exit status: 0 ok, 1 compliance gate failed, 2 invalid input.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import aws_cdk as cdk

from gpufarm.config import ConfigError, ConfigIssue, TierConfig, load_preset, load_tier_file, preset_names
from gpufarm.constructs.compliance import enable_compliance_checks
from gpufarm.eks_support import support_status, today
from gpufarm.stacks import GpuFarmStack

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT = 0, 1, 2
SUPPORT_WARNING_ID = "gpufarm:kubernetes-support"
"""ID of the warning a stack gets when its Kubernetes version is in, or near, EKS extended support."""


def select_tiers(context: Mapping[str, Any]) -> list[TierConfig]:
    """The tier configs the context asks for; raises :class:`ConfigError` on bad input.

    A key given with an empty value (``-c tier_file=``) is an error, not a key left out.
    """
    tier, tier_file = context.get("tier"), context.get("tier_file")
    return select(
        [str(tier)] if tier is not None else [],
        str(tier_file) if tier_file is not None else None,
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

    An empty or blank `tier_file` (``-c tier_file=``, ``--tier-file ''``) is refused, never read as
    "no tier file": it would otherwise synthesize every preset. `options` names the two inputs in
    the message for giving both (the CDK context keys by default; the command line passes its
    flags); raises :class:`ConfigError` on bad input.
    """
    names = list(dict.fromkeys(tiers))
    if tier_file is not None and not tier_file.strip():
        raise ConfigError(
            [
                ConfigIssue(
                    path="tier_file",
                    message=f"{options[1]} must be the path of a tier YAML file, got {tier_file!r}",
                )
            ],
            source=source,
        )
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
    if tier_file is not None:
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
    configs: list[TierConfig],
    *,
    context: Mapping[str, Any] | None = None,
    outdir: str | None = None,
    day: dt.date | None = None,
) -> cdk.App:
    """An app holding one stack per config, with the compliance checks enabled.

    `day` is the date the Kubernetes support warnings judge by (default: today, UTC).
    """
    return add_tiers(new_app(context=context, outdir=outdir), configs, day=day)


def support_warning(config: TierConfig, day: dt.date | None = None) -> str | None:
    """The warning for a tier whose Kubernetes version is in EKS extended support on `day`, or
    leaves standard support within 60 days of it (:mod:`gpufarm.eks_support`); None otherwise.
    Default `day`: today (UTC)."""
    return support_status(config.cluster.kubernetes_version, day or today()).warning()


def add_tiers(
    app: cdk.App,
    configs: list[TierConfig],
    *,
    each: Callable[[TierConfig], AbstractContextManager[object]] | None = None,
    day: dt.date | None = None,
) -> cdk.App:
    """Add one stack per config to `app` and put the compliance gate on it.

    A stack whose Kubernetes version is in, or within 60 days of, EKS extended support gets a
    warning (:func:`support_warning`, ID :data:`SUPPORT_WARNING_ID`), which `cdk synth` prints.
    `each` wraps the building of each stack (the command line shows progress with it); default:
    nothing. `day`: the date the warning judges by (default: today, UTC).
    """
    day = day or today()
    for config in configs:
        with each(config) if each else nullcontext():
            stack = GpuFarmStack(app, config=config)
        if warning := support_warning(config, day):
            cdk.Annotations.of(stack).add_warning_v2(SUPPORT_WARNING_ID, warning)
    enable_compliance_checks(app)
    return app


def main() -> int:
    """Entry point of `app.py` (run by the CDK CLI)."""
    probe = cdk.App(builtin_cloud_formation_validation=False)
    # `is not None`: the CDK CLI passes `-c tier_file=` as the empty string (aws-cdk@2.1148.1
    # lib/cli/user-configuration.js, parseStringContextListToObject), which select_tiers refuses.
    context = {
        key: probe.node.try_get_context(key)
        for key in ("tier", "tier_file")
        if probe.node.try_get_context(key) is not None
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
