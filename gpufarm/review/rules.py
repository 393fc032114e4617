"""Replacement rules for every resource type a gpufarm template holds, as data.

For each type, :data:`REPLACEMENT_RULES` says:

- ``replacement``: the properties whose change CloudFormation performs by *replacing* the
  resource. Each type's page of the CloudFormation template reference marks them "Update
  requires: Replacement" (for example the `AWS::EKS::Cluster` page marks `EncryptionConfig`,
  `Name` and `RoleArn`: https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-eks-cluster-encryptionconfig.html);
  the pages are generated from the resource types' registry schemas, whose
  ``createOnlyProperties`` the table copies (cfn-lint 1.58's bundled schemas, us-east-1).
  ``tests/unit/test_review_rules.py`` checks the table against the installed cfn-lint.
- ``names``: the custom-name property (first) and the properties that scope it. "You can't
  perform an update that causes a custom-named resource to be replaced. If you must replace the
  resource, specify a new name." (CloudFormation custom naming,
  https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-name.html;
  the error is "CloudFormation cannot update a stack when a custom-named resource requires
  replacing", https://repost.aws/knowledge-center/cloudformation-custom-name). A replacement
  that keeps the name set and unchanged fails the deploy, which rolls back.
- ``same_vpc``: properties that update in place only within the resource's VPC. "When you
  create a cluster, you specify a VPC and at least two subnets"; afterwards the cluster's
  subnets and security groups can be updated, and "All subnets that you add must be in the same
  set of AZs as originally provided when you created the cluster" (Amazon EKS user guide, VPC
  and subnet requirements, https://docs.aws.amazon.com/eks/latest/userguide/network_reqs.html;
  https://aws.amazon.com/blogs/containers/enhanced-vpc-flexibility-modify-subnets-and-security-groups-in-amazon-eks/).
  The update changes the subnets *within* the cluster's VPC: the control plane's network
  interfaces stay in the VPC given at creation. `ResourcesVpcConfig` is not marked for
  replacement, so CloudFormation updates the cluster in place with the subnets of a new VPC,
  and the update fails.

Every type a tier emits (the union of :data:`gpufarm.estimate.resource_types.PRICED_TYPES` and
``FREE_TYPES``) is either in :data:`REPLACEMENT_RULES` (an empty ``replacement`` when its page
marks no property for replacement) or in :data:`NO_RULES` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

_REFERENCE = "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-{}-{}.html"


@dataclass(frozen=True, kw_only=True)
class TypeRules:
    """What a change to a resource of one type does, per the CloudFormation template reference."""

    replacement: tuple[str, ...]
    """Properties (dotted paths) whose change replaces the resource: "Update requires: Replacement"."""
    names: tuple[str, ...] = ()
    """The custom-name property first, then the properties that scope the name (a cluster, a VPC)."""
    same_vpc: tuple[str, ...] = ()
    """Properties that update in place only to values in the resource's own VPC."""
    fix: str = ""
    """What to do when a replacement of the type cannot go through, in gpufarm's terms."""


def reference_url(resource_type: str) -> str:
    """The type's page in the CloudFormation template reference."""
    _, service, resource = resource_type.split("::")
    return _REFERENCE.format(service.lower(), resource.lower())


