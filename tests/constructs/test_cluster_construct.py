"""InferenceCluster: Auto Mode, encryption, logging, endpoint access, node role, access entries."""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Match, Template

from gpufarm.config import AutoModeBuiltinPool, ClusterConfig, ControlPlaneLog, EndpointAccess
from gpufarm.constructs import InferenceCluster
from tests.constructs.helpers import AZS, logical_id, new_stack, partition_arn, resources

PRIVATE_SUBNET_IDS = ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"]
ADMIN_ROLE = "arn:aws:iam::123456789012:role/PlatformAdmin"
KUBECTL_HANDLER = "onEvent handler for EKS kubectl resource provider"


@dataclass(frozen=True)
class Built:
    cluster: InferenceCluster
    template: Template
    subnet_refs: list[Any]


@pytest.fixture(scope="module")
def private() -> Built:
    """Defaults, on an existing VPC imported by attributes."""
    stack = new_stack("PrivateCluster")
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "ExistingVpc",
        vpc_id="vpc-0123456789abcdef0",
        vpc_cidr_block="10.0.0.0/16",
        availability_zones=AZS,
        public_subnet_ids=["subnet-0ccccccccccccccccc", "subnet-0ddddddddddddddddd"],
        private_subnet_ids=PRIVATE_SUBNET_IDS,
    )
    cluster = InferenceCluster(stack, "Cluster", vpc=vpc, config=ClusterConfig())
    return Built(cluster, Template.from_stack(stack), list(PRIVATE_SUBNET_IDS))


@pytest.fixture(scope="module")
def public() -> Built:
    """Public and private endpoint, admin role, no secrets key, fewer logs and pools, a NAT-less VPC."""
    stack = new_stack("PublicCluster")
    vpc = ec2.Vpc(
        stack,
        "Vpc",
        availability_zones=AZS,
        nat_gateways=0,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC),
            ec2.SubnetConfiguration(name="Private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
        ],
    )
    config = ClusterConfig(
        kubernetes_version="1.33",
        endpoint_access=EndpointAccess.PUBLIC_AND_PRIVATE,
        public_access_cidrs=["203.0.113.0/24", "198.51.100.0/24"],
        control_plane_logging=[ControlPlaneLog.API, ControlPlaneLog.AUDIT],
        auto_mode_builtin_pools=[AutoModeBuiltinPool.SYSTEM],
        secrets_encryption=False,
        admin_role_arn=ADMIN_ROLE,
    )
    cluster = InferenceCluster(stack, "Cluster", vpc=vpc, config=config, cluster_name="gpufarm-public")
    refs = [{"Ref": logical_id(s)} for s in vpc.isolated_subnets]
    return Built(cluster, Template.from_stack(stack), refs)


def _cluster_props(built: Built) -> dict[str, Any]:
    props: dict[str, Any] = resources(built.template, "AWS::EKS::Cluster")[logical_id(built.cluster.cluster)][
        "Properties"
    ]
    return props


def test_existing_vpc_is_used_not_created(private: Built) -> None:
    private.template.resource_count_is("AWS::EC2::VPC", 0)
    private.template.resource_count_is("AWS::EC2::Subnet", 0)
    private.template.resource_count_is("AWS::EKS::Cluster", 1)
    assert _cluster_props(private)["ResourcesVpcConfig"]["SubnetIds"] == PRIVATE_SUBNET_IDS


def test_nodes_go_to_isolated_subnets_when_the_vpc_has_no_nat(public: Built) -> None:
    assert len(public.subnet_refs) == 2
    assert _cluster_props(public)["ResourcesVpcConfig"]["SubnetIds"] == public.subnet_refs


def test_auto_mode_is_on_with_the_builtin_pools_and_node_role(private: Built, public: Built) -> None:
    for built, pools in ((private, ["system", "general-purpose"]), (public, ["system"])):
        props = _cluster_props(built)
        assert props["ComputeConfig"] == {
            "Enabled": True,
            "NodePools": pools,
            "NodeRoleArn": {"Fn::GetAtt": [logical_id(built.cluster.node_role), "Arn"]},
        }
        assert props["StorageConfig"] == {"BlockStorage": {"Enabled": True}}
        assert props["KubernetesNetworkConfig"] == {
            "ElasticLoadBalancing": {"Enabled": True},
            "IpFamily": "ipv4",
        }
        assert props["AccessConfig"] == {"AuthenticationMode": "API"}


def test_kubernetes_version_comes_from_config(private: Built, public: Built) -> None:
    assert _cluster_props(private)["Version"] == "1.34"
    assert _cluster_props(public)["Version"] == "1.33"


def test_cluster_name_is_passed_through(public: Built) -> None:
    public.template.has_resource_properties("AWS::EKS::Cluster", {"Name": "gpufarm-public"})


