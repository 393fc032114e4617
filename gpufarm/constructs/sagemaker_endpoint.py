"""A SageMaker real-time endpoint with one inference component per model, in the Large Model
Inference container, scaled on concurrent requests per copy.

Resources (CloudFormation property names from the `AWS::SageMaker::*` and
`AWS::ApplicationAutoScaling::*` schemas, as cfn-lint's us-east-1 schemas and
https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/ give them):

- `AWS::SageMaker::Model` per model: `PrimaryContainer` (`Image`, `Environment`),
  `ExecutionRoleArn`, `VpcConfig`. No `ModelName`: every property is create-only, so a change
  replaces the model, which a fixed name would forbid.
- `AWS::SageMaker::EndpointConfig`: one `ProductionVariants` entry (`VariantName`, `InstanceType`,
  `InitialInstanceCount`, `ManagedInstanceScaling` with `Status`, `MinInstanceCount`,
  `MaxInstanceCount`, `RoutingConfig.RoutingStrategy`), the `ExecutionRoleArn` an endpoint of
  inference components needs, `VpcConfig`. No name, for the same reason.
- `AWS::SageMaker::Endpoint`: `EndpointName` (create-only; fixed, so the gateway's routes and
  its IAM name it) and `EndpointConfigName`: a new config is an in-place update.
- `AWS::SageMaker::InferenceComponent` per model: `EndpointName`, `VariantName`,
  `InferenceComponentName`, `Specification` (`ModelName`, `ComputeResourceRequirements` with
  `NumberOfAcceleratorDevicesRequired` and `MinMemoryRequiredInMb`, `StartupParameters` with
  `ModelDataDownloadTimeoutInSeconds` and `ContainerStartupHealthCheckTimeoutInSeconds`),
  `RuntimeConfig.CopyCount`.
- Per model, `AWS::ApplicationAutoScaling::ScalableTarget` (namespace `sagemaker`, resource
  `inference-component/<name>`, dimension :data:`gpufarm.core.sagemaker.SCALABLE_DIMENSION`) and a
  target-tracking `AWS::ApplicationAutoScaling::ScalingPolicy` on
  :data:`gpufarm.core.sagemaker.CONCURRENCY_METRIC`; a model that scales to zero also gets the
  step policy and the `NoCapacityInvocationFailures` alarm that bring its first copy back
  (https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html).

The endpoint's volume takes no KMS key: the GPU instances SageMaker hosts on carry NVMe instance
storage, which "is encrypted using a hardware module on the instance", and CreateEndpointConfig
fails when `KmsKeyId` is set with any instance type with local storage (SageMaker API,
CreateEndpointConfig `KmsKeyId`). The deploy-rules gate refuses the pair.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from gpufarm.config.model import TierConfig
from gpufarm.config.sections.sagemaker import SageMakerConfig
from gpufarm.constructs._util import acknowledge_all, construct_id, pseudo_parameters
from gpufarm.constructs.gateway_fleet import GatewayRoutes
from gpufarm.core import sagemaker as sm
from gpufarm.k8s import gateway as k8s_gateway

LOG_GROUP_PREFIX = "/aws/sagemaker/Endpoints"
"""Where SageMaker writes an endpoint's container logs: '/aws/sagemaker/Endpoints/<endpoint>'."""

INVOKE_ACTIONS = ("sagemaker:InvokeEndpoint",)
"""What the gateway needs: InvokeEndpoint, which also authorizes InvokeEndpointWithResponseStream
("Before you can use this operation, your IAM permissions must allow the sagemaker:InvokeEndpoint
action", SageMaker Runtime API, InvokeEndpointWithResponseStream)."""

_VPC_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
)
"""What a model with a `VpcConfig` needs of its execution role to place its instances' network
interfaces in the VPC (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-roles.html,
CreateModel API: execution role permissions)."""


