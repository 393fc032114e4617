"""One region's Route 53 record of the tier's DNS name, health-checked on its gateway's readiness.

Each region's stack creates its own record (and health check) of the shared name: Route 53
resources are global, so the stack in us-west-2 can create a record that the stack in us-east-1
never references, and no cross-region reference is needed (docs/decisions/0069-a-second-region.md).

The health check cannot call the load balancer: Route 53 health checkers "are outside the VPC"
and reach an endpoint only by a public address, so an internal load balancer is out of reach; for
that case the Route 53 API reference says to "create a CloudWatch metric, associate an alarm with
the metric, and then create a health check that is based on the state of the alarm"
(https://docs.aws.amazon.com/Route53/latest/APIReference/API_CreateHealthCheck.html, "Private
Hosted Zones"). The alarm watches the gateway target group's `HealthyHostCount`: the load
balancer's health check of that group calls the gateway's readiness path, so the region fails
over when no gateway pod is ready, not merely when the load balancer is down. The alarm uses a
standard-resolution metric and the `Minimum` statistic, as alarm health checks require ("Standard-
resolution metrics ... Statistics: Average, Minimum, Maximum, Sum, and SampleCount. Extended
statistics aren't supported", AlarmIdentifier, same reference).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_route53 as route53
from constructs import Construct

from gpufarm.config.model import LoadBalancerKind, Routing
from gpufarm.constructs._util import acknowledge_all
from gpufarm.constructs.alarms import LOAD_BALANCER_NAMESPACES, PERIOD_SECONDS

FAILOVER_ROLES = ("PRIMARY", "SECONDARY")
"""`Failover` values of a record: the tier's own region is PRIMARY, the secondary SECONDARY."""


class RegionalRecord(Construct):
    """The alarm, Route 53 health check and alias record of one region's load balancer.

    :param dns_name: the tier's DNS name; :param hosted_zone_id: the zone that holds it.
    :param routing: failover (`primary` says which record this is) or latency (`Region` = `region`).
    :param load_balancer_dns_name, load_balancer_zone_id: the alias target.
    :param load_balancer_full_name, gateway_target_group: the CloudWatch dimensions of the
        gateway target group's `HealthyHostCount`.
    :param evaluation_minutes: one-minute periods with no healthy gateway target before the alarm
        (and so the health check) fails.
    :param alarm_topic_arn: where the alarm also notifies (the tier's alarm topic), or None.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        dns_name: str,
        hosted_zone_id: str,
        routing: Routing,
        primary: bool,
        region: str,
        kind: LoadBalancerKind,
        load_balancer_dns_name: str,
        load_balancer_zone_id: str,
        load_balancer_full_name: str,
        gateway_target_group: str,
        evaluation_minutes: int,
        alarm_topic_arn: str | None,
    ) -> None:
        super().__init__(scope, id)
        actions = [alarm_topic_arn] if alarm_topic_arn is not None else None
        self.alarm = cloudwatch.CfnAlarm(
            self,
            "GatewayReady",
            alarm_description=(
                f"No gateway pod in {region} passed its readiness check for {evaluation_minutes} min: "
                f"Route 53 stops answering {dns_name} with this region"
            ),
            namespace=LOAD_BALANCER_NAMESPACES[kind],
            metric_name="HealthyHostCount",
            dimensions=[
                cloudwatch.CfnAlarm.DimensionProperty(name="LoadBalancer", value=load_balancer_full_name),
                cloudwatch.CfnAlarm.DimensionProperty(name="TargetGroup", value=gateway_target_group),
            ],
            statistic="Minimum",
            period=PERIOD_SECONDS,
            evaluation_periods=evaluation_minutes,
            datapoints_to_alarm=evaluation_minutes,
            comparison_operator="LessThanThreshold",
            threshold=1,
            # No data point is no healthy gateway reported: the region is not proven ready.
            treat_missing_data="breaching",
            alarm_actions=actions,
            ok_actions=actions,
        )
        if actions is None:
            acknowledge_all(
                self.alarm,
                {
                    "NIST.800.53.R5-CloudWatchAlarmAction": (
                        "Route 53's health check reads this alarm's state; it needs no action. The "
                        "tier's alarm topic is off (observability.alarms.enabled false), so there is "
                        "no topic to notify."
                    ),
                },
            )
        self.health_check = route53.CfnHealthCheck(
            self,
            "HealthCheck",
            health_check_config=route53.CfnHealthCheck.HealthCheckConfigProperty(
                type="CLOUDWATCH_METRIC",
                alarm_identifier=route53.CfnHealthCheck.AlarmIdentifierProperty(
                    name=self.alarm.ref, region=region
                ),
                # Not enough data to judge the gateway: do not send traffic to this region.
                insufficient_data_health_status="Unhealthy",
            ),
            health_check_tags=[
                route53.CfnHealthCheck.HealthCheckTagProperty(key="Name", value=f"{dns_name} {region}")
            ],
        )
        failover = None
        latency_region = None
        if routing is Routing.FAILOVER:
            failover = FAILOVER_ROLES[0] if primary else FAILOVER_ROLES[1]
        else:
            latency_region = region
        self.record = route53.CfnRecordSet(
            self,
            "Resource",
            hosted_zone_id=hosted_zone_id,
            name=f"{dns_name}.",
            type="A",
            set_identifier=region,
            failover=failover,
            region=latency_region,
            health_check_id=self.health_check.attr_health_check_id,
            alias_target=route53.CfnRecordSet.AliasTargetProperty(
                dns_name=load_balancer_dns_name,
                hosted_zone_id=load_balancer_zone_id,
                # The health check above judges the region; the alarm already follows the targets.
                evaluate_target_health=False,
            ),
        )
        cdk.Tags.of(self.health_check).add("gpufarm:region", region)