def test_secrets_are_encrypted_with_a_rotating_key(private: Built) -> None:
    key = private.cluster.secrets_key
    assert key is not None
    private.template.resource_count_is("AWS::KMS::Key", 1)
    private.template.has_resource(
        "AWS::KMS::Key", {"Properties": {"EnableKeyRotation": True}, "DeletionPolicy": "Retain"}
    )
    assert _cluster_props(private)["EncryptionConfig"] == [
        {"Provider": {"KeyArn": {"Fn::GetAtt": [logical_id(key), "Arn"]}}, "Resources": ["secrets"]}
    ]


def test_secrets_encryption_off_creates_no_key(public: Built) -> None:
    assert public.cluster.secrets_key is None
    public.template.resource_count_is("AWS::KMS::Key", 0)
    public.template.has_resource_properties("AWS::EKS::Cluster", {"EncryptionConfig": Match.absent()})


def test_control_plane_logging_enables_the_configured_types(private: Built, public: Built) -> None:
    for built, types in (
        (private, ["api", "audit", "authenticator", "controllerManager", "scheduler"]),
        (public, ["api", "audit"]),
    ):
        assert _cluster_props(built)["Logging"] == {
            "ClusterLogging": {"EnabledTypes": [{"Type": t} for t in types]}
        }


def test_private_endpoint_only_by_default(private: Built) -> None:
    vpc_config = _cluster_props(private)["ResourcesVpcConfig"]
    assert vpc_config["EndpointPrivateAccess"] is True
    assert vpc_config["EndpointPublicAccess"] is False
    assert "PublicAccessCidrs" not in vpc_config


def test_public_endpoint_admits_only_the_configured_cidrs(public: Built) -> None:
    vpc_config = _cluster_props(public)["ResourcesVpcConfig"]
    assert vpc_config["EndpointPrivateAccess"] is True
    assert vpc_config["EndpointPublicAccess"] is True
    assert vpc_config["PublicAccessCidrs"] == ["203.0.113.0/24", "198.51.100.0/24"]


def test_node_role_has_exactly_the_minimal_auto_mode_policies(private: Built) -> None:
    role = resources(private.template, "AWS::IAM::Role")[logical_id(private.cluster.node_role)]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}}
    ]
    assert role["ManagedPolicyArns"] == [
        partition_arn(":iam::aws:policy/AmazonEKSWorkerNodeMinimalPolicy"),
        partition_arn(":iam::aws:policy/AmazonEC2ContainerRegistryPullOnly"),
    ]
    assert "Policies" not in role
    assert not resources(
        private.template, "AWS::IAM::Policy", {"Roles": [{"Ref": logical_id(private.cluster.node_role)}]}
    )


def _admin_entries(built: Built) -> dict[str, dict[str, Any]]:
    return resources(built.template, "AWS::EKS::AccessEntry", {"PrincipalArn": ADMIN_ROLE})


def test_admin_role_gets_a_cluster_admin_access_entry(public: Built) -> None:
    entries = _admin_entries(public)
    assert len(entries) == 1
    (entry,) = entries.values()
    assert entry["Properties"]["ClusterName"] == {"Ref": logical_id(public.cluster.cluster)}
    assert entry["Properties"]["AccessPolicies"] == [
        {
            "AccessScope": {"Type": "cluster"},
            "PolicyArn": partition_arn(":eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"),
        }
    ]


def test_no_admin_role_no_admin_access_entry(private: Built) -> None:
    assert _admin_entries(private) == {}
    # The only entry left is the kubectl provider's own, which aws_eks_v2 needs to apply manifests.
    private.template.resource_count_is("AWS::EKS::AccessEntry", 1)
    private.template.has_resource_properties(
        "AWS::EKS::AccessEntry",
        {"PrincipalArn": {"Fn::GetAtt": [Match.string_like_regexp("KubectlProvider"), "Arn"]}},
    )


@pytest.mark.parametrize("which", ["private", "public"])
def test_kubectl_provider_runs_in_the_private_subnets(which: str, request: pytest.FixtureRequest) -> None:
    built: Built = request.getfixturevalue(which)
    handlers = resources(built.template, "AWS::Lambda::Function", {"Description": KUBECTL_HANDLER})
    assert len(handlers) == 1
    (handler,) = handlers.values()
    vpc_config = handler["Properties"]["VpcConfig"]
    assert vpc_config["SubnetIds"] == built.subnet_refs
    assert vpc_config["SecurityGroupIds"] == [
        {"Fn::GetAtt": [logical_id(built.cluster.cluster), "ClusterSecurityGroupId"]}
    ]
    layer = built.cluster.node.find_child("KubectlLayer")
    assert {"Ref": logical_id(layer)} in handler["Properties"]["Layers"]


def test_exposes_the_eks_managed_security_group_and_name(private: Built) -> None:
    stack = cdk.Stack.of(private.cluster)
    cluster_id = logical_id(private.cluster.cluster)
    assert private.cluster.icluster is typing.cast(object, private.cluster.cluster)
    assert stack.resolve(private.cluster.cluster_security_group.security_group_id) == {
        "Fn::GetAtt": [cluster_id, "ClusterSecurityGroupId"]
    }
    assert stack.resolve(private.cluster.cluster_name) == {"Ref": cluster_id}
