"""ReservedGpuNodeGroup (create / odcr / capacity-block, EFA) and EfaDevicePlugin."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template
from constructs import IConstruct

from gpufarm.config.model import (
    CompliancePack,
    NodeGroupAmiType,
    NodeGroupConfig,
    ReservationKind,
    ReservedCapacityConfig,
)
from gpufarm.constructs import enable_compliance_checks
from gpufarm.constructs.compliance import require_compliance_pack
from gpufarm.constructs.reserved_capacity import (
    EFA_DEVICE_PLUGIN_CHART_VERSION,
    EfaDevicePlugin,
    ReservedGpuNodeGroup,
    node_group_efa_interfaces,
    node_group_labels,
    update_strategy,
)
from gpufarm.k8s.karpenter import efa_device_plugin_values, efa_interfaces, nvidia_device_plugin_values
from gpufarm.k8s.labels import CAPACITY_CLASS_LABEL, EFA_LABEL, POOL_LABEL
from tests.conftest import cdk_context, cfn_lint_errors, nag_violations
from tests.constructs.helpers import (
    AZS,
    CLUSTER_NAME,
    KUBECTL_SERVICE_TOKEN,
    REGION,
    imported_cluster,
    new_stack,
    new_vpc,
    partition_arn,
    resources,
)
from tests.unit.test_k8s_karpenter import schedulable_on

CLUSTER_SG = "sg-0123456789abcdef0"
BLOCK = "cr-0123456789abcdef2"
ODCRS = ["cr-0123456789abcdef0", "cr-0123456789abcdef1"]

CREATED = NodeGroupConfig(
    name="h100-base",
    instance_type="p5.48xlarge",
    availability_zone="us-east-1a",
    nodes=2,
    disk_gib=1000,
    efa=True,
    capacity_class="h100",
)
CREATED_WITH_SPARE = NodeGroupConfig(
    name="l40s-base",
    instance_type="g6e.12xlarge",
    availability_zone="us-east-1b",
    nodes=2,
    capacity=ReservedCapacityConfig(instance_count=4),
)
ONE_ODCR = NodeGroupConfig(
    name="a100",
    instance_type="p4d.24xlarge",
    availability_zone="us-east-1b",
    capacity=ReservedCapacityConfig(kind=ReservationKind.ODCR, reservation_ids=ODCRS[:1]),
)
TWO_ODCRS = NodeGroupConfig(
    name="a100-pool",
    instance_type="p4d.24xlarge",
    availability_zone="us-east-1b",
    nodes=3,
    capacity=ReservedCapacityConfig(kind=ReservationKind.ODCR, reservation_ids=ODCRS),
)
CAPACITY_BLOCK = NodeGroupConfig(
    name="h200-block",
    instance_type="p5en.48xlarge",
    availability_zone="us-east-1a",
    nodes=4,
    ami_type=NodeGroupAmiType.BOTTLEROCKET_NVIDIA,
    capacity=ReservedCapacityConfig(kind=ReservationKind.CAPACITY_BLOCK, reservation_ids=[BLOCK]),
)


@dataclass(frozen=True)
class Built:
    stack: cdk.Stack
    vpc: ec2.Vpc
    groups: dict[str, ReservedGpuNodeGroup]
    plugin: EfaDevicePlugin
    template: Template


@pytest.fixture(scope="module")
def built() -> Built:
    stack = new_stack("Reserved")
    vpc = new_vpc(stack)
    cluster = imported_cluster(stack)
    groups = {
        config.name: ReservedGpuNodeGroup(
            stack,
            config.name,
            cluster=cluster,
            vpc=vpc,
            config=config,
            cluster_security_group_id=CLUSTER_SG if config.efa else None,
        )
        for config in (CREATED, CREATED_WITH_SPARE, ONE_ODCR, TWO_ODCRS, CAPACITY_BLOCK)
    }
    plugin = EfaDevicePlugin(stack, "EfaDevicePlugin", cluster=cluster)
    return Built(stack, vpc, groups, plugin, Template.from_stack(stack))


def logical_id(construct: IConstruct) -> str:
    """Logical ID of a construct's CloudFormation resource, through wrappers such as HelmChart's."""
    while not isinstance(construct, cdk.CfnElement):
        child = construct.node.default_child
        assert child is not None, f"{construct.node.path} has no default child"
        construct = child
    return cdk.Stack.of(construct).get_logical_id(construct)


def props(built: Built, construct: IConstruct) -> dict[str, Any]:
    """The Properties of a construct's resource in the template."""
    resource = built.template.to_json()["Resources"][logical_id(construct)]
    properties: dict[str, Any] = resource["Properties"]
    return properties


