"""The fallback gateway without Kubernetes: LiteLLM as a systemd unit on a small CPU Auto Scaling group.

The same pinned image, the same generated config and the same Bedrock IAM as the EKS tiers'
gateway (:class:`gpufarm.constructs.FallbackGateway`): the routes it serves come in as data
(:class:`GatewayRoutes`), so a tier whose models sit behind the load balancer
(:meth:`GatewayRoutes.through_load_balancer`) and one whose models sit on a SageMaker endpoint
build the same construct. The instance side is :mod:`gpufarm.hosts.gateway`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_bedrock as bedrock
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from gpufarm.config.model import TierConfig
from gpufarm.constructs._util import acknowledge_all
from gpufarm.constructs.gateway import bedrock_grants, bedrock_guardrail, grant_gateway
from gpufarm.hosts import gateway as host_gateway
from gpufarm.k8s import gateway as k8s_gateway

ROOT_DEVICE = "/dev/xvda"
"""The root device of Amazon Linux 2023 AMIs."""
HEALTH_CHECK_GRACE_SECONDS = 300
"""Time a new gateway instance gets to install Docker, pull the image and load the proxy."""


@dataclass(frozen=True, kw_only=True)
class GatewayRoutes:
    """What the gateway serves, as data: its LiteLLM config, the deploy-time values the config reads
    from the environment (`os.environ/NAME`), and what calling the routes needs beyond Bedrock."""

    config: Mapping[str, Any]
    """The LiteLLM proxy config (`gpufarm.k8s.gateway.litellm_config`'s shape)."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """Values the config names by `os.environ/NAME`; they may hold CloudFormation tokens."""
    statements: Sequence[iam.PolicyStatement] = ()
    """More permissions the routes need (e.g. `sagemaker:InvokeEndpoint` on one endpoint)."""

    @classmethod
    def through_load_balancer(cls, tier: TierConfig, load_balancer_url: str) -> GatewayRoutes:
        """Each model at its route on the tier's load balancer (`<url>/<model>/v1`), Bedrock as its
        fallback: the config the EKS ALB tiers generate (`litellm_config(load_balanced=True)`)."""
        guardrail = k8s_gateway.guardrail_env_refs() if tier.fallback.guardrail.enabled else None
        config = k8s_gateway.litellm_config(tier, guardrail=guardrail, load_balanced=True)
        env = {e["name"]: e["value"] for e in k8s_gateway.route_env(tier, load_balancer_url)}
        return cls(config=config, environment=env)


def instance_environment(
    tier: TierConfig, routes: GatewayRoutes, guardrail: tuple[str, str] | None
) -> dict[str, str]:
    """The proxy's environment on a gateway instance: the EKS pods' (offline switches, region, JSON
    logs, graceful shutdown, guardrail) and the values `routes` read."""
    return {**k8s_gateway.gateway_environment(tier, tier.environment.region, guardrail), **routes.environment}


class GatewayFleet(Construct):
    """LiteLLM gateway instances in an Auto Scaling group, registered in `target_group`.

    Amazon Linux 2023 (the public SSM parameter CDK reads at deploy time), `tier.ec2.gateway`'s
    instance type and sizes, IMDSv2 required, an encrypted gp3 root volume, no public address,
    Session Manager for access. The role may invoke exactly the Bedrock models, inference profiles
    and guardrail the tier names (:func:`gpufarm.constructs.gateway.grant_gateway`, the EKS
    gateway's grant), read the master-key secret when set, pull from ECR, write the proxy's logs
    to `log_group`, and whatever `routes.statements` add. A launch template change rolls the
    group by instance refresh, keeping every instance in service until its replacement is
    healthy. Scaled on average CPU (`tier.ec2.gateway.cpu_target_percent`).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        tier: TierConfig,
        routes: GatewayRoutes,
        image: str,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        security_group: ec2.ISecurityGroup,
        target_group: elbv2.CfnTargetGroup,
        log_group: logs.ILogGroup,
        registry: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        fb = tier.fallback
        sizes = tier.ec2.gateway
        if sizes.min_instances > sizes.max_instances:
            raise ValueError(
                f"'ec2.gateway.min_instances' must be at most 'ec2.gateway.max_instances' "
                f"({sizes.max_instances}), got {sizes.min_instances}"
            )
        region = tier.environment.region
        self.port = fb.port
        self.routes = routes
        grants = bedrock_grants(tier.models, region=region, partition=stack.partition, account=stack.account)
        self.bedrock_resources: list[str] = list(grants.all)
        self.guardrail: bedrock.CfnGuardrail | None = None
        self.guardrail_version: bedrock.CfnGuardrailVersion | None = None
        guardrail_values: tuple[str, str] | None = None
        if fb.guardrail.enabled:
            self.guardrail, self.guardrail_version = bedrock_guardrail(self, fb.guardrail)
            guardrail_values = (self.guardrail.attr_guardrail_arn, self.guardrail_version.attr_version)

        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="gpufarm gateway instances: invoke the configured Amazon Bedrock models",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSSMManagedInstanceCore"),
                iam.ManagedPolicy.from_aws_managed_policy_name("AmazonEC2ContainerRegistryPullOnly"),
            ],
        )
        grant_gateway(
            self, self.role, tier, grants=grants, guardrail=self.guardrail, version=self.guardrail_version
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteProxyLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[f"{log_group.log_group_arn}:log-stream:*"],
            )
        )
        for statement in routes.statements:
            self.role.add_to_policy(statement)
        managed = "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
        acknowledge_all(
            self.role,
            {
                f"{managed}AmazonSSMManagedInstanceCore]": (
                    "AWS maintains AmazonSSMManagedInstanceCore as the minimum the SSM agent needs for "
                    "Session Manager, the gateway instances' only administrative access."
                ),
                f"{managed}AmazonEC2ContainerRegistryPullOnly]": (
                    "AWS maintains AmazonEC2ContainerRegistryPullOnly: pulling the gateway image from the "
                    "tier's ECR registry (the pull through cache), nothing else."
                ),
                f"AwsSolutions-IAM5[Resource::<{_logical_id(log_group)}.Arn>:log-stream:*]": (
                    "Each instance writes the proxy's log stream `gateway/<instance id>`; the instance IDs "
                    "are not known before the instances exist. The grant is limited to this log group."
                ),
                "NIST.800.53.R5-IAMNoInlinePolicy": (
                    "The gateway role's inline grants name only the Bedrock models, guardrail, secret and "
                    "log group of this tier: they belong to this role alone and are deleted with it."
                ),
            },
        )
        profile = iam.CfnInstanceProfile(self, "InstanceProfile", roles=[self.role.role_name])

        environment = instance_environment(tier, routes, guardrail_values)
        host = host_gateway.GatewayHost(
            image=image,
            config_yaml=k8s_gateway.config_yaml(dict(routes.config)),
            config_path=k8s_gateway.CONFIG_PATH,
            args=tuple(k8s_gateway.proxy_args(tier)),
            port=fb.port,
            environment=environment,
            master_key_secret=fb.master_key_secret,
            master_key_env=k8s_gateway.MASTER_KEY_ENV,
            region=region,
            registry=registry,
            run_as_user=k8s_gateway.RUN_AS_USER,
            graceful_seconds=fb.request_timeout_seconds,
            log_group=log_group.log_group_name,
        )
        self.user_data = host_gateway.user_data(host)
        """The gateway instances' user data (plain text, tokens unresolved)."""
        image_id = ec2.MachineImage.latest_amazon_linux2023().get_image(self).image_id
        lt = ec2.CfnLaunchTemplate
        self.launch_template = lt(
            self,
            "LaunchTemplate",
            launch_template_data=lt.LaunchTemplateDataProperty(
                image_id=image_id,
                instance_type=sizes.instance_type,
                iam_instance_profile=lt.IamInstanceProfileProperty(arn=profile.attr_arn),
                network_interfaces=[
                    lt.NetworkInterfaceProperty(
                        device_index=0,
                        associate_public_ip_address=False,
                        groups=[security_group.security_group_id],
                        delete_on_termination=True,
                    )
                ],
                metadata_options=lt.MetadataOptionsProperty(
                    http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1
                ),
                block_device_mappings=[
                    lt.BlockDeviceMappingProperty(
                        device_name=ROOT_DEVICE,
                        ebs=lt.EbsProperty(
                            encrypted=True,
                            volume_type="gp3",
                            volume_size=sizes.volume_gib,
                            delete_on_termination=True,
                        ),
                    )
                ],
                monitoring=lt.MonitoringProperty(enabled=True),
                user_data=cdk.Fn.base64(self.user_data),
            ),
        )
        asg = autoscaling.CfnAutoScalingGroup
        self.group = asg(
            self,
            "Group",
            min_size=str(sizes.min_instances),
            max_size=str(sizes.max_instances),
            vpc_zone_identifier=[s.subnet_id for s in subnets],
            launch_template=asg.LaunchTemplateSpecificationProperty(
                launch_template_id=self.launch_template.ref,
                version=self.launch_template.attr_latest_version_number,
            ),
            target_group_arns=[target_group.ref],
            health_check_type="ELB",
            health_check_grace_period=HEALTH_CHECK_GRACE_SECONDS,
            metrics_collection=[asg.MetricsCollectionProperty(granularity="1Minute")],
            tags=[
                asg.TagPropertyProperty(
                    key="Name", value=f"{tier.stack_name}-gateway", propagate_at_launch=True
                )
            ],
        )
        self.group.cfn_options.update_policy = cdk.CfnUpdatePolicy(
            auto_scaling_instance_refresh=cdk.CfnAutoScalingInstanceRefresh(
                strategy="Rolling",
                preferences=cdk.CfnAutoScalingInstanceRefreshPreferences(
                    min_healthy_percentage=100,
                    max_healthy_percentage=200,
                    instance_warmup=HEALTH_CHECK_GRACE_SECONDS,
                ),
            )
        )
        acknowledge_all(
            self.group,
            {
                "AwsSolutions-AS3": "Gateway scaling is routine (CPU target tracking); its activity is in "
                "the Auto Scaling history and the gateway target group's alarms.",
                "ControlTower::CT.AUTOSCALING.PR.6": "The gateway runs one CPU instance type sized in "
                "ec2.gateway; it needs no mix of types.",
            },
        )
        policy = autoscaling.CfnScalingPolicy
        self.scaling = policy(
            self,
            "CpuScaling",
            auto_scaling_group_name=self.group.ref,
            policy_type="TargetTrackingScaling",
            target_tracking_configuration=policy.TargetTrackingConfigurationProperty(
                target_value=sizes.cpu_target_percent,
                predefined_metric_specification=policy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type="ASGAverageCPUUtilization"
                ),
            ),
        )


def _logical_id(construct: logs.ILogGroup) -> str:
    """The logical ID cdk-nag names a log group by in a finding."""
    child = construct.node.default_child
    assert isinstance(child, cdk.CfnElement)
    return str(cdk.Stack.of(construct).resolve(child.logical_id))