class SageMakerEndpoint(Construct):
    """The tier's SageMaker endpoint: one inference component per model, autoscaled on concurrency.

    `components` come from :func:`gpufarm.core.sagemaker.components_of`; `config` is the tier's
    `sagemaker` section; `region` places the Large Model Inference image (its registry differs by
    region). The instances run in `subnets` of `vpc` behind their own security group
    (:attr:`connections`), which admits nothing inbound.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        endpoint_name: str,
        config: SageMakerConfig,
        components: Sequence[sm.Component],
        region: str,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
    ) -> None:
        super().__init__(scope, id)
        if not components:
            raise ValueError("'components' must list at least one inference component, got none")
        self.endpoint_name = endpoint_name
        self.components = list(components)
        partition, _, account = pseudo_parameters()
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description=f"SageMaker endpoint {endpoint_name}: instances reach S3, ECR and logs",
            allow_all_outbound=True,
        )
        self.connections = self.security_group.connections
        security_groups = [self.security_group.security_group_id]
        subnet_ids = [s.subnet_id for s in subnets]
        self.role = self._execution_role(partition, region, account)
        self._models: dict[str, sagemaker.CfnModel] = {}
        for c in self.components:
            self._models[c.name] = sagemaker.CfnModel(
                self,
                f"{construct_id(c.model)}Model",
                execution_role_arn=self.role.role_arn,
                primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                    image=sm.lmi_image(c.engine, region, config.image_digests.get(c.engine)),
                    environment=c.environment,
                ),
                vpc_config=sagemaker.CfnModel.VpcConfigProperty(
                    security_group_ids=security_groups, subnets=subnet_ids
                ),
            )
        variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=sm.VARIANT_NAME,
            instance_type=config.instance_type,
            initial_instance_count=config.initial_instance_count,
            managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                status="ENABLED",
                min_instance_count=config.min_instance_count,
                max_instance_count=config.max_instance_count,
            ),
            routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                routing_strategy=config.routing_strategy.value
            ),
        )
        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "EndpointConfig",
            execution_role_arn=self.role.role_arn,
            production_variants=[variant],
            vpc_config=sagemaker.CfnEndpointConfig.VpcConfigProperty(
                security_group_ids=security_groups, subnets=subnet_ids
            ),
        )
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Resource",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
        )
        self.endpoint_arn = f"arn:{partition}:sagemaker:{region}:{account}:endpoint/{endpoint_name.lower()}"
        self.inference_components: dict[str, sagemaker.CfnInferenceComponent] = {}
        for c in self.components:
            self.inference_components[c.model] = self._component(c, config)
        self._acknowledge(region)

    def _execution_role(self, partition: str, region: str, account: str) -> iam.Role:
        """The role SageMaker runs the containers with: the weights' prefixes, the LMI repository,
        the endpoint's log group and the VPC's network interfaces, nothing else."""
        statements = [
            iam.PolicyStatement(
                sid="PullLmiImage",
                actions=[
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                    "ecr:BatchCheckLayerAvailability",
                ],
                resources=[
                    f"arn:{partition}:ecr:{region}:{sm.lmi_registry(region)}:repository/"
                    f"{sm.lmi_repository_name()}"
                ],
            ),
            iam.PolicyStatement(sid="EcrToken", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
            iam.PolicyStatement(
                sid="EndpointLogs",
                actions=[
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:PutLogEvents",
                    "logs:DescribeLogStreams",
                ],
                resources=[
                    f"arn:{partition}:logs:{region}:{account}:log-group:{LOG_GROUP_PREFIX}/"
                    f"{self.endpoint_name}:*"
                ],
            ),
            iam.PolicyStatement(sid="VpcInterfaces", actions=list(_VPC_ACTIONS), resources=["*"]),
        ]
        objects = sorted(
            {
                f"arn:{partition}:s3:::{b}/{p}*"
                for c in self.components
                if c.weights_s3
                for b, p in [c.weights_s3]
            }
        )
        if objects:
            statements.append(
                iam.PolicyStatement(sid="ReadWeights", actions=["s3:GetObject"], resources=objects)
            )
            for bucket in sorted({c.weights_s3[0] for c in self.components if c.weights_s3}):
                prefixes = sorted(
                    {
                        f"{p}*"
                        for c in self.components
                        if c.weights_s3
                        for b, p in [c.weights_s3]
                        if b == bucket
                    }
                )
                statements.append(
                    iam.PolicyStatement(
                        actions=["s3:ListBucket"],
                        resources=[f"arn:{partition}:s3:::{bucket}"],
                        conditions={"StringLike": {"s3:prefix": prefixes}},
                    )
                )
        return iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker endpoint {self.endpoint_name}: runs the Large Model Inference containers",
            inline_policies={"Endpoint": iam.PolicyDocument(statements=statements)},
        )

    def _component(self, c: sm.Component, config: SageMakerConfig) -> sagemaker.CfnInferenceComponent:
        cid = construct_id(c.model)
        component = sagemaker.CfnInferenceComponent(
            self,
            f"{cid}Component",
            endpoint_name=self.endpoint.attr_endpoint_name,
            inference_component_name=c.name,
            variant_name=sm.VARIANT_NAME,
            specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                model_name=self._models[c.name].attr_model_name,
                compute_resource_requirements=(
                    sagemaker.CfnInferenceComponent.InferenceComponentComputeResourceRequirementsProperty(
                        number_of_accelerator_devices_required=c.gpus,
                        min_memory_required_in_mb=c.memory_mib,
                    )
                ),
                startup_parameters=sagemaker.CfnInferenceComponent.InferenceComponentStartupParametersProperty(
                    model_data_download_timeout_in_seconds=config.model_download_timeout_seconds,
                    container_startup_health_check_timeout_in_seconds=config.startup_health_check_timeout_seconds,
                ),
            ),
            runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
                copy_count=c.copies
            ),
        )
        target = appscaling.CfnScalableTarget(
            self,
            f"{cid}ScalableTarget",
            service_namespace="sagemaker",
            resource_id=f"inference-component/{c.name}",
            scalable_dimension=sm.SCALABLE_DIMENSION,
            min_capacity=c.min_copies,
            max_capacity=c.max_copies,
        )
        target.node.add_dependency(component)
        appscaling.CfnScalingPolicy(
            self,
            f"{cid}ConcurrencyPolicy",
            policy_name=f"{c.name}-concurrency",
            policy_type="TargetTrackingScaling",
            scaling_target_id=target.ref,
            target_tracking_scaling_policy_configuration=(
                appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                    target_value=config.target_concurrent_requests_per_copy,
                    predefined_metric_specification=appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                        predefined_metric_type=sm.CONCURRENCY_METRIC
                    ),
                    scale_in_cooldown=config.scale_in_cooldown_seconds,
                    scale_out_cooldown=config.scale_out_cooldown_seconds,
                )
            ),
        )
        if c.scales_to_zero:
            self._wake_from_zero(cid, c, target)
        return component

    def _wake_from_zero(self, cid: str, c: sm.Component, target: appscaling.CfnScalableTarget) -> None:
        """The step policy and alarm that start a scaled-to-zero component's first copy, as
        https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html
        sets them: +1 copy, `Maximum` aggregation, when `NoCapacityInvocationFailures` (Sum over 60 s,
        one period) is above 1."""
        step = appscaling.CfnScalingPolicy(
            self,
            f"{cid}WakePolicy",
            policy_name=f"{c.name}-wake-from-zero",
            policy_type="StepScaling",
            scaling_target_id=target.ref,
            step_scaling_policy_configuration=appscaling.CfnScalingPolicy.StepScalingPolicyConfigurationProperty(
                adjustment_type="ChangeInCapacity",
                metric_aggregation_type="Maximum",
                cooldown=60,
                step_adjustments=[
                    appscaling.CfnScalingPolicy.StepAdjustmentProperty(
                        metric_interval_lower_bound=0, scaling_adjustment=1
                    )
                ],
            ),
        )
        cloudwatch.CfnAlarm(
            self,
            f"{cid}WakeAlarm",
            alarm_description=f"Inference component {c.name} was invoked with no copy: start one",
            namespace="AWS/SageMaker",
            metric_name=sm.NO_CAPACITY_METRIC,
            dimensions=[cloudwatch.CfnAlarm.DimensionProperty(name="InferenceComponentName", value=c.name)],
            statistic="Sum",
            period=60,
            evaluation_periods=1,
            datapoints_to_alarm=1,
            threshold=1,
            comparison_operator="GreaterThanThreshold",
            treat_missing_data="notBreaching",
            alarm_actions=[step.ref],
        )

    def _acknowledge(self, region: str) -> None:
        acknowledge_all(
            self.role,
            {
                "AwsSolutions-IAM5[Resource::*]": "ecr:GetAuthorizationToken has no resource-level "
                "permission, and the VPC network-interface actions SageMaker needs to place the "
                "endpoint's instances in the VPC name interfaces that do not exist yet",
                f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:{region}:<AWS::AccountId>:"
                f"log-group:{LOG_GROUP_PREFIX}/{self.endpoint_name}:*]": "the endpoint's own log "
                "group; its streams are named by SageMaker per instance and copy",
                **{
                    f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{b}/{p}*]": "the objects "
                    "under the model's weights prefix, which LMI downloads at copy start"
                    for c in self.components
                    if c.weights_s3
                    for b, p in [c.weights_s3]
                },
            },
        )
        acknowledge_all(
            self.endpoint_config,
            {
                "AwsSolutions-SM2": "the GPU instances SageMaker hosts LLMs on carry NVMe instance "
                "storage, encrypted by a hardware module on the instance; CreateEndpointConfig "
                "refuses a KmsKeyId with such instance types (SageMaker API, KmsKeyId)",
            },
        )

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` invoke this endpoint's inference components (InvokeEndpoint, streaming too)."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=list(INVOKE_ACTIONS), resource_arns=[self.endpoint_arn]
        )


def sagemaker_routes(tier: TierConfig, endpoint: SageMakerEndpoint) -> GatewayRoutes:
    """The gateway's routes of a `sagemaker` tier: each model to its inference component of
    `endpoint` (`litellm_config` for the tier), Bedrock as its fallback, and the permission to
    invoke exactly that endpoint."""
    guardrail = k8s_gateway.guardrail_env_refs() if tier.fallback.guardrail.enabled else None
    return GatewayRoutes(
        config=k8s_gateway.litellm_config(tier, guardrail=guardrail),
        statements=[
            iam.PolicyStatement(
                sid="InvokeEndpoint", actions=list(INVOKE_ACTIONS), resources=[endpoint.endpoint_arn]
            )
        ],
    )