def nodegroup(built: Built, config: NodeGroupConfig) -> dict[str, Any]:
    return props(built, built.groups[config.name].nodegroup)


def launch_data(built: Built, config: NodeGroupConfig) -> dict[str, Any]:
    data: dict[str, Any] = props(built, built.groups[config.name].launch_template)["LaunchTemplateData"]
    return data


def ref(construct: IConstruct) -> dict[str, str]:
    return {"Ref": logical_id(construct)}


def get_att(construct: IConstruct, attribute: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id(construct), attribute]}


def reservation_arn(reservation_id: str) -> dict[str, Any]:
    return {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":ec2:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                f":capacity-reservation/{reservation_id}",
            ],
        ]
    }


# --------------------------------------------------------------------------- kind 'create'


def test_created_reservation_is_targeted_linux_default_tenancy_without_end(built: Built) -> None:
    reservation = built.groups[CREATED.name].capacity_reservation
    assert reservation is not None
    properties = props(built, reservation)
    assert {k: v for k, v in properties.items() if k != "TagSpecifications"} == {
        "InstanceType": "p5.48xlarge",
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": "us-east-1a",
        "InstanceCount": 2,
        "InstanceMatchCriteria": "targeted",
        "Tenancy": "default",
        "EndDateType": "unlimited",
    }


def test_created_reservation_holds_instance_count_when_given(built: Built) -> None:
    reservation = built.groups[CREATED_WITH_SPARE.name].capacity_reservation
    assert reservation is not None
    assert props(built, reservation)["InstanceCount"] == 4


def test_created_reservation_is_tagged_with_pool_and_class(built: Built) -> None:
    reservation = built.groups[CREATED.name].capacity_reservation
    assert reservation is not None
    assert props(built, reservation)["TagSpecifications"] == [
        {
            "ResourceType": "capacity-reservation",
            "Tags": [
                {"Key": POOL_LABEL, "Value": "h100-base"},
                {"Key": CAPACITY_CLASS_LABEL, "Value": "h100"},
            ],
        }
    ]


def test_launch_template_targets_the_created_reservation(built: Built) -> None:
    reservation = built.groups[CREATED.name].capacity_reservation
    assert reservation is not None
    assert launch_data(built, CREATED)["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": ref(reservation)}
    }


# --------------------------------------------------------------------------- kind 'odcr'


def test_one_odcr_is_targeted_by_id(built: Built) -> None:
    group = built.groups[ONE_ODCR.name]
    assert launch_data(built, ONE_ODCR)["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": ODCRS[0]}
    }
    assert group.capacity_reservation is None
    assert group.capacity_reservation_group is None


def test_several_odcrs_are_grouped_in_a_capacity_reservation_pool(built: Built) -> None:
    group = built.groups[TWO_ODCRS.name].capacity_reservation_group
    assert group is not None
    properties = props(built, group)
    assert properties["Configuration"] == [
        {"Type": "AWS::EC2::CapacityReservationPool"},
        {
            "Type": "AWS::ResourceGroups::Generic",
            "Parameters": [{"Name": "allowed-resource-types", "Values": ["AWS::EC2::CapacityReservation"]}],
        },
    ]
    assert properties["Resources"] == [reservation_arn(i) for i in ODCRS]


def test_launch_template_targets_the_reservation_group(built: Built) -> None:
    group = built.groups[TWO_ODCRS.name].capacity_reservation_group
    assert group is not None
    assert launch_data(built, TWO_ODCRS)["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": get_att(group, "Arn")}
    }


def test_existing_reservations_create_no_reservation(built: Built) -> None:
    created = [built.groups[c.name].capacity_reservation for c in (CREATED, CREATED_WITH_SPARE)]
    assert set(resources(built.template, "AWS::EC2::CapacityReservation")) == {
        logical_id(r) for r in created if r is not None
    }


