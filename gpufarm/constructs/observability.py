"""Observability: Amazon Managed Prometheus with its managed scraper, CloudWatch alarms and a dashboard.

* :class:`PrometheusMonitoring`: an AMP workspace, an AWS managed scraper (`AWS::APS::Scraper`)
  that collects the vLLM and DCGM exporter metrics, and NVIDIA's DCGM exporter on GPU nodes.
  KEDA reads the workspace through :attr:`PrometheusMonitoring.query_endpoint`.
* :class:`InferenceAlarms`: load balancer alarms (5xx, p99 latency, unhealthy targets, Target
  Optimizer rejections) sent to an encrypted SNS topic.
* :class:`InferenceDashboard`: one CloudWatch dashboard per tier, built as JSON here.

See docs/decisions/0016-managed-scraper.md.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_aps as aps
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from gpufarm.config.model import AlarmsConfig, LoadBalancerKind, PrometheusConfig
from gpufarm.constructs._util import construct_id, limit_grants_to_aws_services
from gpufarm.constructs.cluster import helm_chart_on
from gpufarm.k8s.observability import dcgm_exporter_values, scrape_configuration, scraper_rbac

DCGM_REPOSITORY = "https://nvidia.github.io/dcgm-exporter/helm-charts"
DCGM_CHART = "dcgm-exporter"
DCGM_NAMESPACE = "dcgm-exporter"
SCRAPER_SERVICE = "scraper.aps.amazonaws.com"
ALB_NAMESPACE = "AWS/ApplicationELB"
NLB_NAMESPACE = "AWS/NetworkELB"
CLOUDWATCH_SERVICE = "cloudwatch.amazonaws.com"
PERIOD_SECONDS = 60
"""ALB metrics arrive once a minute; every alarm evaluates one-minute periods."""

_DASHBOARD_NAME = re.compile(r"^[A-Za-z0-9_-]{1,255}$")


# =============================================================================== Prometheus


class PrometheusMonitoring(Construct):
    """An AMP workspace fed by an AWS managed scraper, plus NVIDIA's DCGM exporter.

    The scraper discovers the vLLM pods in `serving_namespace` and the DCGM exporter pods
    through the Kubernetes API and scrapes them through network interfaces in `subnets` (at
    least two, in two Availability Zones), guarded by `security_groups`: those must reach the
    cluster endpoint on 443 and the pods on the vLLM port and 9400 (the cluster security group
    does when nodes use it). The cluster endpoint must have private access.

    Cluster access: with EKS access entries (authentication mode `API` or
    `API_AND_CONFIG_MAP`, the aws_eks_v2 default) AMP creates the scraper's access entry
    itself when the scraper is created; EKS refuses access entries for service-linked roles
    from anyone else, so none is declared here. `rbac=True` also applies the
    `aps-collector-role` ClusterRole and its binding to `aps-collector-user`, for clusters
    that map the scraper's role through the `aws-auth` ConfigMap (the mapping stays theirs).

    Defaults: the workspace (alias: the stack name) is retained when removed from the stack
    (`removal_policy`) and encrypted with an AWS owned key; with `key`, with that customer
    managed key, and the scraper then writes through a role pair (`RoleConfiguration`), as AMP
    requires for such workspaces. The DCGM exporter (when `config.dcgm_exporter`) is installed
    from NVIDIA's chart repository at `config.dcgm_exporter_chart_version` into
    `dcgm_namespace` ("dcgm-exporter"); on an :class:`~gpufarm.constructs.InferenceCluster`'s
    cluster it waits for the system nodes (:meth:`InferenceCluster.add_helm_chart`).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        config: PrometheusConfig,
        subnets: Sequence[ec2.ISubnet],
        security_groups: Sequence[ec2.ISecurityGroup],
        serving_namespace: str,
        key: kms.IKey | None = None,
        dcgm_namespace: str = DCGM_NAMESPACE,
        rbac: bool = False,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        if not config.enabled:
            raise ValueError("'config.enabled' must be true to build PrometheusMonitoring, got False")
        if not 2 <= len(subnets) <= 5:
            raise ValueError(
                f"'subnets' must name 2-5 subnets in at least two Availability Zones, got {len(subnets)}"
            )
        if not 1 <= len(security_groups) <= 5:
            raise ValueError(
                "'security_groups' must name 1-5 security groups reaching the pods and the endpoint, "
                f"got {len(security_groups)}"
            )
        blob = scrape_configuration(
            scrape_interval_seconds=config.scrape_interval_seconds,
            serving_namespace=serving_namespace,
            dcgm_namespace=dcgm_namespace,
        )
        self.config = config
        self.key = key
        self.scrape_configuration = blob
        stack = cdk.Stack.of(self)
        alias = stack.stack_name[:100]
        self.workspace = aps.CfnWorkspace(
            self, "Resource", alias=alias, kms_key_arn=key.key_arn if key else None
        )
        # The workspace holds the metric history (150 days by default): kept like a log group.
        self.workspace.apply_removal_policy(removal_policy)
        self.source_role: iam.Role | None = None
        self.target_role: iam.Role | None = None
        role_configuration = self._role_configuration(key) if key else None
        self.scraper = aps.CfnScraper(
            self,
            "Scraper",
            alias=alias,
            source=aps.CfnScraper.SourceProperty(
                eks_configuration=aps.CfnScraper.EksConfigurationProperty(
                    cluster_arn=cluster.cluster_arn,
                    subnet_ids=[s.subnet_id for s in subnets],
                    security_group_ids=[g.security_group_id for g in security_groups],
                )
            ),
            destination=aps.CfnScraper.DestinationProperty(
                amp_configuration=aps.CfnScraper.AmpConfigurationProperty(
                    workspace_arn=self.workspace.attr_arn
                )
            ),
            scrape_configuration=aps.CfnScraper.ScrapeConfigurationProperty(configuration_blob=blob),
            role_configuration=role_configuration,
        )
        self.rbac_manifest: eks.KubernetesManifest | None = None
        if rbac:
            self.rbac_manifest = eks.KubernetesManifest(
                self, "ScraperRbac", cluster=cluster, manifest=scraper_rbac(), overwrite=True
            )
        self.dcgm_exporter: eks.HelmChart | None = None
        if config.dcgm_exporter:
            self.dcgm_exporter = helm_chart_on(
                cluster,
                self,
                "DcgmExporter",
                chart=DCGM_CHART,
                repository=DCGM_REPOSITORY,
                version=config.dcgm_exporter_chart_version,
                release=DCGM_CHART,
                namespace=dcgm_namespace,
                create_namespace=True,
                values=dcgm_exporter_values(),
                wait=True,
                timeout=cdk.Duration.minutes(10),
            )

    @property
    def workspace_arn(self) -> str:
        """ARN of the workspace."""
        return self.workspace.attr_arn

    @property
    def workspace_id(self) -> str:
        """ID of the workspace (`ws-...`)."""
        return self.workspace.attr_workspace_id

    @property
    def query_endpoint(self) -> str:
        """The workspace's Prometheus URL without trailing slash, as KEDA's `serverAddress` takes it.

        `https://aps-workspaces.<region>.<url suffix>/workspaces/<id>`; clients append
        `/api/v1/query`. (The workspace's `PrometheusEndpoint` attribute is the same URL with a
        trailing `/`.)
        """
        stack = cdk.Stack.of(self)
        return f"https://aps-workspaces.{stack.region}.{stack.url_suffix}/workspaces/{self.workspace_id}"

    @property
    def scraper_role_arn(self) -> str:
        """ARN of the scraper's service-linked role (the principal of its EKS access entry)."""
        return self.scraper.attr_role_arn

    def grant_query(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow `grantee` to run PromQL queries (`aps:QueryMetrics`) against the workspace.

        That is all KEDA's Prometheus scaler calls (`GET <workspace>/api/v1/query`). With a
        customer managed key, `kms:Decrypt` on it is granted as well (readers of such a
        workspace need it).
        """
        if self.key is not None:
            self.key.grant_decrypt(grantee)
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["aps:QueryMetrics"], resource_arns=[self.workspace_arn]
        )

    def _role_configuration(self, key: kms.IKey) -> aps.CfnScraper.RoleConfigurationProperty:
        """The role pair a scraper needs to write into a workspace encrypted with a customer key.

        The scraper's ARN is not known before it exists, so the trust conditions name this
        account's scrapers in this Region rather than the one scraper.
        """
        stack = cdk.Stack.of(self)
        scrapers = f"arn:{stack.partition}:aps:{stack.region}:{stack.account}:scraper/*"
        self.source_role = iam.Role(
            self,
            "ScraperSourceRole",
            assumed_by=iam.ServicePrincipal(
                SCRAPER_SERVICE,
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {"aws:SourceArn": scrapers},
                },
            ),
            description="AMP managed scraper: assumes the role that writes to the workspace",
        )
        self.target_role = iam.Role(
            self,
            "ScraperTargetRole",
            assumed_by=iam.ArnPrincipal(self.source_role.role_arn).with_conditions(
                {"StringLike": {"sts:ExternalId": scrapers}}
            ),
            description="AMP managed scraper: remote-writes into the customer-key workspace",
        )
        self.target_role.add_to_policy(
            iam.PolicyStatement(actions=["aps:RemoteWrite"], resources=[self.workspace.attr_arn])
        )
        key.grant(self.target_role, "kms:Decrypt", "kms:GenerateDataKey")
        self.source_role.add_to_policy(
            iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[self.target_role.role_arn])
        )
        return aps.CfnScraper.RoleConfigurationProperty(
            source_role_arn=self.source_role.role_arn, target_role_arn=self.target_role.role_arn
        )


# =============================================================================== alarms


def _subscription_id(email: str) -> str:
    """A construct ID per address: readable, and distinct even where punctuation is all that differs."""
    digest = hashlib.sha256(email.lower().encode()).hexdigest()[:8]
    return f"Email{construct_id(email)}{digest}"


def _dimensions(**values: str) -> list[cloudwatch.CfnAlarm.DimensionProperty]:
    return [cloudwatch.CfnAlarm.DimensionProperty(name=k, value=v) for k, v in values.items()]


LOAD_BALANCER_NAMESPACES = {LoadBalancerKind.ALB: ALB_NAMESPACE, LoadBalancerKind.NLB: NLB_NAMESPACE}
"""The CloudWatch namespace each kind of load balancer publishes its metrics in."""


def load_balancer_kind(
    kind: LoadBalancerKind | None, network: bool | None, construct: str
) -> LoadBalancerKind:
    """The `kind` an alarms or dashboard construct was given, or the one the deprecated `network` names.

    `network=True` was the keyword before `kind`; it still works, with a DeprecationWarning.
    """
    if network is None:
        return kind or LoadBalancerKind.ALB
    warnings.warn(
        f"{construct}(network=...) is deprecated: pass kind=LoadBalancerKind."
        f"{'NLB' if network else 'ALB'} instead",
        DeprecationWarning,
        # Past this function, the construct's __init__ and jsii's metaclass __call__: the caller.
        stacklevel=4,
    )
    named = LoadBalancerKind.NLB if network else LoadBalancerKind.ALB
    if kind is not None and kind is not named:
        raise ValueError(f"'network' must agree with 'kind' ({kind.value!r}), got network={network}")
    return named


def _check_target_optimizer(kind: LoadBalancerKind, target_optimizer: bool) -> None:
    if kind is LoadBalancerKind.NLB and target_optimizer:
        raise ValueError("'target_optimizer' must be false with kind 'nlb' (an ALB feature), got True")


class InferenceAlarms(Construct):
    """CloudWatch alarms on the inference load balancer, notifying an encrypted SNS topic.

    Alarms (every period one minute, a breach must last `config.evaluation_minutes`; alarm and
    OK notifications both go to :attr:`topic`):

    * ``5xx``: 5xx answers of the load balancer plus those of the targets, per minute,
      at least `config.target_5xx_per_minute` (one math expression over
      `HTTPCode_ELB_5XX_Count` and `HTTPCode_Target_5XX_Count`).
    * ``p99:<model>``: p99 `TargetResponseTime` of the model's target group above
      `config.p99_response_seconds` (time to the first response byte, so long streams count
      only their start).
    * ``unhealthy:<model>``: `UnHealthyHostCount` (maximum) of the target group above 0.

    `target_groups` maps a name to a target group's full name: a model, or `<model>/<share>`
    for each target group of a model split into weighted shares (its alarms then sit under
    the construct `<Model>/<Share>` and are keyed ``p99:<model>/<share>``).
    * ``target-control-rejects`` (when `target_optimizer`): `TargetControlRequestRejectCount`
      at least `config.target_5xx_per_minute` per minute. CloudWatch publishes it per load
      balancer (and Availability Zone), not per target group, so there is one such alarm.

    With `kind` NLB (a Network Load Balancer, which publishes no HTTP codes or response times) the
    alarms are ``unhealthy:<model>`` on `AWS/NetworkELB` and ``target-resets``: TCP resets sent
    by the targets (`TCP_Target_Reset_Count`), at least `config.target_5xx_per_minute` per minute.
    `network=True` is the deprecated spelling of `kind=LoadBalancerKind.NLB`.

    Missing data is not breaching for all of them: the load balancer publishes nothing in a
    minute without requests, and a scaled-to-zero model has no targets.

    The topic is encrypted with `key`, else with a new customer managed key (rotation on,
    `removal_policy`). CloudWatch, on behalf of this account's alarms in this Region, may use
    the key (`kms:Decrypt`, `kms:GenerateDataKey*`) and publish to the topic; without the key
    statement alarm notifications are dropped silently. It is added to a key defined in this
    app; an imported key's policy cannot be changed here and must already allow it. The topic
    policy also denies publishing without TLS. Each address in `config.emails` gets an email subscription
    (it must be confirmed from the mail AWS sends).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        load_balancer_full_name: str,
        target_groups: Mapping[str, str],
        config: AlarmsConfig,
        target_optimizer: bool,
        key: kms.IKey | None = None,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
        kind: LoadBalancerKind | None = None,
        network: bool | None = None,
    ) -> None:
        super().__init__(scope, id)
        if not config.enabled:
            raise ValueError("'config.enabled' must be true to build InferenceAlarms, got False")
        self.kind = load_balancer_kind(kind, network, "InferenceAlarms")
        """The load balancer whose metrics the alarms read."""
        _check_target_optimizer(self.kind, target_optimizer)
        self._namespace = LOAD_BALANCER_NAMESPACES[self.kind]
        if not target_groups:
            raise ValueError("'target_groups' must map at least one model to its target group, got {}")
        self.config = config
        stack = cdk.Stack.of(self)
        self.key = key or limit_grants_to_aws_services(
            kms.Key(
                self,
                "TopicKey",
                description="Encrypts the inference alarm topic; CloudWatch alarms publish with it",
                enable_key_rotation=True,
                removal_policy=removal_policy,
            )
        )
        # Only this account's alarms in this Region act through CloudWatch (confused deputy).
        this_accounts_alarms = {
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {
                "aws:SourceArn": f"arn:{stack.partition}:cloudwatch:{stack.region}:{stack.account}:alarm:*"
            },
        }
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsEncrypt",
                principals=[iam.ServicePrincipal(CLOUDWATCH_SERVICE)],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions=this_accounts_alarms,
            )
        )
        self.topic = sns.Topic(
            self, "Topic", display_name="Inference alarms", master_key=self.key, enforce_ssl=True
        )
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal(CLOUDWATCH_SERVICE)],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions=this_accounts_alarms,
            )
        )
        for email in sorted(set(config.emails)):
            sns.CfnSubscription(
                self,
                _subscription_id(email),
                topic_arn=self.topic.topic_arn,
                protocol="email",
                endpoint=email,
            )

        self.alarms: dict[str, cloudwatch.CfnAlarm] = {}
        lb = load_balancer_full_name
        if self.kind is LoadBalancerKind.NLB:
            self._network_alarms(lb, target_groups)
            return
        self.alarms["5xx"] = self._alarm(
            self,
            "Http5xx",
            description=(
                f"Load balancer and vLLM 5xx responses reached {config.target_5xx_per_minute} per minute "
                f"for {config.evaluation_minutes} min"
            ),
            comparison="GreaterThanOrEqualToThreshold",
            threshold=config.target_5xx_per_minute,
            metrics=[
                self._query("elb", "HTTPCode_ELB_5XX_Count", "Sum", LoadBalancer=lb),
                self._query("target", "HTTPCode_Target_5XX_Count", "Sum", LoadBalancer=lb),
                cloudwatch.CfnAlarm.MetricDataQueryProperty(
                    id="errors",
                    expression="FILL(elb, 0) + FILL(target, 0)",
                    label="5xx per minute",
                    return_data=True,
                ),
            ],
        )
        for model, target_group in sorted(target_groups.items()):
            scope_ = self._scope_of(model)
            dims = _dimensions(LoadBalancer=lb, TargetGroup=target_group)
            self.alarms[f"p99:{model}"] = self._alarm(
                scope_,
                "P99ResponseTime",
                description=(
                    f"{model}: p99 time to first response byte above {config.p99_response_seconds:g} s "
                    f"for {config.evaluation_minutes} min"
                ),
                comparison="GreaterThanThreshold",
                threshold=config.p99_response_seconds,
                metric_name="TargetResponseTime",
                extended_statistic="p99",
                dimensions=dims,
            )
            self.alarms[f"unhealthy:{model}"] = self._alarm(
                scope_,
                "UnhealthyHosts",
                description=(
                    f"{model}: at least one vLLM pod failed its /health check for "
                    f"{config.evaluation_minutes} min"
                ),
                comparison="GreaterThanThreshold",
                threshold=0,
                metric_name="UnHealthyHostCount",
                statistic="Maximum",
                dimensions=dims,
            )
        if target_optimizer:
            self.alarms["target-control-rejects"] = self._alarm(
                self,
                "TargetControlRejects",
                description=(
                    "Every target was at its concurrency limit: the load balancer rejected "
                    f"{config.target_5xx_per_minute}+ requests per minute for {config.evaluation_minutes} min"
                ),
                comparison="GreaterThanOrEqualToThreshold",
                threshold=config.target_5xx_per_minute,
                metric_name="TargetControlRequestRejectCount",
                statistic="Sum",
                dimensions=_dimensions(LoadBalancer=lb),
            )

    def _network_alarms(self, lb: str, target_groups: Mapping[str, str]) -> None:
        config = self.config
        for model, target_group in sorted(target_groups.items()):
            self.alarms[f"unhealthy:{model}"] = self._alarm(
                self._scope_of(model),
                "UnhealthyHosts",
                description=(
                    f"{model}: at least one vLLM pod failed its /health check for "
                    f"{config.evaluation_minutes} min"
                ),
                comparison="GreaterThanThreshold",
                threshold=0,
                metric_name="UnHealthyHostCount",
                statistic="Maximum",
                dimensions=_dimensions(LoadBalancer=lb, TargetGroup=target_group),
            )
        self.alarms["target-resets"] = self._alarm(
            self,
            "TargetResets",
            description=(
                f"vLLM pods reset {config.target_5xx_per_minute}+ TCP connections per minute for "
                f"{config.evaluation_minutes} min"
            ),
            comparison="GreaterThanOrEqualToThreshold",
            threshold=config.target_5xx_per_minute,
            metric_name="TCP_Target_Reset_Count",
            statistic="Sum",
            dimensions=_dimensions(LoadBalancer=lb),
        )

    def _scope_of(self, key: str) -> Construct:
        """The scope of a target group's alarms: `<Model>`, or `<Model>/<Share>` for a key 'model/share'.

        Nested rather than joined, so a share's IDs can never equal another model's.
        """
        scope: Construct = self
        for part in key.split("/"):
            child = scope.node.try_find_child(construct_id(part))
            scope = child if isinstance(child, Construct) else Construct(scope, construct_id(part))
        return scope

    @staticmethod
    def _query(
        id: str, metric: str, stat: str, **dimensions: str
    ) -> cloudwatch.CfnAlarm.MetricDataQueryProperty:
        return cloudwatch.CfnAlarm.MetricDataQueryProperty(
            id=id,
            metric_stat=cloudwatch.CfnAlarm.MetricStatProperty(
                metric=cloudwatch.CfnAlarm.MetricProperty(
                    namespace=ALB_NAMESPACE, metric_name=metric, dimensions=_dimensions(**dimensions)
                ),
                period=PERIOD_SECONDS,
                stat=stat,
            ),
            return_data=False,
        )

    @functools.cached_property
    def _topic_arn(self) -> str:
        """The topic's ARN token, read from jsii once rather than twice per alarm."""
        return self.topic.topic_arn

    def _alarm(
        self,
        scope: Construct,
        id: str,
        *,
        description: str,
        comparison: str,
        threshold: float,
        metrics: Sequence[cloudwatch.CfnAlarm.MetricDataQueryProperty] | None = None,
        metric_name: str | None = None,
        statistic: str | None = None,
        extended_statistic: str | None = None,
        dimensions: Sequence[cloudwatch.CfnAlarm.DimensionProperty] | None = None,
    ) -> cloudwatch.CfnAlarm:
        single = metric_name is not None
        minutes = self.config.evaluation_minutes
        return cloudwatch.CfnAlarm(
            scope,
            id,
            alarm_description=description,
            comparison_operator=comparison,
            threshold=threshold,
            evaluation_periods=minutes,
            datapoints_to_alarm=minutes,
            treat_missing_data="notBreaching",
            alarm_actions=[self._topic_arn],
            ok_actions=[self._topic_arn],
            metrics=metrics,
            namespace=self._namespace if single else None,
            metric_name=metric_name,
            statistic=statistic,
            extended_statistic=extended_statistic,
            dimensions=dimensions,
            period=PERIOD_SECONDS if single else None,
        )


