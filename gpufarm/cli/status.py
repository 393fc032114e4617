"""`gpufarm status`: a deployed tier's stack, target health, fallback share, nodes and models.

Reads with boto3 (:mod:`gpufarm.aws.status`) and, unless ``--no-kubernetes``, the cluster's
Kubernetes API with an EKS token for the caller (:mod:`gpufarm.aws.kube`). Without AWS
credentials: exit 2 and one line saying what is needed. A stack that does not exist: exit 1.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from gpufarm.cli._output import EXIT_CHECK_FAILED, bad_input, emit_json, errors, progress, say, table
from gpufarm.cli._tier import TierFileOption, TierOption, one_tier

HEALTHY_STACK_STATES = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"})
"""Stack states in which the stack matches its template and nothing is in progress."""


def kubernetes_factory(session: Any, region: str) -> Any:
    """Readers of a cluster by name: eks:DescribeCluster for the endpoint, an EKS token for the caller."""
    from botocore.exceptions import BotoCoreError, ClientError

    from gpufarm.aws.eks import ClusterNotReadyError, describe_cluster, eks_token
    from gpufarm.aws.kube import ApiServerReader, KubernetesReadError

    def make(cluster_name: str) -> ApiServerReader:
        try:
            cluster = describe_cluster(session.client("eks", region_name=region), cluster_name)
        except ClusterNotReadyError as exc:
            raise KubernetesReadError(str(exc)) from None
        except (ClientError, BotoCoreError) as exc:
            raise KubernetesReadError(f"eks:DescribeCluster {cluster_name}: {exc}") from None
        return ApiServerReader(
            endpoint=cluster.endpoint,
            certificate_authority=cluster.certificate_authority,
            token=eks_token(session, cluster_name),
        )

    return make


def _print(report: Any) -> None:
    stack = report.stack
    say(f"{stack.name} in {report.region}: {stack.status}" + (f" ({stack.reason})" if stack.reason else ""))
    if report.target_groups:
        table(
            "Target health",
            ("Target group", "Healthy", "Targets", "States"),
            [
                (
                    t.logical_id,
                    t.healthy,
                    t.total,
                    ", ".join(f"{k} {v}" for k, v in sorted(t.states.items())) or "no targets",
                )
                for t in report.target_groups
            ],
        )
    if report.fallback is not None:
        share = report.fallback.percent
        say(
            f"fallback share, last {report.fallback.window_seconds // 60} min: "
            + ("no gateway requests" if share is None else f"{share:.1f}%")
            + f" ({report.fallback.bedrock_invocations:g} Bedrock invocations, "
            f"{report.fallback.gateway_requests:g} gateway requests)",
        )
    else:
        say(f"fallback share: n/a ({report.fallback_note})")
    if report.pools is not None:
        table(
            "Nodes per pool",
            ("Pool", "Ready", "Nodes", "Instance types"),
            [(p.pool, p.ready, p.nodes, ", ".join(p.instance_types)) for p in report.pools],
        )
    if report.models is not None:
        table(
            "Models",
            ("Model", "Ready pods", "Pods", "Replicas (tier)"),
            [
                (m.model, m.ready, m.pods, "autoscaled" if m.desired is None else str(m.desired))
                for m in report.models
            ],
        )
    if report.kubernetes_note:
        say(f"kubernetes: {report.kubernetes_note}")


def register(app: typer.Typer) -> None:
    """Add the `status` command to the app."""

    @app.command()
    def status(
        tier: TierOption = None,
        tier_file: TierFileOption = None,
        no_kubernetes: Annotated[
            bool, typer.Option("--no-kubernetes", help="Read only AWS, not the cluster's Kubernetes API.")
        ] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    ) -> None:
        """Show a deployed tier: stack state, target health, fallback share, nodes per pool, models ready."""
        from gpufarm.aws.stack import AwsAccessError, StackNotFoundError, access_error, aws_session
        from gpufarm.aws.status import read_status

        config = one_tier(tier, tier_file, verb="show")
        region = config.environment.region
        try:
            session = aws_session(
                region,
                f"gpufarm status reads CloudFormation, ELBv2, CloudWatch and EKS in {region} "
                "(and the cluster's Kubernetes API)",
            )
        except AwsAccessError as exc:
            bad_input(str(exc))
        try:
            with progress(f"Reading {config.stack_name} in {region}", quiet=as_json):
                report = read_status(
                    config,
                    session=session,
                    kubernetes=None if no_kubernetes else kubernetes_factory(session, region),
                )
        except StackNotFoundError:
            errors.print(f"stack {config.stack_name} does not exist in {region}", markup=False)
            raise SystemExit(EXIT_CHECK_FAILED) from None
        except Exception as exc:
            if (problem := access_error(exc)) is not None:
                bad_input(str(problem))
            raise
        if as_json:
            emit_json(report.to_dict())
        else:
            _print(report)
        if report.stack.status not in HEALTHY_STACK_STATES:
            raise SystemExit(EXIT_CHECK_FAILED)