# --------------------------------------------------------------------------- kind 'capacity-block'


def test_capacity_block_group_has_the_capacity_block_type(built: Built) -> None:
    assert nodegroup(built, CAPACITY_BLOCK)["CapacityType"] == "CAPACITY_BLOCK"


def test_capacity_block_launch_template_has_market_type_and_block_id(built: Built) -> None:
    data = launch_data(built, CAPACITY_BLOCK)
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": BLOCK}
    }
    assert data["InstanceType"] == "p5en.48xlarge"


def test_capacity_block_group_may_scale_to_zero(built: Built) -> None:
    # EKS scales it to 0 forty minutes before the block ends; updates need desired 0 too.
    assert nodegroup(built, CAPACITY_BLOCK)["ScalingConfig"] == {"MinSize": 0, "DesiredSize": 4, "MaxSize": 4}


def test_on_demand_reservations_have_no_market_options(built: Built) -> None:
    for config in (CREATED, ONE_ODCR, TWO_ODCRS):
        assert "InstanceMarketOptions" not in launch_data(built, config), config.name
        assert nodegroup(built, config)["CapacityType"] == "ON_DEMAND", config.name


# --------------------------------------------------------------------------- node group


def test_reserved_group_size_is_fixed_at_nodes(built: Built) -> None:
    for config in (CREATED, ONE_ODCR, TWO_ODCRS):
        size = config.nodes
        assert nodegroup(built, config)["ScalingConfig"] == {
            "MinSize": size,
            "DesiredSize": size,
            "MaxSize": size,
        }, config.name


def test_group_runs_only_in_the_private_subnet_of_its_zone(built: Built) -> None:
    by_zone = {s.availability_zone: s for s in built.vpc.private_subnets}
    for config in (CREATED, ONE_ODCR, CAPACITY_BLOCK):
        assert nodegroup(built, config)["Subnets"] == [ref(by_zone[config.availability_zone])], config.name


def test_group_uses_the_configured_gpu_ami(built: Built) -> None:
    assert nodegroup(built, CREATED)["AmiType"] == "AL2023_x86_64_NVIDIA"
    assert nodegroup(built, CAPACITY_BLOCK)["AmiType"] == "BOTTLEROCKET_x86_64_NVIDIA"


def test_instance_type_is_in_the_launch_template_only(built: Built) -> None:
    # EKS rejects instance types in both places; Capacity Blocks require it in the template.
    assert launch_data(built, ONE_ODCR)["InstanceType"] == "p4d.24xlarge"
    assert "InstanceTypes" not in nodegroup(built, ONE_ODCR)
    assert "DiskSize" not in nodegroup(built, ONE_ODCR)


def test_group_uses_the_latest_launch_template_version(built: Built) -> None:
    template = built.groups[CREATED.name].launch_template
    assert nodegroup(built, CREATED)["LaunchTemplate"] == {
        "Id": ref(template),
        "Version": get_att(template, "LatestVersionNumber"),
    }


def test_nodes_are_labelled_with_pool_class_and_os(built: Built) -> None:
    assert nodegroup(built, CREATED)["Labels"] == {
        "gpufarm.io/pool": "h100-base",
        "gpufarm.io/capacity-class": "h100",
        "gpufarm.io/ami-family": "al2023",
        "nvidia.com/gpu.present": "true",
        "gpufarm.io/efa": "true",
    }


def test_capacity_class_defaults_to_the_group_name(built: Built) -> None:
    assert nodegroup(built, ONE_ODCR)["Labels"][CAPACITY_CLASS_LABEL] == "a100"


def test_nodes_are_tainted_for_gpu_pods_only(built: Built) -> None:
    for config in (CREATED, ONE_ODCR, CAPACITY_BLOCK):
        assert nodegroup(built, config)["Taints"] == [
            {"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NO_SCHEDULE"}
        ], config.name


def test_node_auto_repair_is_on(built: Built) -> None:
    assert nodegroup(built, CREATED)["NodeRepairConfig"] == {"Enabled": True}