# =============================================================================== dashboard


def _lb_metric(namespace: str, metric: str, label: str, stat: str, **dimensions: str) -> list[Any]:
    entry: list[Any] = [namespace, metric]
    for name, value in dimensions.items():
        entry += [name, value]
    entry.append({"label": label, "stat": stat})
    return entry


def _alb_metric(metric: str, label: str, stat: str, **dimensions: str) -> list[Any]:
    return _lb_metric(ALB_NAMESPACE, metric, label, stat, **dimensions)


def _nlb_metric(metric: str, label: str, stat: str, **dimensions: str) -> list[Any]:
    return _lb_metric(NLB_NAMESPACE, metric, label, stat, **dimensions)


def _graph(title: str, region: str, metrics: list[list[Any]], *, y_label: str) -> dict[str, Any]:
    return {
        "type": "metric",
        "width": 12,
        "height": 6,
        "properties": {
            "title": title,
            "region": region,
            "view": "timeSeries",
            "stacked": False,
            "period": PERIOD_SECONDS,
            "metrics": metrics,
            "yAxis": {"left": {"label": y_label, "min": 0, "showUnits": False}},
        },
    }


def _text(markdown: str, *, height: int) -> dict[str, Any]:
    return {"type": "text", "width": 24, "height": height, "properties": {"markdown": markdown}}


