"""InferenceCluster: Auto Mode, encryption, logging, endpoint access, node role, access entries;
standard compute (karpenter provisioning): system node group, core add-ons, load balancer controller."""

from __future__ import annotations

import json
import tarfile
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Match, Template
from constructs import Dependable

from gpufarm.config import AutoModeBuiltinPool, ClusterConfig, ControlPlaneLog, EndpointAccess
from gpufarm.config.model import CoreAddon, Provisioning, SystemNodesConfig
from gpufarm.config.validate import KUBECTL_VERSION, SUPPORTED_KUBERNETES_VERSIONS
from gpufarm.constructs import InferenceCluster, enable_compliance_checks, lb_controller
from gpufarm.constructs._util import acknowledge
from gpufarm.constructs.lb_controller import LBC_CHART_VERSION, UPSTREAM_POLICIES, AwsLoadBalancerController
from tests.conftest import cdk_context, cfn_lint_errors
from tests.constructs.helpers import (
    AZS,
    KUBERNETES_RESOURCE,
    REGION,
    imported_cluster,
    logical_id,
    manifest_docs,
    manifest_of,
    new_stack,
    new_vpc,
    partition_arn,
    ref,
    resources,
)

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
        kubernetes_version="1.36",
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
    assert _cluster_props(private)["Version"] == "1.35"
    assert _cluster_props(public)["Version"] == "1.36"


def test_the_kubectl_provider_runs_the_kubectl_the_version_check_assumes(private: Built) -> None:
    layers = resources(private.template, "AWS::Lambda::LayerVersion").values()
    [kubectl] = [str(v["Properties"]["Description"]) for v in layers if "kubectl" in str(v["Properties"])]
    assert kubectl.startswith(f"/opt/kubectl/kubectl {KUBECTL_VERSION}.")
    minor = int(KUBECTL_VERSION.split(".")[1])
    assert tuple(f"1.{m}" for m in (minor - 1, minor, minor + 1)) == SUPPORTED_KUBERNETES_VERSIONS


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


NETWORK_POLICY_CONFIG_MAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
        "name": "amazon-vpc-cni",
        "namespace": "kube-system",
        "labels": {
            "app.kubernetes.io/part-of": "gpufarm",
            "app.kubernetes.io/managed-by": "gpufarm",
            "app.kubernetes.io/component": "network-policy-enforcement",
        },
    },
    "data": {"enable-network-policy-controller": "true"},
}
"""Auto Mode's switch for its network policy controller (EKS user guide, auto-net-pol, Step 1)."""


def test_auto_mode_turns_the_network_policy_controller_on(private: Built, public: Built) -> None:
    for built in (private, public):
        controller = built.cluster.network_policy_controller
        assert controller is not None
        assert manifest_of(built.template, controller) == [NETWORK_POLICY_CONFIG_MAP]
        props = resources(built.template, KUBERNETES_RESOURCE)[logical_id(controller)]["Properties"]
        assert props["Overwrite"] is True  # applied, so an existing ConfigMap is updated
        roots = Dependable.of(built.cluster.network_policy_enforcement).dependency_roots
        assert [r.node.path for r in roots] == [controller.node.path]


def test_auto_mode_gpu_pools_keep_the_builtin_nodeclass_network_policies_need_no_other(
    private: Built,
) -> None:
    # The ConfigMap alone makes nodes of every NodeClass enforce; a custom NodeClass only changes
    # the agent's default or turns on event logs (auto-net-pol, Step 3, optional).
    kinds = {
        doc["kind"]
        for r in resources(private.template, KUBERNETES_RESOURCE).values()
        for doc in manifest_docs(r)
    }
    assert kinds == {"ConfigMap"}


# ------------------------------------------------------------------ standard compute (karpenter)

KARPENTER = Provisioning.KARPENTER
ADDON = "AWS::EKS::Addon"
NODEGROUP = "AWS::EKS::Nodegroup"
HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"
POD_IDENTITY_TRUST = [
    {
        "Action": ["sts:AssumeRole", "sts:TagSession"],
        "Effect": "Allow",
        "Principal": {"Service": "pods.eks.amazonaws.com"},
    }
]


