"""KEDA: scale vLLM Deployments on their metrics in Amazon Managed Prometheus, signed through Pod Identity."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from gpufarm.config.model import AutoscalingConfig, ModelConfig
from gpufarm.constructs._util import acknowledge, pod_identity_role
from gpufarm.constructs.cluster import helm_chart_on, values_through_image_cache
from gpufarm.k8s import autoscaling as k8s_autoscaling

CHART_TIMEOUT = cdk.Duration.minutes(10)
"""How long Helm waits for the KEDA pods (operator, metrics server, webhook) to be ready."""
QUERY_ACTIONS = ("aps:QueryMetrics",)
"""What the prometheus scaler calls: GET <workspace>/api/v1/query, authorized as aps:QueryMetrics."""

_WORKSPACE_ARN = re.compile(r"^arn:aws[a-z-]*:aps:([a-z0-9-]+):\d{12}:workspace/(ws-[A-Za-z0-9-]+)$")
_QUERY_ENDPOINT = re.compile(
    r"^https://aps-workspaces\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/workspaces/(ws-[A-Za-z0-9-]+)$"
)


class KedaAutoscaling(Construct):
    """Installs KEDA and scales each model that sets `autoscaling` on its vLLM metrics.

    Creates a Pod Identity role for the KEDA operator allowed `aps:QueryMetrics` on the one
    workspace (nothing else), its association with `<config.namespace>/keda-operator` (created
    before the chart, so the operator starts with credentials), the `keda` chart pinned to
    `config.keda_chart_version` (wait for ready pods, 10-minute timeout), and one manifest with
    the TriggerAuthentication and a ScaledObject per autoscaled model in `serving_namespace`,
    applied after the chart (its CRDs) and after each model's Deployment in `after`. Models
    without `autoscaling` keep their fixed replicas and are skipped. A prefill/decode model with
    `prefill_decode.prefill_autoscaling` also gets a ScaledObject for its prefill Deployment, on
    its prefill pods' series (key `<model>/prefill` in :attr:`scaled_objects`).

    `query_endpoint` is `https://aps-workspaces.<region>.amazonaws.com/workspaces/<workspace id>`,
    not the workspace's `PrometheusEndpoint` attribute (that one ends in `/api/v1/`, and KEDA
    appends `/api/v1/query` itself). `node_selector` (default: none) pins the KEDA pods to
    labelled nodes; they carry no GPU toleration either way. The managed scraper must keep the
    `namespace` label on vLLM's series: the queries select on it and on `model_name`.
    `target_optimizer` (default off): the models sit behind the ALB Target Optimizer, whose cap
    keeps vLLM's queue empty, so each also scales on in-flight requests against that cap.
    A model with `min_replicas: 0` also wakes on the gateway's demand counter
    (:func:`gpufarm.k8s.autoscaling.wake_query`): the gateway must run in `serving_namespace`,
    count the model and be scraped (`PrometheusMonitoring(gateway_namespace=...)`);
    `scrape_interval_seconds` (default 30) is the scraper's interval, which sizes that query's range.
    On an :class:`~gpufarm.constructs.InferenceCluster`'s cluster the chart waits for its system
    nodes (:meth:`InferenceCluster.add_helm_chart`).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        config: AutoscalingConfig,
        workspace_arn: str,
        query_endpoint: str,
        region: str,
        models: Sequence[ModelConfig],
        serving_namespace: str,
        after: Mapping[str, Construct] | None = None,
        node_selector: Mapping[str, str] | None = None,
        target_optimizer: bool = False,
        image_digests: Mapping[str, str] | None = None,
        scrape_interval_seconds: int = k8s_autoscaling.DEFAULT_SCRAPE_INTERVAL_SECONDS,
    ) -> None:
        super().__init__(scope, id)
        after = dict(after or {})
        scaled = _validate(
            models, after, workspace_arn=workspace_arn, query_endpoint=query_endpoint, region=region
        )
        self.config = config
        self.role = pod_identity_role(
            self, "OperatorRole", description="KEDA operator: query vLLM metrics in Amazon Managed Prometheus"
        )
        self.role.add_to_policy(iam.PolicyStatement(actions=list(QUERY_ACTIONS), resources=[workspace_arn]))
        acknowledge(
            self.role,
            "NIST.800.53.R5-IAMNoInlinePolicy",
            "The KEDA operator's Pod Identity role may only query this tier's Prometheus workspace; "
            "the grant is inline so that it belongs to this role alone: it cannot be attached to "
            "another principal and is deleted with the role.",
        )
        self.pod_identity = eks.CfnPodIdentityAssociation(
            self,
            "OperatorPodIdentity",
            cluster_name=cluster.cluster_name,
            namespace=config.namespace,
            service_account=k8s_autoscaling.OPERATOR_SERVICE_ACCOUNT,
            role_arn=self.role.role_arn,
        )
        values = values_through_image_cache(
            cluster,
            k8s_autoscaling.keda_values(
                node_selector=dict(node_selector) if node_selector else None, digests=image_digests
            ),
        )
        self.chart = helm_chart_on(
            cluster,
            self,
            "Chart",
            chart=k8s_autoscaling.KEDA_CHART,
            repository=k8s_autoscaling.KEDA_REPOSITORY,
            version=config.keda_chart_version,
            release="keda",
            namespace=config.namespace,
            create_namespace=True,
            values=values,
            wait=True,
            timeout=CHART_TIMEOUT,
        )
        # The values' nulls delete chart defaults (the CPU limits), but a None inside a map does
        # not survive the hand-over to aws-cdk-lib: the key would vanish and Helm would keep the
        # default. The kubectl handler json.loads() this property into the values file, so the
        # JSON text carries the nulls through. The only token the values can hold is the account
        # in the image cache's registry, a string token CloudFormation resolves inside the text.
        handler = self.chart.node.default_child
        assert isinstance(handler, Construct) and isinstance(handler.node.default_child, cdk.CfnResource)
        handler.node.default_child.add_property_override("Values", json.dumps(values))
        # The operator reads its credentials when its pod starts: role, policy and association first.
        self.chart.node.add_dependency(self.pod_identity, self.role)
        self.scaled_objects: dict[str, dict[str, Any]] = {
            model.name: k8s_autoscaling.scaled_object(
                model,
                namespace=serving_namespace,
                query_endpoint=query_endpoint,
                region=region,
                capped=target_optimizer,
                scrape_interval_seconds=scrape_interval_seconds,
            )
            for model in scaled
            if model.autoscaling is not None
        }
        # A prefill/decode model's prefill pods, scaled on their own series (key `<model>/prefill`).
        for model in scaled:
            if model.prefill_decode is not None and model.prefill_decode.prefill_autoscaling is not None:
                self.scaled_objects[f"{model.name}/prefill"] = k8s_autoscaling.prefill_scaled_object(
                    model, namespace=serving_namespace, query_endpoint=query_endpoint, region=region
                )
        self.manifest = eks.KubernetesManifest(
            self,
            "ScaledObjects",
            cluster=cluster,
            manifest=[
                k8s_autoscaling.trigger_authentication(serving_namespace),
                *self.scaled_objects.values(),
            ],
            overwrite=True,
        )
        self.manifest.node.add_dependency(self.chart)
        for name in sorted(after):
            self.manifest.node.add_dependency(after[name])


