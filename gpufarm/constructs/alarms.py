"""CloudWatch alarms on the load balancer, keyed by its kind (ALB or NLB), sent to an encrypted SNS topic.

:class:`InferenceAlarms`: 5xx (count and percentage of requests), p99 latency, unhealthy targets
and Target Optimizer rejections.
"""

from __future__ import annotations

import functools
import hashlib
import warnings
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from gpufarm.config.model import AlarmsConfig, LoadBalancerKind
from gpufarm.constructs._util import construct_id, limit_grants_to_aws_services

ALB_NAMESPACE = "AWS/ApplicationELB"
NLB_NAMESPACE = "AWS/NetworkELB"
CLOUDWATCH_SERVICE = "cloudwatch.amazonaws.com"
PERIOD_SECONDS = 60
"""ALB metrics arrive once a minute; every alarm evaluates one-minute periods."""

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
    * ``error-rate``: the same 5xx answers as a percentage of `RequestCount`, above
      `config.error_rate_percent`.
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
        self.alarms["error-rate"] = self._error_rate_alarm(lb)
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

    def _error_rate_alarm(self, lb: str) -> cloudwatch.CfnAlarm:
        """5xx answers as a percentage of requests, per minute (metric math on the ALB's own metrics).

        `RequestCount` counts every request the ALB processed, answered by it or by a target;
        `HTTPCode_ELB_5XX_Count` and `HTTPCode_Target_5XX_Count` are the 5xx answers of each
        (https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-cloudwatch-metrics.html).
        A minute without requests has no `RequestCount` datapoint, so the expression has none
        either and the alarm treats it as not breaching: an idle tier does not alarm.
        """
        config = self.config
        return self._alarm(
            self,
            "ErrorRate",
            description=(
                f"Load balancer and vLLM 5xx responses above {config.error_rate_percent:g}% of requests "
                f"for {config.evaluation_minutes} min"
            ),
            comparison="GreaterThanThreshold",
            threshold=config.error_rate_percent,
            metrics=[
                self._query("elb", "HTTPCode_ELB_5XX_Count", "Sum", LoadBalancer=lb),
                self._query("target", "HTTPCode_Target_5XX_Count", "Sum", LoadBalancer=lb),
                self._query("requests", "RequestCount", "Sum", LoadBalancer=lb),
                cloudwatch.CfnAlarm.MetricDataQueryProperty(
                    id="errorRate",
                    expression="100 * (FILL(elb, 0) + FILL(target, 0)) / requests",
                    label="5xx, % of requests",
                    return_data=True,
                ),
            ],
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
