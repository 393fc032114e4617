"""`gpufarm destroy`: the hand steps of docs/operations.md, `cdk destroy`, and what stays behind.

The tier is synthesized first (the assembly `cdk destroy` works on, and the template whose
DeletionPolicy says what is retained). A tier that no longer passes the compliance gate can still
be destroyed: the gate's result is a warning here. The AWS steps are in :mod:`gpufarm.aws.teardown`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from gpufarm.cli._cdk import CdkAction, cdk_command, failure_line, run_cdk
from gpufarm.cli._output import EXIT_CHECK_FAILED, EXIT_OK, bad_input, errors, table
from gpufarm.cli._tier import OutOption, TierFileOption, TierOption, one_tier
from gpufarm.cli.deploy import locate_cdk
from gpufarm.config import TierConfig


def can_ask() -> bool:
    """True when standard input is a terminal someone can answer the question on."""
    return sys.stdin.isatty()


def _synthesize(config: TierConfig, out: Path) -> None:
    from gpufarm.cdk_context import tested_context
    from gpufarm.cli.synth import start_cdk, synthesize

    start_cdk()
    from gpufarm.app import ConstructInputError, OutputFolderError

    if out.exists() and not out.is_dir():
        bad_input(f"--out {str(out)!r}: is a file, not a folder")
    try:
        passed = synthesize([config], out.absolute(), tested_context())
    except ConstructInputError as exc:
        bad_input(str(exc))
    except OutputFolderError as exc:
        bad_input(f"--out {exc}")
    if not passed:
        errors.print(
            f"warning: {config.stack_name} does not pass the compliance gate today "
            f"(see {out / 'validation-report.json'}); destroying it anyway",
            markup=False,
            soft_wrap=True,
        )


def register(app: typer.Typer) -> None:
    """Add the `destroy` command to the app."""

    @app.command()
    def destroy(
        tier: TierOption = None,
        tier_file: TierFileOption = None,
        out: OutOption = Path("cdk.out"),
        yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    ) -> None:
        """Destroy one tier: protections off, `cdk destroy`, retained FSx and security group cleared if
        they hold the VPC, then the list of what is retained."""
        from gpufarm.aws.stack import AwsAccessError, StackNotFoundError, access_error, aws_session
        from gpufarm.aws.teardown import (
            destroy_until_gone,
            leftover_instances,
            plan_teardown,
            release_retained,
            stack_status,
            unprotect,
        )

        config = one_tier(tier, tier_file, verb="destroy")
        if not yes and not can_ask():
            bad_input("gpufarm destroy asks for confirmation: run it in a terminal, or pass --yes")
        region = config.environment.region
        try:
            session = aws_session(
                region, f"gpufarm destroy reads and changes stack {config.stack_name} in {region}"
            )
        except AwsAccessError as exc:
            bad_input(str(exc))
        executable = locate_cdk()
        _synthesize(config, out)
        template = json.loads((out / f"{config.stack_name}.template.json").read_text(encoding="utf-8"))

        def say(line: str) -> None:
            errors.print(line, markup=False, soft_wrap=True)

        try:
            plan = plan_teardown(session, region, config.stack_name, template)
        except StackNotFoundError:
            say(f"stack {config.stack_name} does not exist in {region}: nothing to destroy")
            raise SystemExit(EXIT_OK) from None
        except Exception as exc:
            if (problem := access_error(exc)) is not None:
                bad_input(str(problem))
            raise
        say(f"gpufarm destroy will, in {region}:")
        for step in plan.steps():
            say(f"  - {step}")
        if not yes and not typer.confirm(f"Destroy {config.stack_name}?", default=False, err=True):
            say("nothing was changed")
            raise SystemExit(EXIT_CHECK_FAILED)
        unprotect(
            session.client("cloudformation", region_name=region),
            session.client("elbv2", region_name=region),
            plan,
            say,
        )
        run = cdk_command(CdkAction.DESTROY, executable=executable, assembly=out, stack=config.stack_name)
        say(f"running {run.display}")
        released: set[str] = set()

        def release() -> None:
            release_retained(session, region, plan, say)
            released.update(r.logical_id for r in plan.file_systems + plan.security_groups)

        status = destroy_until_gone(
            plan,
            run_destroy=lambda: run_cdk(run, cwd=Path.cwd()),
            status_now=lambda: stack_status(session, region, config.stack_name),
            release=release,
            say=say,
        )
        if status != 0:
            say(failure_line(run, status))
            raise SystemExit(EXIT_CHECK_FAILED)
        cluster = plan.stack.outputs.get("ClusterName")
        if cluster:
            left = leftover_instances(session.client("ec2", region_name=region), cluster)
            if left:
                say(
                    f"warning: {len(left)} instance(s) still tagged kubernetes.io/cluster/{cluster}=owned "
                    f"(launched by Karpenter or Auto Mode, not deleted with the stack): {', '.join(left)}; "
                    f"terminate them with aws ec2 terminate-instances --instance-ids {' '.join(left)}"
                )
        kept = [r for r in plan.retained if r.logical_id not in released]
        if kept:
            table(
                f"Retained after destroying {config.stack_name} (DeletionPolicy Retain): still billed "
                "where they hold data; docs/operations.md says how to delete each",
                ("Logical ID", "Type", "Name or ID"),
                [(r.logical_id, r.type, r.physical_id or "(not created)") for r in kept],
            )
        else:
            say(f"{config.stack_name} is destroyed; the template retains nothing")