def _validate(
    models: Sequence[ModelConfig],
    after: Mapping[str, Construct],
    *,
    workspace_arn: str,
    query_endpoint: str,
    region: str,
) -> list[ModelConfig]:
    """The autoscaled models, after checking the inputs; raises ValueError on the first problem."""
    counts = Counter(m.name for m in models)
    duplicates = sorted(name for name, n in counts.items() if n > 1)
    if duplicates:
        raise ValueError(
            f"'models' must have unique names, got {duplicates[0]!r} {counts[duplicates[0]]} times"
        )
    scaled = [m for m in models if m.autoscaling is not None or _scales_prefill(m)]
    if not scaled:
        raise ValueError(
            "'models' must include a model with 'autoscaling' (KEDA would have nothing to scale), "
            f"got none among {[m.name for m in models]}"
        )
    for model in scaled:
        issues = k8s_autoscaling.model_autoscaling_issues(model) if model.autoscaling is not None else []
        if _scales_prefill(model):
            issues += k8s_autoscaling.prefill_autoscaling_issues(model)
        if issues:
            raise ValueError(issues[0])
    unknown = sorted(set(after) - {m.name for m in scaled})
    if unknown:
        raise ValueError(
            f"'after' must name autoscaled models ({', '.join(m.name for m in scaled)}), got {unknown}"
        )
    _validate_workspace(workspace_arn=workspace_arn, query_endpoint=query_endpoint, region=region)
    return scaled


def _scales_prefill(model: ModelConfig) -> bool:
    return model.prefill_decode is not None and model.prefill_decode.prefill_autoscaling is not None


def _validate_workspace(*, workspace_arn: str, query_endpoint: str, region: str) -> None:
    """Check the workspace ARN and query URL where they are known at synth time (not tokens)."""
    arn_workspace = endpoint_workspace = endpoint_region = None
    if not cdk.Token.is_unresolved(workspace_arn):
        arn = _WORKSPACE_ARN.match(workspace_arn)
        if not arn:
            raise ValueError(
                "'workspace_arn' must be an Amazon Managed Prometheus workspace ARN "
                f"(arn:aws:aps:<region>:<account>:workspace/<id>), got {workspace_arn!r}"
            )
        arn_workspace = arn.group(2)
    if not cdk.Token.is_unresolved(query_endpoint):
        endpoint = _QUERY_ENDPOINT.match(query_endpoint)
        if not endpoint:
            raise ValueError(
                "'query_endpoint' must be https://aps-workspaces.<region>.amazonaws.com/workspaces/"
                f"<workspace id> (without '/api/v1/'), got {query_endpoint!r}"
            )
        endpoint_region, endpoint_workspace = endpoint.groups()
    if endpoint_region and not cdk.Token.is_unresolved(region) and endpoint_region != region:
        raise ValueError(
            f"'query_endpoint' must be in region {region!r} (the 'region' given), got {query_endpoint!r}"
        )
    if arn_workspace and endpoint_workspace and arn_workspace != endpoint_workspace:
        raise ValueError(
            f"'query_endpoint' must name the workspace of 'workspace_arn' ({arn_workspace}), "
            f"got {endpoint_workspace}"
        )