def test_nvidia_device_plugin_runs_on_al2023_groups_only() -> None:
    # Bottlerocket's NVIDIA AMI ships its own device plugin.
    assert schedulable_on(nvidia_device_plugin_values(), node_group_labels(CREATED))
    assert not schedulable_on(nvidia_device_plugin_values(), node_group_labels(CAPACITY_BLOCK))


# --------------------------------------------------------------------------- rolling updates


@pytest.mark.parametrize(
    ("config", "strategy"),
    [
        (CREATED, "MINIMAL"),
        (CREATED_WITH_SPARE, "DEFAULT"),
        (CREATED.model_copy(update={"capacity": ReservedCapacityConfig(instance_count=3)}), "MINIMAL"),
        (TWO_ODCRS, "MINIMAL"),
        (CAPACITY_BLOCK, "MINIMAL"),
    ],
    ids=["full-reservation", "two-spare", "one-spare", "odcr", "capacity-block"],
)
def test_update_strategy_surges_only_into_spare_reserved_capacity(
    config: NodeGroupConfig, strategy: str
) -> None:
    assert update_strategy(config) == strategy


def test_updates_replace_one_node_at_a_time(built: Built) -> None:
    assert nodegroup(built, CREATED)["UpdateConfig"] == {"MaxUnavailable": 1, "UpdateStrategy": "MINIMAL"}
    assert nodegroup(built, CREATED_WITH_SPARE)["UpdateConfig"] == {
        "MaxUnavailable": 1,
        "UpdateStrategy": "DEFAULT",
    }


# --------------------------------------------------------------------------- launch template


def test_imdsv2_is_required_with_hop_limit_one(built: Built) -> None:
    assert launch_data(built, CREATED)["MetadataOptions"] == {
        "HttpEndpoint": "enabled",
        "HttpTokens": "required",
        "HttpPutResponseHopLimit": 1,
    }


def test_al2023_root_volume_is_encrypted_gp3_of_disk_gib(built: Built) -> None:
    assert launch_data(built, CREATED)["BlockDeviceMappings"] == [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {
                "VolumeSize": 1000,
                "VolumeType": "gp3",
                "Iops": 3000,
                "Throughput": 500,
                "Encrypted": True,
                "DeleteOnTermination": True,
            },
        }
    ]


def test_bottlerocket_data_volume_has_disk_gib(built: Built) -> None:
    mappings = {m["DeviceName"]: m["Ebs"] for m in launch_data(built, CAPACITY_BLOCK)["BlockDeviceMappings"]}
    assert mappings["/dev/xvdb"]["VolumeSize"] == CAPACITY_BLOCK.disk_gib
    assert mappings["/dev/xvda"]["VolumeSize"] == 4
    assert all(ebs["Encrypted"] for ebs in mappings.values())


def test_instances_and_volumes_are_tagged_with_pool_and_class(built: Built) -> None:
    tags = [{"Key": POOL_LABEL, "Value": "a100"}, {"Key": CAPACITY_CLASS_LABEL, "Value": "a100"}]
    assert launch_data(built, ONE_ODCR)["TagSpecifications"] == [
        {"ResourceType": "instance", "Tags": tags},
        {"ResourceType": "volume", "Tags": tags},
    ]


def test_launch_template_has_nothing_managed_node_groups_prohibit(built: Built) -> None:
    for config in (CREATED, ONE_ODCR, CAPACITY_BLOCK):
        data = launch_data(built, config)
        for key in (
            "IamInstanceProfile",
            "InstanceInitiatedShutdownBehavior",
            "SubnetId",
            "ImageId",
            "UserData",
        ):
            assert key not in data, (config.name, key)
        for interface in data.get("NetworkInterfaces", []):
            assert "SubnetId" not in interface, config.name


def test_without_efa_the_template_names_no_security_group(built: Built) -> None:
    # EKS then attaches the cluster security group itself.
    data = launch_data(built, ONE_ODCR)
    assert "NetworkInterfaces" not in data
    assert "SecurityGroupIds" not in data
    assert built.groups[ONE_ODCR.name].efa_security_group is None


# --------------------------------------------------------------------------- node role


