"""Which resource types are stateful or traffic-bearing, and which of their properties can only be
set at creation (so that changing them replaces the resource)."""

from __future__ import annotations

import importlib
from typing import Any

STATEFUL_TYPES = frozenset(
    {
        "AWS::EKS::Cluster",
        "AWS::EKS::Nodegroup",
        "AWS::FSx::FileSystem",
        "AWS::FSx::DataRepositoryAssociation",
        "AWS::S3::Bucket",
        "AWS::KMS::Key",
        "AWS::Logs::LogGroup",
        "AWS::EC2::CapacityReservation",
        "AWS::SQS::Queue",
        "AWS::APS::Workspace",
        "AWS::SecretsManager::Secret",
        "AWS::Cognito::UserPool",
    }
)
"""Resources that hold data or running capacity: replacing one loses it or restarts everything on it."""

TRAFFIC_TYPES = frozenset(
    {
        "AWS::ElasticLoadBalancingV2::LoadBalancer",
        "AWS::ElasticLoadBalancingV2::TargetGroup",
        "AWS::ElasticLoadBalancingV2::Listener",
        "AWS::EC2::VPC",
        "AWS::EC2::Subnet",
        "AWS::EC2::SecurityGroup",
        "AWS::EC2::NatGateway",
        "AWS::EC2::EIP",
        "AWS::EC2::InternetGateway",
        "AWS::EC2::VPCEndpoint",
        "AWS::EC2::VPCEndpointService",
        "AWS::WAFv2::WebACL",
    }
)
"""Resources requests flow through: replacing one drops connections or changes addresses."""

REPLACEMENT_SUPPLEMENT: dict[str, tuple[str, ...]] = {
    # CreateTargetGroup takes TargetControlPort; ModifyTargetGroup does not (ELBv2 API).
    "AWS::ElasticLoadBalancingV2::TargetGroup": ("/properties/TargetControlPort",),
    # UpdateFileSystem's Lustre configuration has none of these (FSx API), so CloudFormation
    # creates a new file system when one changes.
    "AWS::FSx::FileSystem": (
        "/properties/LustreConfiguration/DeploymentType",
        "/properties/LustreConfiguration/ImportPath",
        "/properties/LustreConfiguration/ExportPath",
        "/properties/LustreConfiguration/ImportedFileChunkSize",
        "/properties/LustreConfiguration/DriveCacheType",
        "/properties/LustreConfiguration/EfaEnabled",
    ),
}
"""Create-only properties the registry schemas do not list, from the service APIs' update calls."""