@dataclass(frozen=True)
class Standard:
    cluster: InferenceCluster
    template: Template
    vpc: ec2.Vpc
    outdir: Path | None = None


@pytest.fixture(scope="module")
def standard(tmp_path_factory: pytest.TempPathFactory) -> Standard:
    """The production defaults (karpenter provisioning), synthesized once with cdk-nag on."""
    outdir = tmp_path_factory.mktemp("standard-cluster")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "StandardCluster", env=cdk.Environment(region=REGION))
    vpc = new_vpc(stack)
    acknowledge(
        vpc,
        "AwsSolutions-VPC7",
        "Test VPC: flow logs are InferenceNetwork's concern; this stack tests the cluster.",
    )
    cluster = InferenceCluster(stack, "Cluster", vpc=vpc, config=ClusterConfig(provisioning=KARPENTER))
    app.synth()  # raises when cdk-nag reports an unacknowledged finding
    template = json.loads((outdir / "StandardCluster.template.json").read_text())
    return Standard(cluster, Template.from_json(template), vpc, outdir)


@pytest.fixture(scope="module")
def arm() -> Standard:
    """Graviton system nodes, other sizes and disk, no metrics-server, public endpoint."""
    stack = new_stack("ArmCluster")
    vpc = new_vpc(stack)
    config = ClusterConfig(
        provisioning=KARPENTER,
        endpoint_access=EndpointAccess.PUBLIC_AND_PRIVATE,
        public_access_cidrs=["203.0.113.0/24"],
        core_addons=[
            CoreAddon.POD_IDENTITY_AGENT,
            CoreAddon.VPC_CNI,
            CoreAddon.KUBE_PROXY,
            CoreAddon.COREDNS,
        ],
        system_nodes=SystemNodesConfig(
            instance_types=["m7g.xlarge", "m8g.xlarge"], min_size=1, desired_size=3, max_size=6, disk_gib=120
        ),
    )
    cluster = InferenceCluster(stack, "Cluster", vpc=vpc, config=config)
    return Standard(cluster, Template.from_stack(stack), vpc)


def _one(template: Template, type_: str, construct: Any) -> dict[str, Any]:
    found: dict[str, Any] = resources(template, type_)[logical_id(construct)]
    return found


def _nodegroup_id(built: Standard) -> str:
    nodegroup = built.cluster.system_nodegroup
    assert nodegroup is not None
    return logical_id(nodegroup)


def _nodegroup(built: Standard) -> dict[str, Any]:
    props: dict[str, Any] = resources(built.template, NODEGROUP)[_nodegroup_id(built)]["Properties"]
    return props


def _launch_template_data(built: Standard) -> dict[str, Any]:
    (launch_template,) = resources(built.template, "AWS::EC2::LaunchTemplate").values()
    data: dict[str, Any] = launch_template["Properties"]["LaunchTemplateData"]
    return data


def _addons_by_name(built: Standard) -> dict[str, dict[str, Any]]:
    return {r["Properties"]["AddonName"]: r for r in resources(built.template, ADDON).values()}


def _chart(built: Standard) -> dict[str, Any]:
    lbc = built.cluster.load_balancer_controller
    assert lbc is not None
    # HelmChart wraps a CustomResource, which wraps the CloudFormation resource.
    return _one(built.template, HELM_CHART, typing.cast(Any, lbc.chart.node.default_child))


def _helm_values(props: dict[str, Any]) -> dict[str, Any]:
    """The chart values as the handler receives them, CloudFormation tokens kept as dicts."""
    value = props["Values"]
    if isinstance(value, str):
        decoded: dict[str, Any] = json.loads(value)
        return decoded
    delimiter, parts = value["Fn::Join"]
    tokens = {f"@@{i}@@": part for i, part in enumerate(parts) if not isinstance(part, str)}
    text = delimiter.join(part if isinstance(part, str) else f"@@{i}@@" for i, part in enumerate(parts))

    def substitute(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: substitute(v) for k, v in node.items()}
        return tokens.get(node, node) if isinstance(node, str) else node

    decoded = substitute(json.loads(text))
    return decoded