def test_node_role_has_the_two_node_policies(built: Built) -> None:
    role = props(built, built.groups[CREATED.name].node_role)
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}}
    ]
    assert role["ManagedPolicyArns"] == [
        partition_arn(":iam::aws:policy/AmazonEKSWorkerNodePolicy"),
        partition_arn(":iam::aws:policy/AmazonEC2ContainerRegistryPullOnly"),
    ]
    assert "Policies" not in role


def test_group_uses_its_node_role(built: Built) -> None:
    group = built.groups[CREATED.name]
    assert nodegroup(built, CREATED)["NodeRole"] == get_att(group.node_role, "Arn")


def test_a_given_node_role_is_used_and_none_created() -> None:
    stack = new_stack("GivenRole")
    vpc = new_vpc(stack)
    role = iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::123456789012:role/gpu-nodes")
    group = ReservedGpuNodeGroup(
        stack, "Group", cluster=imported_cluster(stack), vpc=vpc, config=ONE_ODCR, node_role=role
    )
    template = Template.from_stack(stack)
    node_roles = resources(
        template,
        "AWS::IAM::Role",
        {"AssumeRolePolicyDocument": {"Statement": [{"Principal": {"Service": "ec2.amazonaws.com"}}]}},
    )
    assert node_roles == {}
    found = resources(template, "AWS::EKS::Nodegroup")
    assert (
        found[logical_id(group.nodegroup)]["Properties"]["NodeRole"]
        == "arn:aws:iam::123456789012:role/gpu-nodes"
    )


# --------------------------------------------------------------------------- EFA


def test_efa_interfaces_follow_the_instance_type_layout(built: Built) -> None:
    interfaces = launch_data(built, CREATED)["NetworkInterfaces"]
    layout = efa_interfaces("p5.48xlarge")
    assert layout is not None
    assert [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in interfaces] == [
        (i.network_card_index, i.device_index, i.interface_type) for i in layout
    ]
    assert sum(i["InterfaceType"] == "efa-only" for i in interfaces) == 32


def test_efa_interfaces_carry_the_efa_and_cluster_security_groups(built: Built) -> None:
    security_group = built.groups[CREATED.name].efa_security_group
    assert security_group is not None
    for interface in launch_data(built, CREATED)["NetworkInterfaces"]:
        assert interface["Groups"] == [get_att(security_group, "GroupId"), CLUSTER_SG]
        assert interface["DeleteOnTermination"] is True


def test_efa_template_names_security_groups_only_on_interfaces(built: Built) -> None:
    # EKS rejects launch templates with both instance-level and interface security groups.
    data = launch_data(built, CREATED)
    assert "SecurityGroupIds" not in data
    assert "SecurityGroups" not in data
    assert "RemoteAccess" not in nodegroup(built, CREATED)


def test_efa_security_group_allows_all_traffic_within_itself_only(built: Built) -> None:
    security_group = built.groups[CREATED.name].efa_security_group
    assert security_group is not None
    group_id = get_att(security_group, "GroupId")
    assert "SecurityGroupEgress" not in props(built, security_group)
    assert "SecurityGroupIngress" not in props(built, security_group)
    ingress = resources(built.template, "AWS::EC2::SecurityGroupIngress", {"GroupId": group_id})
    egress = resources(built.template, "AWS::EC2::SecurityGroupEgress", {"GroupId": group_id})
    assert [r["Properties"]["SourceSecurityGroupId"] for r in ingress.values()] == [group_id]
    assert [r["Properties"]["DestinationSecurityGroupId"] for r in egress.values()] == [group_id]
    assert all(r["Properties"]["IpProtocol"] == "-1" for r in (*ingress.values(), *egress.values()))


def test_efa_on_an_unlisted_instance_type_makes_the_primary_interface_an_efa() -> None:
    interfaces = node_group_efa_interfaces("g6e.48xlarge")
    assert [(i.network_card_index, i.device_index, i.interface_type) for i in interfaces] == [(0, 0, "efa")]