CREATE_ONLY_FALLBACK: dict[str, tuple[str, ...]] = {
    "AWS::EKS::Cluster": (
        "/properties/OutpostConfig",
        "/properties/EncryptionConfig",
        "/properties/KubernetesNetworkConfig/IpFamily",
        "/properties/KubernetesNetworkConfig/ServiceIpv4Cidr",
        "/properties/AccessConfig/BootstrapClusterCreatorAdminPermissions",
        "/properties/Name",
        "/properties/RoleArn",
        "/properties/BootstrapSelfManagedAddons",
    ),
    "AWS::EKS::Nodegroup": (
        "/properties/CapacityType",
        "/properties/NodegroupName",
        "/properties/RemoteAccess",
        "/properties/NodeRole",
        "/properties/ClusterName",
        "/properties/InstanceTypes",
        "/properties/DiskSize",
        "/properties/AmiType",
        "/properties/Subnets",
    ),
    "AWS::FSx::FileSystem": (
        "/properties/KmsKeyId",
        "/properties/SecurityGroupIds",
        "/properties/FileSystemType",
        "/properties/SubnetIds",
        "/properties/BackupId",
    ),
    "AWS::FSx::DataRepositoryAssociation": (
        "/properties/FileSystemId",
        "/properties/FileSystemPath",
        "/properties/DataRepositoryPath",
        "/properties/BatchImportMetaDataOnCreate",
    ),
    "AWS::S3::Bucket": ("/properties/BucketName",),
    "AWS::Logs::LogGroup": ("/properties/LogGroupName",),
    "AWS::EC2::CapacityReservation": (
        "/properties/Tenancy",
        "/properties/InstancePlatform",
        "/properties/InstanceType",
        "/properties/AvailabilityZone",
        "/properties/EphemeralStorage",
        "/properties/EbsOptimized",
        "/properties/PlacementGroupArn",
        "/properties/AvailabilityZoneId",
    ),
    "AWS::SQS::Queue": ("/properties/FifoQueue", "/properties/QueueName"),
    "AWS::APS::Workspace": ("/properties/KmsKeyArn",),
    "AWS::SecretsManager::Secret": ("/properties/Name",),
    "AWS::EC2::VPC": ("/properties/CidrBlock", "/properties/Ipv4IpamPoolId", "/properties/Ipv4NetmaskLength"),
    "AWS::EC2::Subnet": (
        "/properties/VpcId",
        "/properties/AvailabilityZone",
        "/properties/AvailabilityZoneId",
        "/properties/CidrBlock",
        "/properties/Ipv6Native",
    ),
    "AWS::EC2::SecurityGroup": ("/properties/GroupDescription", "/properties/GroupName", "/properties/VpcId"),
    "AWS::EC2::NatGateway": (
        "/properties/VpcId",
        "/properties/SubnetId",
        "/properties/ConnectivityType",
        "/properties/AllocationId",
        "/properties/PrivateIpAddress",
    ),
    "AWS::EC2::EIP": ("/properties/NetworkBorderGroup", "/properties/TransferAddress", "/properties/Address"),
    "AWS::ElasticLoadBalancingV2::LoadBalancer": (
        "/properties/Name",
        "/properties/Type",
        "/properties/Scheme",
    ),
    "AWS::ElasticLoadBalancingV2::TargetGroup": (
        "/properties/TargetType",
        "/properties/ProtocolVersion",
        "/properties/Port",
        "/properties/Name",
        "/properties/VpcId",
        "/properties/Protocol",
        "/properties/IpAddressType",
    ),
    "AWS::ElasticLoadBalancingV2::Listener": ("/properties/LoadBalancerArn",),
    "AWS::EC2::VPCEndpoint": (
        "/properties/ServiceName",
        "/properties/VpcEndpointType",
        "/properties/VpcId",
    ),
    "AWS::WAFv2::WebACL": ("/properties/Name", "/properties/Scope"),
}
"""createOnlyProperties of the stateful and traffic-bearing types, as cfn-lint 1.58's bundled
registry schemas list them: used when cfn-lint is not installed."""


def is_critical(resource_type: str) -> bool:
    """Whether a resource is stateful or traffic-bearing."""
    return resource_type in STATEFUL_TYPES or resource_type in TRAFFIC_TYPES


class CreateOnlyProperties:
    """Create-only property paths per resource type: cfn-lint's schemas, else the fallback table."""

    def __init__(self, *, use_cfn_lint: bool = True) -> None:
        self._manager: Any = None
        if use_cfn_lint:
            try:
                self._manager = importlib.import_module("cfnlint.schema").PROVIDER_SCHEMA_MANAGER
            except ImportError:
                self._manager = None
        self._cache: dict[tuple[str, str], tuple[str, ...]] = {}

    @property
    def source(self) -> str:
        """Where the create-only properties come from."""
        return "cfn-lint resource schemas" if self._manager is not None else "gpufarm's fallback table"

    def paths(self, resource_type: str, region: str = "us-east-1") -> tuple[str, ...]:
        """Schema paths ('/properties/A/B') of the type's create-only properties."""
        key = (resource_type, region)
        if key not in self._cache:
            found: tuple[str, ...] = CREATE_ONLY_FALLBACK.get(resource_type, ())
            if self._manager is not None and not resource_type.startswith("Custom::"):
                try:
                    schema = self._manager.get_resource_schema(region, resource_type).schema
                    found = tuple(schema.get("createOnlyProperties", ()))
                except Exception:  # an unknown type or region: no schema, use the table
                    found = CREATE_ONLY_FALLBACK.get(resource_type, ())
            self._cache[key] = tuple(dict.fromkeys(found + REPLACEMENT_SUPPLEMENT.get(resource_type, ())))
        return self._cache[key]