def _placed(widgets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Widgets with x/y set: left to right in a 24-column grid, a new row when one is full."""
    x = y = row_height = 0
    placed = []
    for widget in widgets:
        if x + widget["width"] > 24:
            x, y, row_height = 0, y + row_height, 0
        placed.append({**widget, "x": x, "y": y})
        x += widget["width"]
        row_height = max(row_height, widget["height"])
    return placed


PROMQL_QUERIES = (
    ("Requests waiting, per model", "sum by (model) (vllm:num_requests_waiting)"),
    ("Requests running, per model", "sum by (model) (vllm:num_requests_running)"),
    ("KV-cache use, per pod", "max by (model, pod) (vllm:kv_cache_usage_perc)"),
    ("GPU utilisation, per node", "avg by (node) (DCGM_FI_DEV_GPU_UTIL)"),
    ("GPU memory used (MiB), per pod", "sum by (namespace, pod) (DCGM_FI_DEV_FB_USED)"),
)
"""PromQL for the engine and GPU series in the AMP workspace, which CloudWatch cannot graph."""


def dashboard_body(
    *,
    load_balancer_full_name: str,
    target_groups: Mapping[str, str],
    region: str,
    target_optimizer: bool,
    workspace_query: bool = False,
    kind: LoadBalancerKind = LoadBalancerKind.ALB,
) -> dict[str, Any]:
    """The dashboard body (the `DashboardBody` JSON, as a dict) for one load balancer and its models.

    Rows: requests and 5xx per model; p50/p99 time to first byte per model; healthy and
    unhealthy targets, one widget per model; Target Optimizer requests and rejections (when
    `target_optimizer`); with `workspace_query`, the PromQL to run against the AMP workspace
    for queue depth, KV-cache use and GPU utilisation.

    `kind` NLB (a Network Load Balancer, which sees connections, not requests) replaces the
    request, error and latency rows with what `AWS/NetworkELB` publishes: new and active flows,
    bytes, and TCP resets by who sent them (load-balancer-wide: an NLB publishes these per load
    balancer and zone only), and the target rows come from the same namespace.
    """
    lb = load_balancer_full_name
    models = sorted(target_groups.items())
    if kind is LoadBalancerKind.NLB:
        widgets = _network_widgets(lb, models, region)
    else:
        widgets = _application_widgets(lb, models, region, target_optimizer)
    if workspace_query:
        rows = "\n".join(f"| {title} | `{query}` |" for title, query in PROMQL_QUERIES)
        widgets.append(
            _text(
                "## Engine and GPU metrics (Amazon Managed Prometheus)\n"
                "Run these in the workspace (Grafana or `awscurl` against its query endpoint):\n\n"
                "| Signal | PromQL |\n|---|---|\n" + rows,
                height=6,
            )
        )
    return {"start": "-PT3H", "periodOverride": "inherit", "widgets": _placed(widgets)}


def _network_widgets(lb: str, models: list[tuple[str, str]], region: str) -> list[dict[str, Any]]:
    widgets = [
        _text(
            "# Inference\nNetwork Load Balancer metrics (`AWS/NetworkELB`). An NLB sees TCP flows, "
            "not HTTP requests: time to first token and errors are vLLM's, in Amazon Managed "
            "Prometheus.",
            height=2,
        ),
        _graph(
            "Flows",
            region,
            [
                _nlb_metric("NewFlowCount", "new per minute", "Sum", LoadBalancer=lb),
                _nlb_metric("ActiveFlowCount", "active", "Average", LoadBalancer=lb),
            ],
            y_label="flows",
        ),
        _graph(
            "Bytes processed per minute",
            region,
            [_nlb_metric("ProcessedBytes", "bytes", "Sum", LoadBalancer=lb)],
            y_label="bytes",
        ),
        _graph(
            "TCP resets per minute",
            region,
            [
                _nlb_metric("TCP_Target_Reset_Count", "from vLLM pods", "Sum", LoadBalancer=lb),
                _nlb_metric("TCP_Client_Reset_Count", "from clients", "Sum", LoadBalancer=lb),
                _nlb_metric("TCP_ELB_Reset_Count", "from the load balancer", "Sum", LoadBalancer=lb),
            ],
            y_label="resets",
        ),
    ]
    widgets += [
        _graph(
            f"Targets: {m}",
            region,
            [
                _nlb_metric("HealthyHostCount", "healthy", "Minimum", TargetGroup=tg, LoadBalancer=lb),
                _nlb_metric("UnHealthyHostCount", "unhealthy", "Maximum", TargetGroup=tg, LoadBalancer=lb),
            ],
            y_label="pods",
        )
        for m, tg in models
    ]
    return widgets


def _application_widgets(
    lb: str, models: list[tuple[str, str]], region: str, target_optimizer: bool
) -> list[dict[str, Any]]:
    widgets: list[dict[str, Any]] = [
        _text(
            "# Inference\nLoad balancer metrics (`AWS/ApplicationELB`), one line per model. "
            "Response time is the time to the first response byte.",
            height=2,
        ),
        _graph(
            "Requests per minute",
            region,
            [_alb_metric("RequestCount", m, "Sum", TargetGroup=tg, LoadBalancer=lb) for m, tg in models],
            y_label="requests",
        ),
        _graph(
            "5xx per minute",
            region,
            [_alb_metric("HTTPCode_ELB_5XX_Count", "load balancer", "Sum", LoadBalancer=lb)]
            + [
                _alb_metric("HTTPCode_Target_5XX_Count", m, "Sum", TargetGroup=tg, LoadBalancer=lb)
                for m, tg in models
            ],
            y_label="responses",
        ),
        _graph(
            "Response time p50",
            region,
            [
                _alb_metric("TargetResponseTime", m, "p50", TargetGroup=tg, LoadBalancer=lb)
                for m, tg in models
            ],
            y_label="seconds",
        ),
        _graph(
            "Response time p99",
            region,
            [
                _alb_metric("TargetResponseTime", m, "p99", TargetGroup=tg, LoadBalancer=lb)
                for m, tg in models
            ],
            y_label="seconds",
        ),
    ]
    widgets += [
        _graph(
            f"Targets: {m}",
            region,
            [
                _alb_metric("HealthyHostCount", "healthy", "Minimum", TargetGroup=tg, LoadBalancer=lb),
                _alb_metric("UnHealthyHostCount", "unhealthy", "Maximum", TargetGroup=tg, LoadBalancer=lb),
            ],
            y_label="pods",
        )
        for m, tg in models
    ]
    if target_optimizer:
        widgets.append(
            _graph(
                "Target Optimizer",
                region,
                [
                    _alb_metric("TargetControlRequestCount", "requests", "Sum", LoadBalancer=lb),
                    _alb_metric("TargetControlRequestRejectCount", "rejected", "Sum", LoadBalancer=lb),
                ],
                y_label="requests",
            )
        )
    return widgets


class InferenceDashboard(Construct):
    """A CloudWatch dashboard for one tier: traffic, errors, latency and target health per model.

    The body is built by :func:`dashboard_body` and handed to one `AWS::CloudWatch::Dashboard`
    named `name` (letters, digits, '-' and '_', at most 255). Defaults: the last 3 hours,
    one-minute periods; no Target Optimizer row unless `target_optimizer`; no PromQL panel
    unless `workspace_query`; Application Load Balancer metrics unless `kind` is NLB (a Network
    Load Balancer: flows, bytes, resets and target health). `network=True` is the deprecated
    spelling of `kind=LoadBalancerKind.NLB`.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        name: str,
        load_balancer_full_name: str,
        target_groups: Mapping[str, str],
        region: str,
        target_optimizer: bool,
        workspace_query: bool = False,
        kind: LoadBalancerKind | None = None,
        network: bool | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.kind = load_balancer_kind(kind, network, "InferenceDashboard")
        """The load balancer whose metrics the dashboard charts."""
        _check_target_optimizer(self.kind, target_optimizer)
        if not cdk.Token.is_unresolved(name) and not _DASHBOARD_NAME.match(name):
            raise ValueError(f"'name' must be 1-255 letters, digits, '-' or '_', got {name!r}")
        if not target_groups:
            raise ValueError("'target_groups' must map at least one model to its target group, got {}")
        self.body = dashboard_body(
            load_balancer_full_name=load_balancer_full_name,
            target_groups=target_groups,
            region=region,
            target_optimizer=target_optimizer,
            workspace_query=workspace_query,
            kind=self.kind,
        )
        # Tokens (the load balancer and target group names) stay whole strings inside the JSON;
        # CloudFormation joins them in at deploy time.
        self.dashboard = cloudwatch.CfnDashboard(
            self, "Resource", dashboard_name=name, dashboard_body=json.dumps(self.body, separators=(",", ":"))
        )

    @property
    def dashboard_name(self) -> str:
        """Name of the dashboard."""
        return self.dashboard.ref