def test_efa_uses_the_security_group_of_a_cluster_that_exposes_it() -> None:
    stack = new_stack("ClusterSg")
    provider = eks.KubectlProvider.from_kubectl_provider_attributes(
        stack, "Provider", service_token=KUBECTL_SERVICE_TOKEN
    )
    cluster = eks.Cluster.from_cluster_attributes(
        stack,
        "Cluster",
        cluster_name=CLUSTER_NAME,
        kubectl_provider=provider,
        cluster_security_group_id="sg-0fedcba9876543210",
    )
    group = ReservedGpuNodeGroup(stack, "Group", cluster=cluster, vpc=new_vpc(stack), config=CREATED)
    found = resources(Template.from_stack(stack), "AWS::EC2::LaunchTemplate")
    interfaces = found[logical_id(group.launch_template)]["Properties"]["LaunchTemplateData"][
        "NetworkInterfaces"
    ]
    assert {i["Groups"][1] for i in interfaces} == {"sg-0fedcba9876543210"}


def test_efa_nodes_run_the_efa_device_plugin() -> None:
    labels = node_group_labels(CREATED)
    selector = efa_device_plugin_values(REGION)["supportedInstanceLabels"]
    assert any(labels.get(key) in selector["values"] for key in selector["keys"])
    assert EFA_LABEL not in node_group_labels(ONE_ODCR)


# --------------------------------------------------------------------------- EFA device plugin


def test_efa_device_plugin_chart_is_pinned(built: Built) -> None:
    chart = props(built, built.plugin.chart)
    assert chart["Repository"] == "https://aws.github.io/eks-charts"
    assert chart["Chart"] == "aws-efa-k8s-device-plugin"
    assert chart["Version"] == EFA_DEVICE_PLUGIN_CHART_VERSION == "v0.5.29"
    assert chart["Namespace"] == "kube-system"
    assert json.loads(chart["Values"]) == efa_device_plugin_values(REGION)


@pytest.mark.parametrize(
    ("region", "repository"),
    [
        ("us-east-1", "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin"),
        ("af-south-1", "877085696533.dkr.ecr.af-south-1.amazonaws.com/eks/aws-efa-k8s-device-plugin"),
    ],
)
def test_efa_device_plugin_image_is_pulled_in_the_stacks_region(region: str, repository: str) -> None:
    app = cdk.App(context=cdk_context())
    stack = cdk.Stack(app, "Efa", env=cdk.Environment(region=region))
    plugin = EfaDevicePlugin(stack, "EfaDevicePlugin", cluster=imported_cluster(stack))
    chart = Template.from_stack(stack).to_json()["Resources"][logical_id(plugin.chart)]["Properties"]
    assert json.loads(chart["Values"])["image"] == {"repository": repository, "tag": "v0.5.20"}


def test_efa_device_plugin_needs_a_stack_region() -> None:
    stack = cdk.Stack(cdk.App(context=cdk_context()), "Agnostic")
    with pytest.raises(ValueError) as caught:
        EfaDevicePlugin(stack, "EfaDevicePlugin", cluster=imported_cluster(stack))
    assert str(caught.value) == (
        "EfaDevicePlugin needs a stack with an explicit region (its image is pulled from that "
        "region's Amazon EKS registry), got an environment-agnostic stack"
    )


# --------------------------------------------------------------------------- invalid input


def _bad(**changes: Any) -> NodeGroupConfig:
    return CREATED.model_copy(update=changes)


