"""A GPU Auto Scaling group serving one model: launch template, capacity, hooks, warm pool, scaling.

See docs/decisions/0065-ec2-provisioning.md for the choices; the instance side is in
:mod:`gpufarm.hosts.engine`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from gpufarm.config.sections.ec2 import Ec2Config
from gpufarm.constructs._util import acknowledge, acknowledge_all
from gpufarm.constructs.serving import secret_arn
from gpufarm.core.fleets import Fleet
from gpufarm.core.s3 import split_s3_uri
from gpufarm.hosts import engine as host_engine
from gpufarm.hosts import metrics as host_metrics
from gpufarm.k8s.karpenter import ROOT_VOLUME_IOPS, ROOT_VOLUME_THROUGHPUT_MIBPS

DLAMI_PARAMETER = (
    "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-amazon-linux-2023/latest/ami-id"
)
"""The public SSM parameter holding the latest AWS Deep Learning Base OSS NVIDIA Driver GPU AMI
(Amazon Linux 2023) for x86_64. The DLAMI developer guide, "Finding the ID of a DLAMI"
(https://docs.aws.amazon.com/dlami/latest/devguide/find-dlami-id.html): the name format is
`/aws/service/deeplearning/ami/$architecture/$ami_type/latest/ami-id`, `ami_type` being the AMI's
name without "deep", "learning" and "ami" ("Deep Learning Base OSS Nvidia Driver GPU AMI (Amazon
Linux 2023)"). Resolved by CloudFormation at deploy time (`{{resolve:ssm:...}}`), never at synth."""

ROOT_DEVICE = "/dev/xvda"
"""The root device of Amazon Linux 2023 AMIs, the DLAMI's base."""

LAUNCH_HOOK = "gpufarm-engine-ready"
TERMINATION_HOOK = "gpufarm-drain"
HOOK_MAX_SECONDS = 7200
"""The longest HeartbeatTimeout a lifecycle hook takes (PutLifecycleHook: 30 to 7200 seconds,
https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_PutLifecycleHook.html)."""
DRAIN_MARGIN_SECONDS = host_engine.ENGINE_STOP_SECONDS + 2 * host_engine.DRAIN_POLL_SECONDS + 30
"""What the termination hook waits beyond the deregistration delay: the drain script's poll, the
engine's stop and the lifecycle call."""
WEIGHTS_SYNC_SECONDS = 1800
"""What the launch hook allows for the image pull and the weights sync before the engine starts."""
HEALTH_CHECK_GRACE_SECONDS = 60
"""The launch hook already held the instance until the engine answered: little grace is needed."""
SPOT_ALLOCATION = "price-capacity-optimized"


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """What the instances run: image, command, ports and metrics (from the engine spec)."""

    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    port: int
    readiness_path: str
    metrics_path: str
    queue_metric: str
    """The engine's waiting-requests series (gpufarm/data/engine_metrics.yaml, role `waiting`)."""
    environment: dict[str, str]
    target_control: host_engine.TargetControlAgent | None = None
    registry: str | None = None
    """An ECR registry host the instances sign in to before pulling; None for public images."""


class GpuFleet(Construct):
    """One GPU Auto Scaling group of `fleet.pool`'s instances, each serving `fleet.model`.

    Launch template: the Deep Learning AMI from :data:`DLAMI_PARAMETER`, IMDSv2 required (hop
    limit 1: the containers use the host's network),
    an encrypted gp3 root volume of `pool.root_volume_gib` holding the image and the weights, no
    public address, `security_group`, an instance profile whose role may use Session Manager,
    publish CloudWatch metrics and logs, pull from ECR, read the model's S3 prefix, complete its
    own group's lifecycle actions and deregister from its own target group. Capacity: a pool with
    `spot` gets a mixed instances policy (on-demand base :attr:`Fleet.on_demand_base`, spot above
    it, price-capacity-optimized, over every fitting instance type); a pool with `reserved`
    targets its reservation; otherwise the smallest fitting instance type on demand.

    Lifecycle hooks: `gpufarm-engine-ready` holds a launching instance until its engine answers
    (default result ABANDON: an instance whose engine never comes up is replaced);
    `gpufarm-drain` holds a terminating one for the target group's deregistration delay plus
    :data:`DRAIN_MARGIN_SECONDS` (default CONTINUE). Warm pool (`ec2.warm_pool.enabled`, never
    with spot): stopped instances with the image and weights on their volume. Rolling: a launch
    template change starts an instance refresh (CloudFormation's `AutoScalingInstanceRefresh`
    update policy) with `ec2.refresh`'s checkpoints. Scaling (an autoscaled model only): target
    tracking on the engine's queue metric per instance (`autoscaling.queue_target`) and on
    `ALBRequestCountPerTarget` (`ec2.requests_per_target`).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        fleet: Fleet,
        group_name: str,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        security_group: ec2.ISecurityGroup,
        target_group: elbv2.CfnTargetGroup,
        load_balancer_full_name: str,
        deregistration_delay_seconds: int,
        engine: EngineSettings,
        config: Ec2Config,
        log_group: logs.ILogGroup,
        region: str,
    ) -> None:
        super().__init__(scope, id)
        types = fleet.instance_types()
        if not types:
            raise ValueError(
                f"pool {fleet.name!r} has no instance type with exactly {fleet.model.gpus} GPU(s) that "
                f"fits model {fleet.model.name!r}"
            )
        self.fleet = fleet
        self.group_name = group_name
        self.role = self._role(fleet, target_group)
        profile = iam.CfnInstanceProfile(self, "InstanceProfile", roles=[self.role.role_name])
        host = host_engine.EngineHost(
            model=fleet.model.name,
            image=engine.image,
            command=engine.command,
            args=engine.args,
            port=engine.port,
            readiness_path=engine.readiness_path,
            weights_uri=fleet.model.weights if fleet.model.is_s3 else None,
            environment=engine.environment,
            region=region,
            registry=engine.registry,
            hf_token_secret=fleet.model.hf_token_secret,
            target_control=engine.target_control,
            group_name=group_name,
            launch_hook=LAUNCH_HOOK,
            termination_hook=TERMINATION_HOOK,
            target_group_arn=target_group.ref,
            drain_seconds=deregistration_delay_seconds,
            startup_timeout_seconds=fleet.model.startup_timeout_seconds,
            log_group=log_group.log_group_name,
            cloudwatch_config=host_metrics.agent_config(
                queue_metric=engine.queue_metric,
                log_group=log_group.log_group_name,
                prometheus_config_path=host_engine.PROMETHEUS_CONFIG,
            ),
            prometheus_config=host_metrics.scrape_config(
                port=engine.port, metrics_path=engine.metrics_path, group_name=group_name
            ),
        )
        self.user_data = host_engine.user_data(host)
        """The instances' user data script (plain text, tokens unresolved)."""
        self.launch_template = self._launch_template(fleet, types, profile, security_group)
        self.group = self._group(fleet, types, subnets, target_group, deregistration_delay_seconds, config)
        self.warm_pool: autoscaling.CfnWarmPool | None = None
        if config.warm_pool.enabled and not fleet.spot:
            self.warm_pool = autoscaling.CfnWarmPool(
                self,
                "WarmPool",
                auto_scaling_group_name=group_name,
                min_size=config.warm_pool.min_size,
                pool_state="Stopped",
                instance_reuse_policy=autoscaling.CfnWarmPool.InstanceReusePolicyProperty(
                    reuse_on_scale_in=config.warm_pool.reuse_on_scale_in
                ),
            )
            self.warm_pool.add_dependency(self.group)
        self.policies = self._scaling(fleet, config, target_group, load_balancer_full_name, engine)

    # ------------------------------------------------------------------------ parts

    def _role(self, fleet: Fleet, target_group: elbv2.CfnTargetGroup) -> iam.Role:
        stack = cdk.Stack.of(self)
        managed = (
            "AmazonSSMManagedInstanceCore",
            "CloudWatchAgentServerPolicy",
            "AmazonEC2ContainerRegistryPullOnly",
        )
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"gpufarm GPU instances of pool {fleet.name}: model {fleet.model.name}",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(m) for m in managed],
        )
        reasons = {
            "AmazonSSMManagedInstanceCore": "the minimum the SSM agent needs for Session Manager, the "
            "instances' only administrative access (no SSH key, no open port)",
            "CloudWatchAgentServerPolicy": "what the CloudWatch agent needs to publish the engine's "
            "queue metric the group scales on, and the engine's logs",
            "AmazonEC2ContainerRegistryPullOnly": "pulling the engine image from the tier's ECR registry "
            "(the pull through cache) and nothing else",
        }
        acknowledge_all(
            role,
            {
                f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{name}]": (
                    f"AWS maintains {name}: {why}."
                )
                for name, why in reasons.items()
            },
        )
        group_arn = stack.format_arn(
            service="autoscaling",
            resource="autoScalingGroup",
            resource_name=f"*:autoScalingGroupName/{self.group_name}",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="OwnLifecycleActions",
                actions=["autoscaling:CompleteLifecycleAction"],
                resources=[group_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="DeregisterFromOwnTargetGroup",
                actions=["elasticloadbalancing:DeregisterTargets"],
                resources=[target_group.ref],
            )
        )
        partition, region, account = (
            _nag(stack.partition, "Partition"),
            _nag(stack.region, "Region"),
            _nag(stack.account, "AccountId"),
        )
        findings = {
            f"AwsSolutions-IAM5[Resource::arn:{partition}:autoscaling:{region}:{account}:"
            f"autoScalingGroup:*:autoScalingGroupName/{self.group_name}]": "An Auto Scaling group's ARN "
            "holds a generated ID; the wildcard stands for it only, the group's name is fixed.",
        }
        model = fleet.model
        if model.is_s3:
            bucket, prefix = split_s3_uri(model.weights)
            bucket_arn = f"arn:{stack.partition}:s3:::{bucket}"
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="ReadModelWeights", actions=["s3:GetObject"], resources=[f"{bucket_arn}/{prefix}*"]
                )
            )
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="ListModelWeights",
                    actions=["s3:ListBucket"],
                    resources=[bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
                )
            )
            findings[f"AwsSolutions-IAM5[Resource::arn:{partition}:s3:::{bucket}/{prefix}*]"] = (
                f"The instances read every object under the model's prefix {model.weights} (its weight "
                "files, named by the model's publisher), nothing else in the bucket."
            )
        if model.hf_token_secret:
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="ReadHuggingFaceToken",
                    actions=["secretsmanager:GetSecretValue"],
                    resources=[secret_arn(self, model.hf_token_secret)],
                )
            )
        acknowledge_all(role, findings)
        acknowledge(
            role,
            "NIST.800.53.R5-IAMNoInlinePolicy",
            "The instance role's inline grants name this group, its target group and its model's "
            "weights only: they belong to this role alone and are deleted with it.",
        )
        return role

    def _launch_template(
        self,
        fleet: Fleet,
        types: list[str],
        profile: iam.CfnInstanceProfile,
        security_group: ec2.ISecurityGroup,
    ) -> ec2.CfnLaunchTemplate:
        lt = ec2.CfnLaunchTemplate
        capacity: Any = None
        if fleet.reserved and fleet.pool.reservation_ids:
            capacity = lt.CapacityReservationSpecificationProperty(
                capacity_reservation_target=lt.CapacityReservationTargetProperty(
                    capacity_reservation_id=fleet.pool.reservation_ids[0]
                )
            )
        data = lt.LaunchTemplateDataProperty(
            image_id=f"{{{{resolve:ssm:{DLAMI_PARAMETER}}}}}",
            # A mixed instances policy names the types itself; otherwise the smallest that fits.
            instance_type=None if fleet.spot else types[0],
            iam_instance_profile=lt.IamInstanceProfileProperty(arn=profile.attr_arn),
            network_interfaces=[
                lt.NetworkInterfaceProperty(
                    device_index=0,
                    associate_public_ip_address=False,
                    groups=[security_group.security_group_id],
                    delete_on_termination=True,
                )
            ],
            # Hop limit 1: the containers share the host's network namespace (`--network host`),
            # so nothing reaches the metadata service through an extra hop.
            metadata_options=lt.MetadataOptionsProperty(
                http_endpoint="enabled",
                http_tokens="required",
                http_put_response_hop_limit=1,
                instance_metadata_tags="disabled",
            ),
            block_device_mappings=[
                lt.BlockDeviceMappingProperty(
                    device_name=ROOT_DEVICE,
                    # The Karpenter pools' GPU root volume performance: the weights sync and the
                    # engine's first read run at the volume's throughput.
                    ebs=lt.EbsProperty(
                        encrypted=True,
                        volume_type="gp3",
                        volume_size=fleet.pool.root_volume_gib,
                        throughput=ROOT_VOLUME_THROUGHPUT_MIBPS,
                        iops=ROOT_VOLUME_IOPS,
                        delete_on_termination=True,
                    ),
                )
            ],
            monitoring=lt.MonitoringProperty(enabled=True),
            capacity_reservation_specification=capacity,
            user_data=cdk.Fn.base64(self.user_data),
            tag_specifications=[
                lt.TagSpecificationProperty(
                    resource_type=kind,
                    tags=[
                        cdk.CfnTag(key="gpufarm:pool", value=fleet.name),
                        cdk.CfnTag(key="gpufarm:model", value=fleet.model.name),
                    ],
                )
                for kind in ("instance", "volume")
            ],
        )
        return lt(self, "LaunchTemplate", launch_template_data=data)

    def _group(
        self,
        fleet: Fleet,
        types: list[str],
        subnets: Sequence[ec2.ISubnet],
        target_group: elbv2.CfnTargetGroup,
        deregistration_delay_seconds: int,
        config: Ec2Config,
    ) -> autoscaling.CfnAutoScalingGroup:
        asg = autoscaling.CfnAutoScalingGroup
        template = asg.LaunchTemplateSpecificationProperty(
            launch_template_id=self.launch_template.ref,
            version=self.launch_template.attr_latest_version_number,
        )
        mixed: Any = None
        if fleet.spot:
            mixed = asg.MixedInstancesPolicyProperty(
                launch_template=asg.LaunchTemplateProperty(
                    launch_template_specification=template,
                    overrides=[asg.LaunchTemplateOverridesProperty(instance_type=t) for t in types],
                ),
                instances_distribution=asg.InstancesDistributionProperty(
                    on_demand_base_capacity=fleet.on_demand_base,
                    on_demand_percentage_above_base_capacity=0,
                    spot_allocation_strategy=SPOT_ALLOCATION,
                ),
            )
        launch_seconds = min(HOOK_MAX_SECONDS, fleet.model.startup_timeout_seconds + WEIGHTS_SYNC_SECONDS)
        drain_seconds = min(HOOK_MAX_SECONDS, deregistration_delay_seconds + DRAIN_MARGIN_SECONDS)
        group = asg(
            self,
            "Group",
            auto_scaling_group_name=self.group_name,
            min_size=str(fleet.min_instances),
            max_size=str(fleet.max_instances),
            vpc_zone_identifier=[s.subnet_id for s in subnets],
            launch_template=None if mixed is not None else template,
            mixed_instances_policy=mixed,
            target_group_arns=[target_group.ref],
            health_check_type="ELB",
            health_check_grace_period=HEALTH_CHECK_GRACE_SECONDS,
            capacity_rebalance=fleet.spot,
            lifecycle_hook_specification_list=[
                asg.LifecycleHookSpecificationProperty(
                    lifecycle_hook_name=LAUNCH_HOOK,
                    lifecycle_transition="autoscaling:EC2_INSTANCE_LAUNCHING",
                    heartbeat_timeout=launch_seconds,
                    default_result="ABANDON",
                ),
                asg.LifecycleHookSpecificationProperty(
                    lifecycle_hook_name=TERMINATION_HOOK,
                    lifecycle_transition="autoscaling:EC2_INSTANCE_TERMINATING",
                    heartbeat_timeout=drain_seconds,
                    default_result="CONTINUE",
                ),
            ],
            metrics_collection=[asg.MetricsCollectionProperty(granularity="1Minute")],
            tags=[
                asg.TagPropertyProperty(key="Name", value=self.group_name, propagate_at_launch=True),
            ],
        )
        refresh = config.refresh
        group.cfn_options.update_policy = cdk.CfnUpdatePolicy(
            auto_scaling_instance_refresh=cdk.CfnAutoScalingInstanceRefresh(
                strategy="Rolling",
                preferences=cdk.CfnAutoScalingInstanceRefreshPreferences(
                    checkpoint_percentages=list(refresh.checkpoint_percentages),
                    checkpoint_delay=refresh.checkpoint_delay_seconds,
                    min_healthy_percentage=refresh.min_healthy_percentage,
                    max_healthy_percentage=min(200, refresh.min_healthy_percentage + 100),
                    instance_warmup=HEALTH_CHECK_GRACE_SECONDS,
                ),
            )
        )
        findings = {
            "AwsSolutions-AS3": "Scaling and refresh activity of the GPU group is in the Auto Scaling "
            "history and the tier's alarms on the target group; a notification topic per group would "
            "repeat them.",
        }
        if not fleet.spot:
            findings["ControlTower::CT.AUTOSCALING.PR.6"] = (
                "An on-demand or reserved GPU group launches the one instance type sized for its model "
                "(a warm pool needs a group without a mixed instances policy); the pool's spot setting "
                "turns the policy on."
            )
        acknowledge_all(group, findings)
        return group

    def _scaling(
        self,
        fleet: Fleet,
        config: Ec2Config,
        target_group: elbv2.CfnTargetGroup,
        load_balancer_full_name: str,
        engine: EngineSettings,
    ) -> list[autoscaling.CfnScalingPolicy]:
        scaling = fleet.model.autoscaling
        if scaling is None or fleet.min_instances == fleet.max_instances:
            return []
        policy = autoscaling.CfnScalingPolicy
        policies = []
        if scaling.queue_target is not None:
            policies.append(
                policy(
                    self,
                    "QueueScaling",
                    auto_scaling_group_name=self.group_name,
                    policy_type="TargetTrackingScaling",
                    target_tracking_configuration=policy.TargetTrackingConfigurationProperty(
                        target_value=scaling.queue_target,
                        customized_metric_specification=policy.CustomizedMetricSpecificationProperty(
                            metric_name=engine.queue_metric,
                            namespace=host_metrics.METRICS_NAMESPACE,
                            dimensions=[
                                policy.MetricDimensionProperty(
                                    name=host_metrics.GROUP_DIMENSION, value=self.group_name
                                )
                            ],
                            statistic="Average",
                        ),
                    ),
                )
            )
        if config.requests_per_target is not None:
            policies.append(
                policy(
                    self,
                    "RequestScaling",
                    auto_scaling_group_name=self.group_name,
                    policy_type="TargetTrackingScaling",
                    target_tracking_configuration=policy.TargetTrackingConfigurationProperty(
                        target_value=config.requests_per_target,
                        predefined_metric_specification=policy.PredefinedMetricSpecificationProperty(
                            predefined_metric_type="ALBRequestCountPerTarget",
                            # app/<load balancer>/<id>/targetgroup/<target group>/<id>
                            resource_label=f"{load_balancer_full_name}/{target_group.attr_target_group_full_name}",
                        ),
                    ),
                )
            )
        for built in policies:
            built.add_dependency(self.group)
        return policies


def _nag(value: str, pseudo: str) -> str:
    """How cdk-nag writes `value` in a finding: itself, or `<AWS::pseudo>` for a token."""
    return f"<AWS::{pseudo}>" if cdk.Token.is_unresolved(value) else value