def _role(template: Template, role: Any) -> dict[str, Any]:
    props: dict[str, Any] = _one(template, "AWS::IAM::Role", role)["Properties"]
    return props


def test_standard_compute_turns_auto_mode_off(standard: Standard) -> None:
    props = _one(standard.template, "AWS::EKS::Cluster", standard.cluster.cluster)["Properties"]
    assert props["ComputeConfig"] == {"Enabled": False}
    assert props["StorageConfig"] == {"BlockStorage": {"Enabled": False}}
    assert props["KubernetesNetworkConfig"] == {
        "ElasticLoadBalancing": {"Enabled": False},
        "IpFamily": "ipv4",
    }


def test_eks_installs_no_self_managed_addons(standard: Standard) -> None:
    standard.template.has_resource_properties("AWS::EKS::Cluster", {"BootstrapSelfManagedAddons": False})


def test_standard_compute_keeps_the_endpoint_private(standard: Standard) -> None:
    vpc_config = _one(standard.template, "AWS::EKS::Cluster", standard.cluster.cluster)["Properties"][
        "ResourcesVpcConfig"
    ]
    assert (vpc_config["EndpointPrivateAccess"], vpc_config["EndpointPublicAccess"]) == (True, False)


def test_cluster_role_has_only_the_cluster_policy(standard: Standard) -> None:
    role = _role(standard.template, standard.cluster.cluster.role)
    assert role["ManagedPolicyArns"] == [partition_arn(":iam::aws:policy/AmazonEKSClusterPolicy")]


def test_one_system_node_group_and_no_default_capacity(standard: Standard) -> None:
    standard.template.resource_count_is(NODEGROUP, 1)
    assert standard.cluster.cluster.default_nodegroup is None


def test_system_nodes_run_al2023_on_demand_in_the_private_subnets(standard: Standard) -> None:
    props = _nodegroup(standard)
    assert (props["AmiType"], props["CapacityType"]) == ("AL2023_x86_64_STANDARD", "ON_DEMAND")
    assert props["InstanceTypes"] == ["m7i.xlarge", "m6i.xlarge"]
    assert props["Subnets"] == [ref(s) for s in standard.vpc.private_subnets]


def test_graviton_instance_types_get_the_arm_ami(arm: Standard) -> None:
    props = _nodegroup(arm)
    assert (props["AmiType"], props["InstanceTypes"]) == (
        "AL2023_ARM_64_STANDARD",
        ["m7g.xlarge", "m8g.xlarge"],
    )


def test_system_node_group_sizes_come_from_config(standard: Standard, arm: Standard) -> None:
    assert _nodegroup(standard)["ScalingConfig"] == {"MinSize": 2, "DesiredSize": 2, "MaxSize": 4}
    assert _nodegroup(arm)["ScalingConfig"] == {"MinSize": 1, "DesiredSize": 3, "MaxSize": 6}


def test_system_nodes_root_volume_is_encrypted_gp3_of_the_configured_size(
    standard: Standard, arm: Standard
) -> None:
    for built, size in ((standard, 50), (arm, 120)):
        assert _launch_template_data(built)["BlockDeviceMappings"] == [
            {
                "DeviceName": "/dev/xvda",
                "Ebs": {
                    "DeleteOnTermination": True,
                    "Encrypted": True,
                    "VolumeSize": size,
                    "VolumeType": "gp3",
                },
            }
        ]
        # The size lives in the launch template; EKS rejects DiskSize next to one.
        assert "DiskSize" not in _nodegroup(built)


