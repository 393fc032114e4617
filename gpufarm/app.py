"""The CDK app: which tiers to synthesize, from context, with clean errors and exit codes.

Context keys: ``tier`` (a preset name), ``tier_file`` or ``tier-file`` (a YAML path). With
neither, every preset is synthesized. Exit status: 0 ok, 1 compliance gate failed or an internal
error, 2 invalid input; every error is one line on standard error (``GPUFARM_DEBUG=1`` adds the traceback).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from gpufarm.cdk_context import tested_context
from gpufarm.config import (
    ConfigError,
    ConfigIssue,
    Provisioning,
    TierConfig,
    load_preset,
    load_tier_file,
    preset_names,
)
from gpufarm.config.regions import regional_tiers, source_buckets
from gpufarm.constructs.compliance import enable_compliance_checks
from gpufarm.debug import (
    EXIT_BAD_INPUT,
    EXIT_CHECK_FAILED,
    EXIT_OK,
    debugging,
    internal_error_message,
    one_line,
)
from gpufarm.eks_support import support_status, today
from gpufarm.stacks import DirectTierStack, GpuFarmStack

SUPPORT_WARNING_ID = "gpufarm:kubernetes-support"
"""ID of the warning a stack gets when its Kubernetes version is in, or near, EKS extended support."""


TIER_FILE_KEYS = ("tier_file", "tier-file")
"""The context keys naming a tier file: ``-c tier_file=PATH``, and ``-c tier-file=PATH``, spelt
as the command's ``--tier-file`` (docs/decisions/0059-output-a-person-reads.md)."""


def select_tiers(context: Mapping[str, Any]) -> list[TierConfig]:
    """The tier configs the context asks for; raises :class:`ConfigError` on bad input.

    A key given with an empty value (``-c tier_file=``) is an error, not a key left out. The tier
    file may be given as ``tier_file`` or ``tier-file``, not both.
    """
    files = [(key, str(context[key])) for key in TIER_FILE_KEYS if context.get(key) is not None]
    if len(files) > 1:
        (first, a), (second, b) = files
        raise ConfigError(
            [
                ConfigIssue(
                    path="",
                    message=f"give -c {first} or -c {second}, not both (got -c {first}={_shown(a)} and "
                    f"-c {second}={_shown(b)}); they are two spellings of one setting",
                )
            ],
            source="context",
        )
    key, tier_file = files[0] if files else (TIER_FILE_KEYS[0], None)
    tier = context.get("tier")
    return select(
        [str(tier)] if tier is not None else [],
        tier_file,
        options=("-c tier", f"-c {key}"),
        source="context",
    )


def _shown(value: str) -> str:
    """A value as a user would type it; quoted only when it is empty or holds spaces or controls."""
    return value if re.fullmatch(r"[\w./:@+~-]+", value) else repr(value)


def _given(option: str, value: str) -> str:
    """An option with its value as typed: ``-c tier=poc`` in the context, ``--tier poc`` otherwise."""
    return f"{option}={_shown(value)}" if option.startswith("-c ") else f"{option} {_shown(value)}"


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
    messages as the user gave them (the CDK context keys by default; the command line passes its
    flags); raises :class:`ConfigError` on bad input.
    """
    names = list(dict.fromkeys(tiers))
    if tier_file is not None and not tier_file.strip():
        raise ConfigError(
            [
                ConfigIssue(
                    path="",
                    message=f"{options[1]} must be the path of a tier YAML file, got {tier_file!r}",
                )
            ],
            source=source,
        )
    if names and tier_file:
        given = " ".join(_given(options[0], name) for name in names)
        # A name that is not a plain word is quoted, so the one-line message stays one line.
        parent = _shown(names[0])
        raise ConfigError(
            [
                ConfigIssue(
                    path="",
                    message=f"give either {options[0]} or {options[1]}, not both (got {given} and "
                    f"{_given(options[1], tier_file)}); a tier file can start with `extends: {parent}`",
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


DIRECT_PROVISIONING = (Provisioning.EC2, Provisioning.SAGEMAKER)
"""The provisioning modes without an EKS cluster: their tiers build :class:`DirectTierStack`."""


def stack_of(app: cdk.App, config: TierConfig, *, model_source_bucket: str | None = None) -> cdk.Stack:
    """The tier's stack, by `cluster.provisioning`: :class:`DirectTierStack` for `ec2` and
    `sagemaker` (no EKS cluster, so no Kubernetes support warning), :class:`GpuFarmStack`
    otherwise (a secondary region's with the primary's `model_source_bucket`)."""
    if config.cluster.provisioning in DIRECT_PROVISIONING:
        return DirectTierStack(app, config=config)
    if model_source_bucket is None:
        return GpuFarmStack(app, config=config)
    return GpuFarmStack(app, config=config, model_source_bucket=model_source_bucket)


def add_tiers(
    app: cdk.App,
    configs: list[TierConfig],
    *,
    each: Callable[[TierConfig], AbstractContextManager[object]] | None = None,
    day: dt.date | None = None,
) -> cdk.App:
    """Add one stack per config and region (`regions`) to `app` and put the compliance gate on it.

    The stack class follows `cluster.provisioning` (:func:`stack_of`). An EKS stack whose
    Kubernetes version is in, or within 60 days of, EKS extended support gets a
    warning (:func:`support_warning`, ID :data:`SUPPORT_WARNING_ID`), which `cdk synth` prints.
    `each` wraps the building of each stack (the command line shows progress with it); default:
    nothing. `day`: the date the warning judges by (default: today, UTC).
    """
    day = day or today()
    for config in configs:
        # With `regions`, one stack per region (gpufarm.config.regions): the tier's own first,
        # under its unchanged name, then each secondary region's.
        buckets = source_buckets(config)
        for tier in regional_tiers(config):
            with each(tier) if each else nullcontext():
                stack = stack_of(
                    app, tier, model_source_bucket=buckets[0] if tier is not config and buckets else None
                )
            eks = tier.cluster.provisioning not in DIRECT_PROVISIONING
            if eks and (warning := support_warning(tier, day)):
                cdk.Annotations.of(stack).add_warning_v2(SUPPORT_WARNING_ID, warning)
    enable_compliance_checks(app)
    return app


GATE_FAILED_PREFIX = "ValidationFailed:"
"""How aws-cdk-lib's synth error begins when a validation plugin (cdk-nag, deploy rules) failed.