def _capacity(**fields: Any) -> ReservedCapacityConfig:
    return ReservedCapacityConfig(**fields)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            _bad(availability_zone="us-east-1c"),
            "node group 'h100-base': 'availability_zone' must be the AZ of one of the VPC's private "
            "subnets (us-east-1a, us-east-1b), got 'us-east-1c'",
        ),
        (
            _bad(capacity=_capacity(kind=ReservationKind.CAPACITY_BLOCK)),
            "node group 'h100-base': 'capacity.reservation_ids' must name exactly one Capacity Block with "
            "kind 'capacity-block', got []",
        ),
        (
            _bad(capacity=_capacity(kind=ReservationKind.CAPACITY_BLOCK, reservation_ids=ODCRS)),
            "node group 'h100-base': 'capacity.reservation_ids' must name exactly one Capacity Block with "
            f"kind 'capacity-block', got {ODCRS!r}",
        ),
        (
            _bad(capacity=_capacity(kind=ReservationKind.ODCR)),
            "node group 'h100-base': 'capacity.reservation_ids' must name at least one reservation with "
            "kind 'odcr', got none",
        ),
        (
            _bad(capacity=_capacity(reservation_ids=ODCRS[:1])),
            "node group 'h100-base': 'capacity.reservation_ids' must be empty with kind 'create' (the "
            "reservation is created here), got ['cr-0123456789abcdef0']",
        ),
        (
            _bad(capacity=_capacity(instance_count=1)),
            "node group 'h100-base': 'capacity.instance_count' must be at least 'nodes' (2): every node "
            "runs in the reservation, got 1",
        ),
        (
            _bad(capacity=_capacity(kind=ReservationKind.ODCR, reservation_ids=ODCRS[:1], instance_count=2)),
            "node group 'h100-base': 'capacity.instance_count' applies to kind 'create' only (an existing "
            "reservation has its own size), got 2 with kind 'odcr'",
        ),
        (
            _bad(instance_type="m7i.48xlarge"),
            "'instance_type' of node group 'h100-base' must be an x86_64 NVIDIA GPU instance type "
            "(families g4dn, g5, g6, g6e, g7e, gr6, p4d, p4de, p5, p5e, p5en, p6-b200, p6-b300), "
            "got 'm7i.48xlarge'",
        ),
        (
            _bad(instance_type="g5g.16xlarge"),
            "'instance_type' of node group 'h100-base' must be an x86_64 NVIDIA GPU instance type "
            "(families g4dn, g5, g6, g6e, g7e, gr6, p4d, p4de, p5, p5e, p5en, p6-b200, p6-b300), "
            "got 'g5g.16xlarge'",
        ),
    ],
    ids=[
        "zone-outside-vpc",
        "block-without-id",
        "block-with-two-ids",
        "odcr-without-ids",
        "create-with-ids",
        "count-below-nodes",
        "count-with-odcr",
        "cpu-instance",
        "arm-gpu-instance",
    ],
)
def test_invalid_node_group_is_rejected(config: NodeGroupConfig, message: str) -> None:
    stack = new_stack("Invalid")
    with pytest.raises(ValueError) as error:
        ReservedGpuNodeGroup(
            stack,
            "Group",
            cluster=imported_cluster(stack),
            vpc=new_vpc(stack),
            config=config,
            cluster_security_group_id=CLUSTER_SG,
        )
    assert str(error.value) == message


def test_efa_without_a_cluster_security_group_is_rejected() -> None:
    stack = new_stack("NoClusterSg")
    with pytest.raises(ValueError) as error:
        ReservedGpuNodeGroup(
            stack, "Group", cluster=imported_cluster(stack), vpc=new_vpc(stack), config=CREATED
        )
    assert str(error.value) == (
        "node group 'h100-base': 'cluster_security_group_id' is required with 'efa' when the cluster "
        "does not expose its security group (the launch template then names the security groups, and "
        "EKS no longer adds the cluster's)"
    )


# --------------------------------------------------------------------------- compliance


@pytest.fixture(scope="module")
def compliant_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every capacity kind, EFA and the device plugin on an existing VPC and cluster, with both
    nag packs of the enterprise tier (AwsSolutions and NIST 800-53 R5) on."""
    outdir = tmp_path_factory.mktemp("reserved-nag")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "ReservedNag", env=cdk.Environment(region=REGION))
    require_compliance_pack(stack, CompliancePack.NIST_800_53_R5)
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        availability_zones=AZS,
        private_subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    )
    cluster = imported_cluster(stack)
    for config in (CREATED, TWO_ODCRS, CAPACITY_BLOCK):
        ReservedGpuNodeGroup(
            stack, config.name, cluster=cluster, vpc=vpc, config=config, cluster_security_group_id=CLUSTER_SG
        )
    EfaDevicePlugin(stack, "EfaDevicePlugin", cluster=cluster)
    app.synth()  # raises when cdk-nag reports an unacknowledged finding
    return outdir / "ReservedNag.template.json"


def test_reserved_node_groups_pass_cdk_nag(compliant_template: Path) -> None:
    assert nag_violations(compliant_template.parent, annotations=False) == {}


def test_reserved_node_groups_have_no_cfn_lint_errors(compliant_template: Path) -> None:
    assert cfn_lint_errors(compliant_template) == []