def test_system_nodes_require_imdsv2_out_of_reach_of_pods(standard: Standard) -> None:
    assert _launch_template_data(standard)["MetadataOptions"] == {
        "HttpEndpoint": "enabled",
        "HttpTokens": "required",
        "HttpPutResponseHopLimit": 1,
    }
    (template_id,) = resources(standard.template, "AWS::EC2::LaunchTemplate")
    assert _nodegroup(standard)["LaunchTemplate"] == {
        "Id": {"Ref": template_id},
        "Version": {"Fn::GetAtt": [template_id, "LatestVersionNumber"]},
    }


def test_system_nodes_keep_the_cluster_security_group(standard: Standard) -> None:
    # No security group in the launch template: EKS gives the nodes the cluster security group.
    assert "SecurityGroupIds" not in _launch_template_data(standard)
    assert "NetworkInterfaces" not in _launch_template_data(standard)


def test_system_nodes_are_labelled_and_the_label_is_exposed(standard: Standard) -> None:
    assert standard.cluster.system_node_label == {"gpufarm.io/node-role": "system"}
    assert _nodegroup(standard)["Labels"] == {"gpufarm.io/node-role": "system"}
    assert "Taints" not in _nodegroup(standard)


def test_system_nodes_repair_themselves(standard: Standard) -> None:
    assert _nodegroup(standard)["NodeRepairConfig"] == {"Enabled": True}


def test_system_node_role_is_least_privilege(standard: Standard) -> None:
    role_id = logical_id(standard.cluster.node_role)
    role = _role(standard.template, standard.cluster.node_role)
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}}
    ]
    assert role["ManagedPolicyArns"] == [
        partition_arn(":iam::aws:policy/AmazonEKSWorkerNodePolicy"),
        partition_arn(":iam::aws:policy/AmazonEC2ContainerRegistryPullOnly"),
    ]
    assert "Policies" not in role
    assert not resources(standard.template, "AWS::IAM::Policy", {"Roles": [{"Ref": role_id}]})
    assert _nodegroup(standard)["NodeRole"] == {"Fn::GetAtt": [role_id, "Arn"]}


def test_core_addons_are_eks_addons_at_the_eks_default_version(standard: Standard, arm: Standard) -> None:
    for built, names in (
        (
            standard,
            {
                "vpc-cni",
                "coredns",
                "kube-proxy",
                "eks-pod-identity-agent",
                "metrics-server",
                "eks-node-monitoring-agent",
            },
        ),
        (arm, {"vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent"}),
    ):
        addons = _addons_by_name(built)
        assert set(addons) == names
        assert set(built.cluster.addons) == names
        cluster_ref = ref(built.cluster.cluster)
        for addon in addons.values():
            assert addon["Properties"]["ClusterName"] == cluster_ref
            assert addon["Properties"]["ResolveConflicts"] == "OVERWRITE"
            assert "AddonVersion" not in addon["Properties"]


def test_vpc_cni_gets_its_policy_through_pod_identity(standard: Standard) -> None:
    cni_role = standard.cluster.cni_role
    assert cni_role is not None
    assert _addons_by_name(standard)["vpc-cni"]["Properties"]["PodIdentityAssociations"] == [
        {"RoleArn": {"Fn::GetAtt": [logical_id(cni_role), "Arn"]}, "ServiceAccount": "aws-node"}
    ]
    role = _role(standard.template, cni_role)
    assert role["AssumeRolePolicyDocument"]["Statement"] == POD_IDENTITY_TRUST
    assert role["ManagedPolicyArns"] == [partition_arn(":iam::aws:policy/AmazonEKS_CNI_Policy")]