A construct's own validation fails with `ValidationFailedWithErrors: ...` instead, which is not
the gate (aws-cdk-lib 2.275.0, core/lib/private/synthesis-validation.js and synthesis.js).
"""
STAGING_PREFIX = ".gpufarm-staging-"


class ConstructInputError(Exception):
    """A construct (gpufarm's or aws-cdk-lib's) rejected a value of a tier that passed validation.

    Bad input, exit status 2: the message names the tier's source, the stack and the construct's
    own message, on one line.
    """


class OutputFolderError(Exception):
    """The folder a cloud assembly should go to is a file, or cannot be created or written.

    `reason` says why, such as "is a file, not a folder" or "cannot write to it: Not a directory".
    """

    def __init__(self, folder: Path, reason: str) -> None:
        self.folder = folder
        self.reason = reason
        super().__init__(f"{str(folder)!r}: {reason}")


class GateFailedError(Exception):
    """The compliance gate failed: a cdk-nag finding is not acknowledged or a deploy rule broken."""


def is_gate_failure(exc: BaseException) -> bool:
    """True when a synth error is the compliance gate's (see :data:`GATE_FAILED_PREFIX`)."""
    return isinstance(exc, RuntimeError) and str(exc).startswith(GATE_FAILED_PREFIX)


CONSTRUCT_VALIDATION_PREFIX = "ValidationFailedWithErrors:"
"""How aws-cdk-lib's synth error begins when a construct's own validation (`node.add_validation`) failed."""


@contextmanager
def building(source: str, stack_name: str) -> Iterator[None]:
    """Turn a construct's rejection of a tier into :class:`ConstructInputError` naming its source."""
    try:
        yield
    except (ValueError, RuntimeError) as exc:
        # A ValueError is a gpufarm construct's check; aws-cdk-lib's checks reach Python through
        # jsii as a RuntimeError. Building depends on nothing but the tier, so either is bad input.
        raise ConstructInputError(
            f"invalid {source}: stack {stack_name}: a construct rejected the tier: {one_line(str(exc))}"
        ) from exc


