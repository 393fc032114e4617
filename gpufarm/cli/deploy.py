"""`gpufarm deploy` and `gpufarm diff`: the gates of `gpufarm synth`, then the pinned CDK CLI.

Both synthesize the tier in-process behind every gate `gpufarm synth` runs (config validation,
the constructs' checks, deploy rules, cdk-nag, cfn-lint: :func:`gpufarm.cli.synth.gate`) and
stop with exit status 1 before any CDK call when one fails. Then the CDK CLI deploys, or diffs,
exactly the assembly that passed (:mod:`gpufarm.cli._cdk`), with the stack's CloudFormation events
printed as they happen. A CDK CLI failure is exit status 1 and one line naming the command; no
AWS credentials at all is bad input (exit 2), found before the gates run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpufarm.cli._cdk import CdkAction, CdkNotFoundError, cdk_command, failure_line, find_cdk, run_cdk
from gpufarm.cli._output import EXIT_CHECK_FAILED, bad_input, errors
from gpufarm.cli._tier import OutOption, TierFileOption, TierOption, one_tier
from gpufarm.config import TierConfig
from gpufarm.config.regions import regional_tiers


def locate_cdk() -> Path:
    """The CDK CLI to run from the working folder (exit 2 with what to install when there is none)."""
    try:
        return find_cdk(Path.cwd())
    except CdkNotFoundError as exc:
        bad_input(str(exc))


def require_credentials(config: TierConfig, *, action: str) -> None:
    """Exit 2 with what is needed when boto3's credential chain (the one the CDK CLI also follows:
    environment, profiles, SSO, container and instance roles) finds no credentials, before the
    gates spend half a minute."""
    from gpufarm.aws.stack import AwsAccessError, aws_session

    region = config.environment.region
    try:
        aws_session(
            region, f"gpufarm {action} runs the CDK CLI against stack {config.stack_name} in {region}"
        )
    except AwsAccessError as exc:
        bad_input(str(exc))


def gated_assembly(config: TierConfig, out: Path, *, action: str) -> None:
    """Synthesize `config` into `out` behind synth's gates; exit 1 when one failed (no CDK call)."""
    from gpufarm.cli.synth import gate, start_cdk

    start_cdk()
    # Absolute: the Node process behind aws-cdk-lib resolves a relative outdir against its own
    # working folder, which is the one it started in.
    if not gate([config], out.absolute()):
        errors.print(
            f"{action} stopped: {config.stack_name} did not pass the gates above; the CDK CLI was not run",
            markup=False,
            soft_wrap=True,
        )
        raise SystemExit(EXIT_CHECK_FAILED)


def run_action(action: CdkAction, executable: Path, config: TierConfig, out: Path, *, approve: bool) -> None:
    """Run the CDK CLI's `action` on each of the tier's stacks in `out` (one per region with
    `regions`, the tier's own region first); exit 1 with one line at the first that fails."""
    for tier in regional_tiers(config):
        run = cdk_command(action, executable=executable, assembly=out, stack=tier.stack_name, approve=approve)
        errors.print(f"running {run.display}", markup=False, soft_wrap=True)
        status = run_cdk(run, cwd=Path.cwd())
        if status != 0:
            errors.print(failure_line(run, status), markup=False, soft_wrap=True)
            raise SystemExit(EXIT_CHECK_FAILED)


def register(app: typer.Typer) -> None:
    """Add the `deploy` and `diff` commands to the app."""

    @app.command()
    def deploy(
        tier: TierOption = None,
        tier_file: TierFileOption = None,
        out: OutOption = Path("cdk.out"),
        yes: Annotated[
            bool,
            typer.Option(
                "--yes",
                help="Do not ask before IAM or security-group changes that widen access "
                "(the CDK CLI's --require-approval never).",
            ),
        ] = False,
    ) -> None:
        """Deploy one tier: the gates of `gpufarm synth`, then `cdk deploy` with the stack's events."""
        config = one_tier(tier, tier_file, verb="deploy")
        require_credentials(config, action="deploy")
        executable = locate_cdk()
        gated_assembly(config, out, action="deploy")
        run_action(CdkAction.DEPLOY, executable, config, out, approve=yes)

    @app.command()
    def diff(
        tier: TierOption = None,
        tier_file: TierFileOption = None,
        out: OutOption = Path("cdk.out"),
    ) -> None:
        """Compare one tier with its deployed stack: the gates of `gpufarm synth`, then `cdk diff`."""
        config = one_tier(tier, tier_file, verb="diff")
        require_credentials(config, action="diff")
        executable = locate_cdk()
        gated_assembly(config, out, action="diff")
        run_action(CdkAction.DIFF, executable, config, out, approve=False)