def test_vpc_cni_enforces_network_policies(standard: Standard, arm: Standard) -> None:
    # {"enableNetworkPolicy": "true"} (EKS user guide, cni-network-policy-configure, Step 4),
    # whatever the order of core_addons; no other add-on is configured.
    for built in (standard, arm):
        addons = _addons_by_name(built)
        values = addons["vpc-cni"]["Properties"]["ConfigurationValues"]
        assert json.loads(values) == {"enableNetworkPolicy": "true"}
        configured = {n for n, a in addons.items() if "ConfigurationValues" in a["Properties"]}
        assert configured == {"vpc-cni"}
        roots = Dependable.of(built.cluster.network_policy_enforcement).dependency_roots
        assert [r.node.path for r in roots] == [built.cluster.addons["vpc-cni"].node.path]
        # Enforcement comes from the add-on here; gpufarm applies no ConfigMap of its own.
        assert built.cluster.network_policy_controller is None
        assert not [
            doc
            for r in resources(built.template, KUBERNETES_RESOURCE).values()
            for doc in manifest_docs(r)
            if doc["kind"] == "ConfigMap"
        ]


def test_only_the_vpc_cni_addon_has_a_role(standard: Standard) -> None:
    with_roles = {
        name
        for name, addon in _addons_by_name(standard).items()
        if {"PodIdentityAssociations", "ServiceAccountRoleArn"} & set(addon["Properties"])
    }
    assert with_roles == {"vpc-cni"}


def test_node_daemonsets_come_before_the_nodes_and_deployments_after(standard: Standard) -> None:
    addons = {name: logical_id(a) for name, a in standard.cluster.addons.items()}
    nodegroup = resources(standard.template, NODEGROUP)[_nodegroup_id(standard)]
    assert set(nodegroup["DependsOn"]) == {
        addons["vpc-cni"],
        addons["kube-proxy"],
        addons["eks-pod-identity-agent"],
    }
    by_name = _addons_by_name(standard)
    assert by_name["coredns"]["DependsOn"] == [_nodegroup_id(standard)]
    assert by_name["metrics-server"]["DependsOn"] == [_nodegroup_id(standard)]
    assert by_name["vpc-cni"]["DependsOn"] == [addons["eks-pod-identity-agent"]]


def test_one_pod_identity_agent_and_no_oidc_provider(standard: Standard) -> None:
    agents = resources(standard.template, ADDON, {"AddonName": "eks-pod-identity-agent"})
    assert list(agents) == [logical_id(standard.cluster.addons["eks-pod-identity-agent"])]
    standard.template.resource_count_is("Custom::AWSCDKOpenIdConnectProvider", 0)
    standard.template.resource_count_is("AWS::IAM::OIDCProvider", 0)


def test_system_ready_groups_the_nodes_and_every_addon(standard: Standard) -> None:
    roots = Dependable.of(standard.cluster.system_ready).dependency_roots
    expected = [standard.cluster.system_nodegroup, *standard.cluster.addons.values()]
    assert sorted(r.node.path for r in roots) == sorted(typing.cast(Any, e).node.path for e in expected)


def test_load_balancer_controller_chart_is_pinned(standard: Standard) -> None:
    props = _chart(standard)["Properties"]
    assert {
        k: props[k] for k in ("Chart", "Repository", "Version", "Release", "Namespace", "Wait", "Timeout")
    } == {
        "Chart": "aws-load-balancer-controller",
        "Repository": "https://aws.github.io/eks-charts",
        "Version": "3.2.2",
        "Release": "aws-load-balancer-controller",
        "Namespace": "kube-system",
        "Wait": True,
        "Timeout": "840s",
    }


def test_load_balancer_controller_crds_are_their_own_release_installed_first(standard: Standard) -> None:
    lbc = standard.cluster.load_balancer_controller
    assert lbc is not None
    crds = _one(standard.template, HELM_CHART, typing.cast(Any, lbc.crds.chart.node.default_child))
    props = crds["Properties"]
    assert (props["Release"], props["Namespace"], props["Wait"]) == (
        "aws-load-balancer-controller-crds",
        "kube-system",
        True,
    )
    assert "ChartAssetURL" in props and "Repository" not in props
    assert lbc.crds.version == LBC_CHART_VERSION
    assert logical_id(typing.cast(Any, lbc.crds.chart.node.default_child)) in _chart(standard)["DependsOn"]


