"""`gpufarm status`: a deployed tier read back from AWS and its cluster.

What it reads, all read-only:

- the stack's state and outputs (CloudFormation DescribeStacks) and its target groups
  (ListStackResources);
- each target group's targets and their health (ELBv2 DescribeTargetHealth; `TargetHealth.State`
  is one of initial, healthy, unhealthy, unhealthy.draining, unused, draining, unavailable:
  docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/API_TargetHealth.html);
- the fallback share over the last :data:`FALLBACK_WINDOW_SECONDS`: Amazon Bedrock's `Invocations`
  of the tier's fallback models (`AWS/Bedrock`, dimension `ModelId`) over the gateway target
  group's `RequestCount` (`AWS/ApplicationELB`, dimensions `LoadBalancer` and `TargetGroup`),
  the same CloudWatch estimate as the tier's Grafana "Fallback rate" panel
  (:mod:`gpufarm.constructs.grafana_dashboards`; ALB tiers only: an NLB counts no requests);
- through the Kubernetes API (:class:`gpufarm.aws.kube.KubernetesReader`): nodes per pool and each
  model's Ready pods.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpufarm.aws.kube import KubernetesReader, ModelPods, PoolNodes, model_pods, nodes_per_pool
from gpufarm.aws.stack import StackInfo, StackResource, describe_stack, stack_resources
from gpufarm.config import TierConfig
from gpufarm.config.model import LoadBalancerKind, Provisioning
from gpufarm.core.fallback import bedrock_model_ids
from gpufarm.k8s.labels import MODEL_LABEL

FALLBACK_WINDOW_SECONDS = 900
"""15 minutes: the window of the fallback-rate alert (`gpufarm.k8s.alerting.FALLBACK_WINDOW`)."""

TARGET_GROUP = "AWS::ElasticLoadBalancingV2::TargetGroup"
GATEWAY_TARGET_GROUP_PREFIX = "IngressDefaultRouteTargetGroup"
"""Logical IDs of the gateway's target group start so (construct path `Ingress/Default-Route/TargetGroup`,
:meth:`gpufarm.constructs.ingress.Ingress.route_default_to`); construct IDs are public API."""


@dataclass(frozen=True, kw_only=True)
class TargetGroupHealth:
    """One target group's targets by health state."""

    logical_id: str
    arn: str
    states: dict[str, int]

    @property
    def healthy(self) -> int:
        """Targets in state `healthy`."""
        return self.states.get("healthy", 0)

    @property
    def total(self) -> int:
        """Every registered target."""
        return sum(self.states.values())


@dataclass(frozen=True, kw_only=True)
class FallbackShare:
    """Bedrock's answers against the gateway's requests over the window."""

    window_seconds: int
    bedrock_invocations: float
    gateway_requests: float
    note: str = ""

    @property
    def percent(self) -> float | None:
        """100 x invocations / requests; None when the gateway had no requests."""
        if self.gateway_requests <= 0:
            return None
        return 100.0 * self.bedrock_invocations / self.gateway_requests