@contextmanager
def staged(outdir: Path | None) -> Iterator[Path | None]:
    """A folder to synthesize into that becomes `outdir`'s content only when synth completes.

    Yields a new hidden folder inside `outdir` (created when missing); when the block ends
    normally or with :class:`GateFailedError` (the assembly is complete, and its
    validation-report.json is where the message points), every entry of it replaces the entry of
    the same name in `outdir`; on any other error it is removed, so a failed synth leaves no
    partial assembly. A cloud assembly refers to its files by relative paths, so it can move.
    With `outdir` None, yields None (the CDK picks a temporary folder of its own).
    """
    if outdir is None:
        yield None
        return
    if outdir.exists() and not outdir.is_dir():
        raise OutputFolderError(outdir, "is a file, not a folder")
    try:
        outdir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=outdir))
    except OSError as exc:
        raise OutputFolderError(outdir, f"cannot write to it: {exc.strerror or exc}") from None
    try:
        try:
            yield staging
        except GateFailedError:
            _publish(staging, outdir)
            raise
        _publish(staging, outdir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _publish(staging: Path, outdir: Path) -> None:
    for entry in sorted(staging.iterdir()):
        target = outdir / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        os.replace(entry, target)


def _outdir_from_environment() -> Path | None:
    value = os.environ.get(OUTDIR_ENV)
    return Path(value) if value else None


OUTDIR_ENV = "CDK_OUTDIR"
"""Where the CDK CLI tells the app to write the cloud assembly (its `--output`, default cdk.out)."""


def _report(message: str, exc: BaseException | None = None) -> None:
    if exc is not None and debugging():
        traceback.print_exception(exc, file=sys.stderr)
    print(message, file=sys.stderr)


def main(*, context: Mapping[str, Any] | None = None, outdir: str | Path | None = None) -> int:
    """Entry point of `app.py` (run by the CDK CLI): exit 0, 1 or 2 with a message, no traceback.

    `context` is added to the CDK context the CLI passes (`-c`); `outdir` is where the cloud
    assembly goes (default: the CLI's, from ``CDK_OUTDIR``; without either, as `python app.py`,
    ``cdk.out`` in the working folder, which the app names on standard error: a temporary folder,
    the CDK's default, is deleted when the process exits).

    2: bad input (a tier, the context, a value a construct rejects, an output folder that cannot
    be written); 1: the compliance gate failed, or an internal error. The cloud assembly is
    written to the output folder only when synth completes (:func:`staged`). With
    ``GPUFARM_DEBUG=1`` the traceback is printed before the message.
    """
    try:
        return _synth_app(context or {}, Path(outdir) if outdir is not None else _outdir_from_environment())
    except ConfigError as exc:
        _report(exc.render(), exc)
        return EXIT_BAD_INPUT
    except ConstructInputError as exc:
        _report(str(exc), exc)
        return EXIT_BAD_INPUT
    except GateFailedError as exc:
        _report(str(exc), exc)
        return EXIT_CHECK_FAILED
    except OutputFolderError as exc:
        _report(f"invalid output folder {exc} ({OUTDIR_ENV}, the CDK CLI's --output)", exc)
        return EXIT_BAD_INPUT
    except Exception as exc:
        _report(internal_error_message("gpufarm app", exc), exc)
        return EXIT_CHECK_FAILED


PLAIN_RUN_OUTDIR = Path("cdk.out")
"""Where `python app.py` writes when no CDK CLI gives a folder: where the CLI would (its default
`--output`). Not the CDK's default, a temporary folder: aws-cdk-lib deletes that when the Node
process exits (aws/aws-cdk#36043, "temporary Cloud Assemblies are not cleaned up")."""


def _synth_app(extra_context: Mapping[str, Any], outdir: Path | None) -> int:
    # Run as `python app.py`, not by the CDK CLI: write to ./cdk.out and say so.
    announce = outdir is None
    # Absolute: jsii's Node process resolves a relative folder against its own working folder.
    outdir = outdir or PLAIN_RUN_OUTDIR.resolve()
    with staged(outdir) as staging:
        # gpufarm's tested feature flags are the defaults; the CDK CLI's (cdk.json, -c) win over
        # them (aws-cdk-lib 2.275.0, core/lib/app.d.ts, AppProps.context), and the stacks warn
        # about any that differ (gpufarm.constructs.feature_flags).
        app = new_app(
            context={**tested_context(), **extra_context},
            outdir=str(staging) if staging is not None else None,
        )
        context = {
            key: value
            for key in ("tier", *TIER_FILE_KEYS)
            if (value := app.node.try_get_context(key)) is not None
        }
        configs = select_tiers(context)
        source = next((str(context[key]) for key in TIER_FILE_KEYS if context.get(key)), None)
        add_tiers(
            app,
            configs,
            each=lambda config: building(source or f"preset {config.name!r}", config.stack_name),
        )
        try:
            app.synth()
        except RuntimeError as exc:
            if is_gate_failure(exc):
                raise GateFailedError(
                    "compliance gate failed: unacknowledged cdk-nag findings or broken deploy rules; "
                    f"see {outdir or app.outdir}/validation-report.json"
                ) from exc
            if str(exc).startswith(CONSTRUCT_VALIDATION_PREFIX):
                where = source or ", ".join(f"preset {config.name!r}" for config in configs)
                raise ConstructInputError(
                    f"invalid {where}: a construct rejected the tier at synth: "
                    f"{one_line(str(exc).removeprefix(CONSTRUCT_VALIDATION_PREFIX))}"
                ) from exc
            raise
    if announce:
        print(f"cloud assembly written to {outdir}", file=sys.stderr)
    return EXIT_OK