def test_a_load_balancer_controller_version_without_shipped_crds_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A release whose IAM policy were shipped but not its CRDs.
    monkeypatch.setattr(
        lb_controller, "UPSTREAM_POLICIES", {**UPSTREAM_POLICIES, "3.2.1": UPSTREAM_POLICIES["3.2.2"]}
    )
    stack = cdk.Stack(cdk.App(), "LbcVersion")
    with pytest.raises(ValueError) as info:
        AwsLoadBalancerController(
            stack,
            "Lbc",
            cluster=imported_cluster(stack, provider_role=True),
            vpc_id="vpc-0123456789abcdef0",
            region=REGION,
            version="3.2.1",
        )
    assert str(info.value) == (
        "'version' must be '3.2.2', the release whose CRDs gpufarm ships "
        "(gpufarm/charts/aws-load-balancer-controller-crds), got '3.2.1'"
    )


def test_load_balancer_controller_runs_on_system_nodes_without_imds(standard: Standard) -> None:
    values = _helm_values(_chart(standard)["Properties"])
    assert values["nodeSelector"] == {"gpufarm.io/node-role": "system"}
    assert values["clusterName"] == ref(standard.cluster.cluster)
    assert (values["region"], values["vpcId"]) == (REGION, ref(standard.vpc))
    assert values["serviceAccount"] == {"create": True, "name": "aws-load-balancer-controller"}
    assert (values["replicaCount"], values["podDisruptionBudget"]) == (2, {"maxUnavailable": 1})


def test_load_balancer_controller_creates_no_load_balancers_of_its_own(standard: Standard) -> None:
    values = _helm_values(_chart(standard)["Properties"])
    assert values["enableServiceMutatorWebhook"] is False
    assert values["createIngressClassResource"] is False
    assert values["ingressClassParams"] == {"create": False}


def test_load_balancer_controller_credentials_come_from_pod_identity(standard: Standard) -> None:
    lbc = standard.cluster.load_balancer_controller
    assert lbc is not None
    association = _one(standard.template, "AWS::EKS::PodIdentityAssociation", lbc.pod_identity)["Properties"]
    assert association == {
        "ClusterName": ref(standard.cluster.cluster),
        "Namespace": "kube-system",
        "ServiceAccount": "aws-load-balancer-controller",
        "RoleArn": {"Fn::GetAtt": [logical_id(lbc.role), "Arn"]},
    }
    assert _role(standard.template, lbc.role)["AssumeRolePolicyDocument"]["Statement"] == POD_IDENTITY_TRUST
    policy = _one(standard.template, "AWS::IAM::Policy", lbc.policy)["Properties"]
    assert policy["Roles"] == [ref(lbc.role)]