REPLACEMENT_RULES: dict[str, TypeRules] = {
    "AWS::APS::RuleGroupsNamespace": TypeRules(
        replacement=("Name", "Workspace"), names=("Name", "Workspace")
    ),
    "AWS::APS::Scraper": TypeRules(replacement=("Source",)),
    "AWS::APS::Workspace": TypeRules(replacement=("KmsKeyArn",)),
    "AWS::ApplicationAutoScaling::ScalableTarget": TypeRules(
        replacement=("ResourceId", "ScalableDimension", "ServiceNamespace")
    ),
    "AWS::ApplicationAutoScaling::ScalingPolicy": TypeRules(
        replacement=("PolicyName", "ServiceNamespace", "ResourceId", "ScalableDimension", "ScalingTargetId"),
        names=("PolicyName", "ScalingTargetId"),
        fix="a policy's name is unique per scalable target: rename the model (its inference "
        "component and policies take the new name) rather than edit the policy in place",
    ),
    "AWS::AutoScaling::AutoScalingGroup": TypeRules(
        replacement=("InstanceId", "AutoScalingGroupName"), names=("AutoScalingGroupName",)
    ),
    "AWS::AutoScaling::ScalingPolicy": TypeRules(replacement=("AutoScalingGroupName",)),
    "AWS::AutoScaling::WarmPool": TypeRules(replacement=("AutoScalingGroupName",)),
    "AWS::Bedrock::Guardrail": TypeRules(replacement=()),
    "AWS::Bedrock::GuardrailVersion": TypeRules(replacement=("Description", "GuardrailIdentifier")),
    "AWS::CloudWatch::Alarm": TypeRules(replacement=("AlarmName",), names=("AlarmName",)),
    "AWS::CloudWatch::Dashboard": TypeRules(replacement=("DashboardName",), names=("DashboardName",)),
    "AWS::EC2::CapacityReservation": TypeRules(
        replacement=(
            "Tenancy",
            "InstancePlatform",
            "InstanceType",
            "AvailabilityZone",
            "OutPostArn",
            "EphemeralStorage",
            "EbsOptimized",
            "PlacementGroupArn",
            "AvailabilityZoneId",
        )
    ),
    "AWS::EC2::EIP": TypeRules(
        replacement=("NetworkBorderGroup", "TransferAddress", "IpamPoolId", "Address")
    ),
    "AWS::EC2::FlowLog": TypeRules(
        replacement=(
            "DeliverCrossAccountRole",
            "DeliverLogsPermissionArn",
            "LogGroupName",
            "LogDestination",
            "ResourceId",
            "TrafficType",
            "LogDestinationType",
            "ResourceType",
            "LogFormat",
            "MaxAggregationInterval",
            "DestinationOptions",
            "TagFieldSpecifications",
        )
    ),
    "AWS::EC2::GatewayRouteTableAssociation": TypeRules(replacement=("GatewayId",)),
    "AWS::EC2::InternetGateway": TypeRules(replacement=()),
    "AWS::EC2::LaunchTemplate": TypeRules(replacement=("LaunchTemplateName",), names=("LaunchTemplateName",)),
    "AWS::EC2::NatGateway": TypeRules(
        replacement=(
            "VpcId",
            "SubnetId",
            "ConnectivityType",
            "AllocationId",
            "PrivateIpAddress",
            "AvailabilityMode",
        )
    ),
    "AWS::EC2::Route": TypeRules(
        replacement=(
            "RouteTableId",
            "DestinationCidrBlock",
            "DestinationIpv6CidrBlock",
            "DestinationPrefixListId",
        )
    ),
    "AWS::EC2::RouteTable": TypeRules(replacement=("VpcId",)),
    "AWS::EC2::SecurityGroup": TypeRules(
        replacement=("GroupDescription", "GroupName", "VpcId"), names=("GroupName", "VpcId")
    ),
    "AWS::EC2::SecurityGroupEgress": TypeRules(
        replacement=(
            "IpProtocol",
            "DestinationSecurityGroupId",
            "ToPort",
            "CidrIp",
            "FromPort",
            "GroupId",
            "CidrIpv6",
            "DestinationPrefixListId",
        )
    ),
    "AWS::EC2::SecurityGroupIngress": TypeRules(
        replacement=(
            "GroupName",
            "IpProtocol",
            "SourceSecurityGroupId",
            "SourcePrefixListId",
            "ToPort",
            "CidrIp",
            "SourceSecurityGroupName",
            "SourceSecurityGroupOwnerId",
            "FromPort",
            "GroupId",
            "CidrIpv6",
        )
    ),
    "AWS::EC2::Subnet": TypeRules(
        replacement=(
            "VpcId",
            "AvailabilityZone",
            "AvailabilityZoneId",
            "CidrBlock",
            "OutpostArn",
            "Ipv6Native",
            "Ipv4IpamPoolId",
            "Ipv4NetmaskLength",
            "Ipv6IpamPoolId",
            "Ipv6NetmaskLength",
        )
    ),
    "AWS::EC2::SubnetRouteTableAssociation": TypeRules(replacement=("SubnetId", "RouteTableId")),
    "AWS::EC2::VPC": TypeRules(
        replacement=("CidrBlock", "Ipv4IpamPoolId", "Ipv4NetmaskLength", "VpcEncryptionControl")
    ),
    "AWS::EC2::VPCEndpoint": TypeRules(
        replacement=(
            "ServiceName",
            "VpcEndpointType",
            "VpcId",
            "ServiceNetworkArn",
            "ResourceConfigurationArn",
            "ServiceRegion",
            "DnsOptions.PrivateDnsPreference",
            "DnsOptions.PrivateDnsSpecifiedDomains",
        )
    ),
    "AWS::EC2::VPCEndpointService": TypeRules(replacement=()),
    "AWS::EC2::VPCEndpointServicePermissions": TypeRules(replacement=("ServiceId",)),
    "AWS::EC2::VPCGatewayAttachment": TypeRules(replacement=("VpcId",)),
    "AWS::EKS::AccessEntry": TypeRules(replacement=("PrincipalArn", "ClusterName", "Type")),
    "AWS::EKS::Addon": TypeRules(replacement=("ClusterName", "AddonName", "NamespaceConfig")),
    "AWS::EKS::Cluster": TypeRules(
        replacement=(
            "OutpostConfig",
            "EncryptionConfig",
            "KubernetesNetworkConfig.IpFamily",
            "KubernetesNetworkConfig.ServiceIpv4Cidr",
            "AccessConfig.BootstrapClusterCreatorAdminPermissions",
            "Name",
            "RoleArn",
            "BootstrapSelfManagedAddons",
        ),
        names=("Name",),
        same_vpc=("ResourcesVpcConfig.SubnetIds", "ResourcesVpcConfig.SecurityGroupIds"),
        # gpufarm names the cluster after the tier: a new name means a new tier and stack.
        fix=(
            "revert the change; to make it, deploy it as a new tier (a new `name`: a new stack and "
            "cluster beside this one), move traffic, then destroy the old stack"
        ),
    ),
    "AWS::EKS::Nodegroup": TypeRules(
        replacement=(
            "CapacityType",
            "NodegroupName",
            "RemoteAccess",
            "NodeRole",
            "ClusterName",
            "InstanceTypes",
            "DiskSize",
            "AmiType",
            "Subnets",
        ),
        names=("NodegroupName", "ClusterName"),
    ),
    "AWS::EKS::PodIdentityAssociation": TypeRules(replacement=("ClusterName", "Namespace", "ServiceAccount")),
    "AWS::ElasticLoadBalancingV2::Listener": TypeRules(replacement=("LoadBalancerArn",)),
    "AWS::ElasticLoadBalancingV2::ListenerRule": TypeRules(replacement=("ListenerArn",)),
    "AWS::ElasticLoadBalancingV2::LoadBalancer": TypeRules(
        replacement=("Name", "Type", "Scheme"), names=("Name",)
    ),
    "AWS::ElasticLoadBalancingV2::TargetGroup": TypeRules(
        replacement=("TargetType", "ProtocolVersion", "Port", "Name", "VpcId", "Protocol", "IpAddressType"),
        names=("Name",),
    ),
    "AWS::ECR::PullThroughCacheRule": TypeRules(
        replacement=(
            "EcrRepositoryPrefix",
            "UpstreamRegistryUrl",
            "CredentialArn",
            "UpstreamRegistry",
            "CustomRoleArn",
            "UpstreamRepositoryPrefix",
        ),
        names=("EcrRepositoryPrefix",),
        fix="a registry holds one rule per prefix, so a rule cannot be replaced under the same "
        "images.cache_prefix: put the new credential in the same secret (its ARN unchanged), or "
        "set a new images.cache_prefix",
    ),
    "AWS::Events::Rule": TypeRules(replacement=("Name",), names=("Name",)),
    "AWS::FSx::DataRepositoryAssociation": TypeRules(
        replacement=("FileSystemId", "FileSystemPath", "DataRepositoryPath", "BatchImportMetaDataOnCreate")
    ),
    "AWS::FSx::FileSystem": TypeRules(
        replacement=("KmsKeyId", "SecurityGroupIds", "FileSystemType", "SubnetIds", "BackupId")
    ),
    "AWS::Grafana::Workspace": TypeRules(replacement=("ClientToken",)),
    "AWS::IAM::InstanceProfile": TypeRules(
        replacement=("InstanceProfileName", "Path"), names=("InstanceProfileName",)
    ),
    "AWS::IAM::ManagedPolicy": TypeRules(
        replacement=("ManagedPolicyName", "Description", "Path"), names=("ManagedPolicyName",)
    ),
    "AWS::IAM::Policy": TypeRules(replacement=()),
    "AWS::IAM::Role": TypeRules(replacement=("Path", "RoleName"), names=("RoleName",)),
    "AWS::KMS::Key": TypeRules(replacement=()),
    "AWS::Lambda::Function": TypeRules(
        replacement=("FunctionName", "PackageType", "TenancyConfig"), names=("FunctionName",)
    ),
    "AWS::Lambda::LayerVersion": TypeRules(
        replacement=(
            "CompatibleRuntimes",
            "LicenseInfo",
            "CompatibleArchitectures",
            "LayerName",
            "Description",
            "Content",
        )
    ),
    "AWS::Lambda::Permission": TypeRules(
        replacement=(
            "FunctionName",
            "FunctionUrlAuthType",
            "InvokedViaFunctionUrl",
            "SourceAccount",
            "SourceArn",
            "Principal",
            "PrincipalOrgID",
            "Action",
            "EventSourceToken",
        )
    ),
    "AWS::Logs::LogGroup": TypeRules(replacement=("LogGroupName",), names=("LogGroupName",)),
    "AWS::Route53::HealthCheck": TypeRules(
        replacement=(
            "HealthCheckConfig.Type",
            "HealthCheckConfig.MeasureLatency",
            "HealthCheckConfig.RequestInterval",
        )
    ),
    "AWS::Route53::RecordSet": TypeRules(replacement=("HostedZoneName", "HostedZoneId")),
    "AWS::S3::Bucket": TypeRules(
        replacement=("BucketName", "BucketNamePrefix", "BucketNamespace"), names=("BucketName",)
    ),
    "AWS::S3::BucketPolicy": TypeRules(replacement=("Bucket",)),
    "AWS::SageMaker::Endpoint": TypeRules(
        replacement=("EndpointName",),
        names=("EndpointName",),
        fix="the endpoint is named after the tier ('gpufarm-<tier>'); a new endpoint config "
        "updates it in place (SageMaker rolls its instances), only a new tier name replaces it",
    ),
    "AWS::SageMaker::EndpointConfig": TypeRules(
        replacement=(
            "KmsKeyId",
            "AsyncInferenceConfig",
            "ExecutionRoleArn",
            "ShadowProductionVariants",
            "EnableNetworkIsolation",
            "ProductionVariants",
            "DataCaptureConfig",
            "ExplainerConfig",
            "MetricsConfig",
            "EndpointConfigName",
            "VpcConfig",
        ),
        names=("EndpointConfigName",),
    ),
    "AWS::SageMaker::InferenceComponent": TypeRules(replacement=()),
    "AWS::SageMaker::Model": TypeRules(
        replacement=(
            "ExecutionRoleArn",
            "EnableNetworkIsolation",
            "InferenceExecutionConfig",
            "PrimaryContainer",
            "ModelName",
            "VpcConfig",
            "Containers",
        ),
        names=("ModelName",),
    ),
    "AWS::SNS::Topic": TypeRules(replacement=("TopicName", "FifoTopic"), names=("TopicName",)),
    "AWS::SNS::TopicPolicy": TypeRules(replacement=()),
    "AWS::SQS::Queue": TypeRules(replacement=("FifoQueue", "QueueName"), names=("QueueName",)),
    "AWS::SQS::QueuePolicy": TypeRules(replacement=()),
    "AWS::SSM::Parameter": TypeRules(replacement=("Name",), names=("Name",)),
    "AWS::StepFunctions::StateMachine": TypeRules(
        replacement=("StateMachineName", "StateMachineType"), names=("StateMachineName",)
    ),
    "AWS::WAFv2::IPSet": TypeRules(replacement=("Name", "Scope"), names=("Name", "Scope")),
    "AWS::WAFv2::LoggingConfiguration": TypeRules(replacement=("ResourceArn",)),
    "AWS::WAFv2::WebACL": TypeRules(replacement=("Name", "Scope"), names=("Name", "Scope")),
    "AWS::WAFv2::WebACLAssociation": TypeRules(replacement=("ResourceArn", "WebACLArn")),
}
"""Resource type -> its replacement rules (see the module docstring for the sources)."""

NO_RULES: dict[str, str] = {
    "AWS::CDK::Metadata": "CDK's own metadata about the app, not a resource CloudFormation replaces",
    "Custom::AWSCDK-EKS-KubernetesResource": (
        "the kubectl provider applies the manifest in place (kubectl apply); the review diffs the "
        "Kubernetes objects instead"
    ),
    "Custom::AWSCDK-EKS-HelmChart": "the kubectl provider upgrades the release in place (helm upgrade)",
    "Custom::VpcRestrictDefaultSG": "a deploy-time handler that edits the default security group's rules",
    "Custom::GrafanaDashboards": "a deploy-time handler that writes dashboards into the Grafana workspace",
}
"""Types with no replacement rule that matters, with the reason."""


def rules_for(resource_type: str) -> TypeRules | None:
    """The type's rules, None for a type without any (:data:`NO_RULES`) or unknown to gpufarm."""
    return REPLACEMENT_RULES.get(resource_type)
