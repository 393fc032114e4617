"""`gpufarm kubeconfig`: write (or print) the kubeconfig entry of a deployed tier's cluster.

The cluster is the stack's `ClusterName` output; the entry is what `aws eks update-kubeconfig`
writes (:func:`gpufarm.aws.eks.kubeconfig_entry`), merged into the file the same way: ``--kubeconfig``,
else the first path of ``KUBECONFIG``, else ``~/.kube/config``; entries of the same name are
replaced, others kept, and the current context becomes the cluster's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from gpufarm.cli._output import EXIT_CHECK_FAILED, bad_input, errors
from gpufarm.cli._tier import TierFileOption, TierOption, one_tier
from gpufarm.config.model import Provisioning


def kubeconfig_path(option: Path | None, environ: dict[str, str] | None = None) -> Path:
    """`option`, else the first entry of KUBECONFIG, else ~/.kube/config (update-kubeconfig's order)."""
    if option is not None:
        return option
    value = (os.environ if environ is None else environ).get("KUBECONFIG", "")
    first = next((p for p in value.split(os.pathsep) if p), None)
    return Path(first) if first else Path.home() / ".kube" / "config"


def read_kubeconfig(path: Path) -> dict[str, Any] | None:
    """The kubeconfig document in `path`; None when the file does not exist or is empty (exit 2 when
    it is not a YAML mapping)."""
    if not path.exists():
        return None
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        bad_input(f"--kubeconfig {str(path)!r}: cannot read it as YAML: {exc}")
    if document is None:
        return None
    if not isinstance(document, dict):
        bad_input(
            f"--kubeconfig {str(path)!r}: must be a kubeconfig (a YAML mapping), "
            f"got {type(document).__name__}"
        )
    return document


def register(app: typer.Typer) -> None:
    """Add the `kubeconfig` command to the app."""

    @app.command()
    def kubeconfig(
        tier: TierOption = None,
        tier_file: TierFileOption = None,
        path: Annotated[
            Path | None,
            typer.Option(
                "--kubeconfig",
                help="File to update (default: the first path of KUBECONFIG, else ~/.kube/config).",
                dir_okay=False,
            ),
        ] = None,
        to_stdout: Annotated[
            bool,
            typer.Option("--print", help="Print the entry to standard output instead of writing a file."),
        ] = False,
    ) -> None:
        """Write the kubeconfig entry of a deployed tier's cluster (as `aws eks update-kubeconfig`)."""
        from gpufarm.aws.eks import ClusterNotReadyError, describe_cluster, kubeconfig_entry, merge_kubeconfig
        from gpufarm.aws.stack import (
            AwsAccessError,
            StackNotFoundError,
            access_error,
            aws_session,
            describe_stack,
        )

        config = one_tier(tier, tier_file, verb="connect to")
        if config.cluster.provisioning is Provisioning.EC2:
            bad_input(
                f"tier {config.name!r} has no EKS cluster (cluster.provisioning: ec2): reach its instances "
                "with Session Manager, `aws ssm start-session --target <instance id>` (docs/ec2.md)"
            )
        if config.cluster.provisioning is Provisioning.SAGEMAKER:
            bad_input(
                f"tier {config.name!r} has no EKS cluster (cluster.provisioning: sagemaker): its models "
                "are inference components of the SageMaker endpoint "
                f"{config.stack_name} (docs/sagemaker.md)"
            )
        region = config.environment.region
        try:
            session = aws_session(region, f"gpufarm kubeconfig reads CloudFormation and EKS in {region}")
        except AwsAccessError as exc:
            bad_input(str(exc))
        try:
            stack = describe_stack(session.client("cloudformation", region_name=region), config.stack_name)
            name = stack.outputs.get("ClusterName")
            if name is None:
                errors.print(
                    f"stack {config.stack_name} ({stack.status}) has no ClusterName output yet", markup=False
                )
                raise SystemExit(EXIT_CHECK_FAILED)
            cluster = describe_cluster(session.client("eks", region_name=region), name)
        except StackNotFoundError:
            errors.print(f"stack {config.stack_name} does not exist in {region}", markup=False)
            raise SystemExit(EXIT_CHECK_FAILED) from None
        except ClusterNotReadyError as exc:
            errors.print(str(exc), markup=False)
            raise SystemExit(EXIT_CHECK_FAILED) from None
        except SystemExit:
            raise
        except Exception as exc:
            if (problem := access_error(exc)) is not None:
                bad_input(str(problem))
            raise
        entry = kubeconfig_entry(
            cluster, profile=session.profile_name if os.environ.get("AWS_PROFILE") else None
        )
        if to_stdout:
            sys.stdout.write(yaml.safe_dump(entry, sort_keys=False))
            return
        target = kubeconfig_path(path)
        merged = merge_kubeconfig(read_kubeconfig(target), entry)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            new = not target.exists()
            target.write_text(yaml.safe_dump(merged, sort_keys=False), encoding="utf-8")
            if new:
                target.chmod(0o600)  # it names the cluster and how to get its credentials
        except OSError as exc:
            bad_input(f"--kubeconfig {str(target)!r}: cannot write it: {exc.strerror or exc}")
        errors.print(
            f"wrote context {cluster.arn} to {target} (now the current context)", markup=False, soft_wrap=True
        )