def _cdk_bundled_lbc_policy(version: str) -> dict[str, Any]:
    """The controller policy aws-cdk-lib ships for `AlbControllerVersion` (read from its jsii bundle)."""
    bundle = next((Path(cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz"))
    with tarfile.open(bundle) as tar:
        member = tar.extractfile(f"package/aws-eks-v2/lib/addons/alb-iam_policy-v{version}.json")
        assert member is not None
        policy: dict[str, Any] = json.load(member)
        return policy


def test_shipped_policy_is_the_upstream_policy_of_the_pinned_release() -> None:
    assert list(UPSTREAM_POLICIES) == [LBC_CHART_VERSION]
    assert UPSTREAM_POLICIES[LBC_CHART_VERSION] == _cdk_bundled_lbc_policy(LBC_CHART_VERSION)["Statement"]


def _grants(statements: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """Each (action, resource, condition) a policy allows; CDK may merge statements that share one."""

    def listed(value: Any) -> list[Any]:
        return value if isinstance(value, list) else [value]

    return {
        (action, json.dumps(resource, sort_keys=True), json.dumps(s.get("Condition"), sort_keys=True))
        for s in statements
        for action in listed(s["Action"])
        for resource in listed(s["Resource"])
    }


def test_load_balancer_controller_policy_is_the_upstream_one_in_any_partition(standard: Standard) -> None:
    lbc = standard.cluster.load_balancer_controller
    assert lbc is not None
    document = _one(standard.template, "AWS::IAM::Policy", lbc.policy)["Properties"]["PolicyDocument"]
    upstream = json.loads(
        json.dumps(UPSTREAM_POLICIES[LBC_CHART_VERSION]).replace('"arn:aws:', '"@@partition@@')
    )
    for statement in upstream:
        resources_ = (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
        statement["Resource"] = [
            partition_arn(":" + r.removeprefix("@@partition@@")) if r.startswith("@@partition@@") else r
            for r in resources_
        ]
    assert all(s["Effect"] == "Allow" for s in document["Statement"])
    assert _grants(document["Statement"]) == _grants(upstream)


def test_load_balancer_controller_waits_for_its_identity_nodes_and_dns(standard: Standard) -> None:
    lbc = standard.cluster.load_balancer_controller
    assert lbc is not None
    depends_on = set(_chart(standard)["DependsOn"])
    must_precede = [lbc.pod_identity, lbc.policy, *standard.cluster.addons.values()]
    assert {_nodegroup_id(standard), *(logical_id(c) for c in must_precede)} <= depends_on


def test_pods_use_the_cluster_security_group(standard: Standard, private: Built) -> None:
    for cluster in (standard.cluster, private.cluster):
        stack = cdk.Stack.of(cluster)
        expected = {"Fn::GetAtt": [logical_id(cluster.cluster), "ClusterSecurityGroupId"]}
        assert stack.resolve(cluster.pod_security_group.security_group_id) == expected
        assert stack.resolve(cluster.cluster_security_group.security_group_id) == expected


def test_kubectl_provider_reaches_the_private_endpoint_through_the_cluster_security_group(
    standard: Standard,
) -> None:
    # EKS puts the cluster security group on the control plane's interfaces and lets it reach
    # itself on every port, so the handler in that group reaches the private endpoint on 443.
    (handler,) = resources(
        standard.template, "AWS::Lambda::Function", {"Description": KUBECTL_HANDLER}
    ).values()
    vpc_config = handler["Properties"]["VpcConfig"]
    assert vpc_config["SecurityGroupIds"] == [
        {"Fn::GetAtt": [logical_id(standard.cluster.cluster), "ClusterSecurityGroupId"]}
    ]
    assert vpc_config["SubnetIds"] == [ref(s) for s in standard.vpc.private_subnets]


def test_auto_mode_builds_none_of_the_standard_compute_parts(private: Built) -> None:
    cluster = private.cluster
    assert (cluster.addons, cluster.system_nodegroup, cluster.load_balancer_controller) == ({}, None, None)
    assert (cluster.cni_role, cluster.system_node_label) == (None, {})
    for type_ in (ADDON, NODEGROUP, HELM_CHART, "AWS::EC2::LaunchTemplate"):
        private.template.resource_count_is(type_, 0)


def test_standard_compute_passes_cdk_nag(standard: Standard) -> None:
    assert standard.outdir is not None
    report = json.loads((standard.outdir / "validation-report.json").read_text())
    assert [(p["pluginName"], p["violations"]) for p in report["pluginReports"] if p["violations"]] == []


def test_standard_compute_template_has_no_cfn_lint_errors(standard: Standard) -> None:
    assert standard.outdir is not None
    assert cfn_lint_errors(str(standard.outdir / "StandardCluster.template.json")) == []


_REQUIRED = [CoreAddon.VPC_CNI, CoreAddon.COREDNS, CoreAddon.KUBE_PROXY, CoreAddon.POD_IDENTITY_AGENT]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            ClusterConfig(provisioning=KARPENTER, core_addons=[*_REQUIRED, CoreAddon.COREDNS]),
            "'core_addons' must not list an add-on twice, got ['coredns'] more than once",
        ),
        (
            ClusterConfig(provisioning=KARPENTER, core_addons=[CoreAddon.VPC_CNI, CoreAddon.COREDNS]),
            "'core_addons' must include 'vpc-cni', 'coredns', 'kube-proxy' and 'eks-pod-identity-agent' "
            "with karpenter provisioning (pod networking, DNS and Pod Identity for the controllers), "
            "missing ['kube-proxy', 'eks-pod-identity-agent']",
        ),
        (
            ClusterConfig(
                provisioning=KARPENTER, system_nodes=SystemNodesConfig(min_size=3, desired_size=2, max_size=4)
            ),
            "'system_nodes' must satisfy min_size <= desired_size <= max_size, got 3 <= 2 <= 4",
        ),
        (
            ClusterConfig(
                provisioning=KARPENTER, system_nodes=SystemNodesConfig(min_size=2, desired_size=5, max_size=4)
            ),
            "'system_nodes' must satisfy min_size <= desired_size <= max_size, got 2 <= 5 <= 4",
        ),
        (
            ClusterConfig(
                provisioning=KARPENTER,
                system_nodes=SystemNodesConfig(instance_types=["m7i.xlarge", "g6e.xlarge", "inf2.xlarge"]),
            ),
            "'system_nodes.instance_types' must be CPU instance types (system pods use no GPU or other "
            "accelerator), got ['g6e.xlarge', 'inf2.xlarge']",
        ),
        (
            ClusterConfig(
                provisioning=KARPENTER,
                system_nodes=SystemNodesConfig(instance_types=["m7i.xlarge", "m7g.xlarge"]),
            ),
            "'system_nodes.instance_types' must share one CPU architecture, got arm64 ['m7g.xlarge'] and "
            "x86_64 ['m7i.xlarge']",
        ),
    ],
    ids=[
        "duplicate-addon",
        "missing-addons",
        "min-above-desired",
        "desired-above-max",
        "gpu-types",
        "mixed-arch",
    ],
)
def test_invalid_standard_compute_config_is_rejected(config: ClusterConfig, message: str) -> None:
    stack = new_stack("Invalid")
    with pytest.raises(ValueError) as excinfo:
        InferenceCluster(stack, "Cluster", vpc=new_vpc(stack), config=config)
    assert str(excinfo.value) == message
    assert stack.node.find_child("Cluster").node.children == []


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"version": "1.17.1"},
            "'version' must be one of '3.2.2' (the chart versions whose controller IAM policy is shipped "
            "here), got '1.17.1'",
        ),
        ({"replicas": 0}, "'replicas' must be 1 to 3 (one leads, the rest wait), got 0"),
        ({"replicas": 4}, "'replicas' must be 1 to 3 (one leads, the rest wait), got 4"),
    ],
    ids=["unshipped-version", "no-replicas", "too-many-replicas"],
)
def test_invalid_load_balancer_controller_input_is_rejected(overrides: dict[str, Any], message: str) -> None:
    stack = new_stack("InvalidLbc")
    with pytest.raises(ValueError) as excinfo:
        AwsLoadBalancerController(
            stack,
            "Lbc",
            cluster=imported_cluster(stack),
            vpc_id="vpc-0123456789abcdef0",
            region=REGION,
            **overrides,
        )
    assert str(excinfo.value) == message


def test_private_access_cidrs_reach_the_api_endpoint_on_443_only() -> None:
    stack = new_stack("OperatorAccess")
    config = ClusterConfig(endpoint_access=EndpointAccess.PRIVATE, private_access_cidrs=["172.16.0.0/12"])
    InferenceCluster(stack, "Cluster", vpc=new_vpc(stack), config=config, cluster_name="operator-access")
    template = Template.from_stack(stack)
    inline = [
        r
        for g in resources(template, "AWS::EC2::SecurityGroup").values()
        for r in g["Properties"].get("SecurityGroupIngress", [])
    ]
    separate = [r["Properties"] for r in resources(template, "AWS::EC2::SecurityGroupIngress").values()]
    rules = [r for r in inline + separate if r.get("CidrIp") == "172.16.0.0/12"]
    assert rules
    assert all((r["IpProtocol"], r["FromPort"], r["ToPort"]) == ("tcp", 443, 443) for r in rules)