@dataclass(kw_only=True)
class StatusReport:
    """Everything `gpufarm status` shows."""

    tier: str
    region: str
    stack: StackInfo
    target_groups: list[TargetGroupHealth] = field(default_factory=list)
    fallback: FallbackShare | None = None
    fallback_note: str = ""
    pools: list[PoolNodes] | None = None
    models: list[ModelPods] | None = None
    kubernetes_note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready mapping."""
        return {
            "tier": self.tier,
            "region": self.region,
            "stack": {
                "name": self.stack.name,
                "status": self.stack.status,
                "reason": self.stack.reason,
                "outputs": self.stack.outputs,
            },
            "target_groups": [
                {
                    "logical_id": t.logical_id,
                    "arn": t.arn,
                    "healthy": t.healthy,
                    "total": t.total,
                    "states": t.states,
                }
                for t in self.target_groups
            ],
            "fallback": None
            if self.fallback is None
            else {
                "window_seconds": self.fallback.window_seconds,
                "bedrock_invocations": self.fallback.bedrock_invocations,
                "gateway_requests": self.fallback.gateway_requests,
                "percent": None if self.fallback.percent is None else round(self.fallback.percent, 2),
            },
            "fallback_note": self.fallback_note,
            "node_pools": None
            if self.pools is None
            else [
                {"pool": p.pool, "nodes": p.nodes, "ready": p.ready, "instance_types": list(p.instance_types)}
                for p in self.pools
            ],
            "models": None
            if self.models is None
            else [
                {"model": m.model, "pods": m.pods, "ready": m.ready, "desired": m.desired}
                for m in self.models
            ],
            "kubernetes_note": self.kubernetes_note,
        }


def target_health(elbv2: Any, resources: list[StackResource]) -> list[TargetGroupHealth]:
    """Health states of every target group of the stack, by logical ID."""
    out: list[TargetGroupHealth] = []
    for resource in sorted(resources, key=lambda r: r.logical_id):
        if resource.type != TARGET_GROUP or not resource.physical_id.startswith("arn:"):
            continue
        descriptions = elbv2.describe_target_health(TargetGroupArn=resource.physical_id)
        states: dict[str, int] = {}
        for target in descriptions.get("TargetHealthDescriptions", []):
            state = str(target.get("TargetHealth", {}).get("State", "unknown"))
            states[state] = states.get(state, 0) + 1
        out.append(TargetGroupHealth(logical_id=resource.logical_id, arn=resource.physical_id, states=states))
    return out


def metric_dimension(arn: str, marker: str) -> str:
    """The CloudWatch dimension value of a load balancer or target group ARN: the part after
    `marker` (`loadbalancer/` gives `app/<name>/<id>`; `:` gives `targetgroup/<name>/<id>`), as the
    ALB metrics page defines the `LoadBalancer` and `TargetGroup` dimensions."""
    return arn.split(marker, 1)[1] if marker != ":" else arn.rsplit(":", 1)[1]


def fallback_share(
    config: TierConfig,
    *,
    elbv2: Any,
    cloudwatch: Any,
    resources: list[StackResource],
    now: dt.datetime,
) -> tuple[FallbackShare | None, str]:
    """The fallback share, or None and why it cannot be read for this tier."""
    if not config.fallback.enabled:
        return None, "the tier has no fallback gateway (fallback.enabled: false)"
    ids = bedrock_model_ids(config)
    if not ids:
        return None, "no model has a Bedrock fallback"
    if config.ingress.kind is not LoadBalancerKind.ALB:
        return (
            None,
            "an NLB publishes no request count; read the gateway's Prometheus series (docs/fallback.md)",
        )
    gateway = next(
        (
            r
            for r in resources
            if r.type == TARGET_GROUP and r.logical_id.startswith(GATEWAY_TARGET_GROUP_PREFIX)
        ),
        None,
    )
    if gateway is None or not gateway.physical_id.startswith("arn:"):
        return None, "the stack has no gateway target group yet"
    groups = elbv2.describe_target_groups(TargetGroupArns=[gateway.physical_id])["TargetGroups"]
    balancers = groups[0].get("LoadBalancerArns", []) if groups else []
    if not balancers:
        return None, "the gateway target group is not attached to a load balancer"
    queries: list[dict[str, Any]] = [
        {
            "Id": f"b{i}",
            "MetricStat": {
                "Metric": {
                    "Namespace": "AWS/Bedrock",
                    "MetricName": "Invocations",
                    "Dimensions": [{"Name": "ModelId", "Value": model_id}],
                },
                "Period": FALLBACK_WINDOW_SECONDS,
                "Stat": "Sum",
            },
        }
        for i, model_id in enumerate(ids)
    ]
    queries.append(
        {
            "Id": "gateway",
            "MetricStat": {
                "Metric": {
                    "Namespace": "AWS/ApplicationELB",
                    "MetricName": "RequestCount",
                    "Dimensions": [
                        {"Name": "LoadBalancer", "Value": metric_dimension(balancers[0], "loadbalancer/")},
                        {"Name": "TargetGroup", "Value": metric_dimension(gateway.physical_id, ":")},
                    ],
                },
                "Period": FALLBACK_WINDOW_SECONDS,
                "Stat": "Sum",
            },
        }
    )
    reply = cloudwatch.get_metric_data(
        MetricDataQueries=queries,
        StartTime=now - dt.timedelta(seconds=FALLBACK_WINDOW_SECONDS),
        EndTime=now,
    )
    sums = {str(r["Id"]): float(sum(r.get("Values", []))) for r in reply.get("MetricDataResults", [])}
    return (
        FallbackShare(
            window_seconds=FALLBACK_WINDOW_SECONDS,
            bedrock_invocations=sum(v for k, v in sums.items() if k != "gateway"),
            gateway_requests=sums.get("gateway", 0.0),
        ),
        "",
    )


def desired_replicas(config: TierConfig) -> dict[str, int | None]:
    """Replicas the tier file asks of each model; None where an autoscaler decides."""
    return {m.name: None if m.autoscaling is not None else m.max_replicas for m in config.models}


KubernetesFactory = Callable[[str], KubernetesReader]
"""Makes a reader for a cluster, by its name (the stack's `ClusterName` output)."""


def read_status(
    config: TierConfig,
    *,
    session: Any,
    kubernetes: KubernetesFactory | None,
    now: dt.datetime | None = None,
) -> StatusReport:
    """The tier's status; raises :class:`gpufarm.aws.stack.StackNotFoundError` when it is not deployed.

    `kubernetes` None skips the cluster reads (and says so in the report); a reader that fails
    (:class:`gpufarm.aws.kube.KubernetesReadError`) is reported as the note, not raised.
    """
    from gpufarm.aws.kube import KubernetesReadError

    region = config.environment.region
    cfn = session.client("cloudformation", region_name=region)
    stack = describe_stack(cfn, config.stack_name)
    resources = stack_resources(cfn, config.stack_name)
    elbv2 = session.client("elbv2", region_name=region)
    report = StatusReport(tier=config.name, region=region, stack=stack)
    report.target_groups = target_health(elbv2, resources)
    report.fallback, report.fallback_note = fallback_share(
        config,
        elbv2=elbv2,
        cloudwatch=session.client("cloudwatch", region_name=region),
        resources=resources,
        now=now or dt.datetime.now(dt.UTC),
    )
    cluster = stack.outputs.get("ClusterName")
    if kubernetes is None:
        report.kubernetes_note = "not read (--no-kubernetes)"
    elif config.cluster.provisioning is Provisioning.EC2:
        report.kubernetes_note = (
            "no cluster (cluster.provisioning: ec2): the target groups' health shows the GPU instances"
        )
    elif config.cluster.provisioning is Provisioning.SAGEMAKER:
        report.kubernetes_note = (
            "no cluster (cluster.provisioning: sagemaker): the models are inference components of "
            f"the SageMaker endpoint {config.stack_name}"
        )
    elif cluster is None:
        report.kubernetes_note = "the stack has no ClusterName output yet"
    else:
        try:
            reader = kubernetes(cluster)
            report.pools = nodes_per_pool(reader.list_nodes())
            report.models = model_pods(
                reader.list_pods(config.serving.namespace, MODEL_LABEL), desired_replicas(config)
            )
        except KubernetesReadError as exc:
            report.kubernetes_note = str(exc)
    return report
