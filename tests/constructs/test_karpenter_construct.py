"""Karpenter, KarpenterGpuNodePool and NvidiaDevicePlugin on an existing cluster."""

from __future__ import annotations

import json
import tarfile
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk
import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer
from constructs import IConstruct

from gpufarm.config import CapacityType, NodePoolConfig
from gpufarm.config.model import KarpenterConfig, PoolPurpose
from gpufarm.constructs import enable_compliance_checks
from gpufarm.constructs.karpenter import (
    INTERRUPTION_EVENTS,
    Karpenter,
    KarpenterGpuNodePool,
    NvidiaDevicePlugin,
)
from gpufarm.k8s.karpenter import ec2_nodeclass, karpenter_gpu_nodepool, nvidia_device_plugin_values
from tests.conftest import cdk_context, cfn_lint_errors, nag_violations
from tests.constructs.helpers import (
    AZS,
    CLUSTER_NAME,
    KUBECTL_SERVICE_TOKEN,
    REGION,
    imported_cluster,
    manifest_of,
    new_stack,
    new_vpc,
    partition_arn,
    resources,
)
from tests.unit.upstream_ref import load

HELM_RESOURCE = "Custom::AWSCDK-EKS-HelmChart"
EXTRA_SECURITY_GROUP = "sg-0123456789abcdef0"
CONFIG = KarpenterConfig(replicas=3)
SERVING = NodePoolConfig(name="serving", instance_families=["g6e", "p5"], gpu_limit=32)
BATCH = NodePoolConfig(
    name="batch",
    purpose=PoolPurpose.BATCH,
    capacity_types=[CapacityType.SPOT, CapacityType.ON_DEMAND],
    gpu_limit=16,
)
OWNED = f"kubernetes.io/cluster/{CLUSTER_NAME}"


@dataclass(frozen=True)
class Built:
    stack: cdk.Stack
    vpc: ec2.Vpc
    security_group: ec2.SecurityGroup
    karpenter: Karpenter
    serving: KarpenterGpuNodePool
    batch: KarpenterGpuNodePool
    plugin: NvidiaDevicePlugin
    template: Template


@pytest.fixture(scope="module")
def built() -> Built:
    stack = new_stack("Karpenter")
    vpc = new_vpc(stack)
    cluster = imported_cluster(stack)
    security_group = ec2.SecurityGroup(stack, "NodeSecurityGroup", vpc=vpc)
    karpenter = Karpenter(
        stack,
        "Karpenter",
        cluster=cluster,
        config=CONFIG,
        subnets=vpc.private_subnets,
        security_groups=[security_group],
    )
    serving, batch = (
        KarpenterGpuNodePool(
            stack,
            construct_id,
            cluster=cluster,
            pool=pool,
            node_role=karpenter.node_role,
            discovery_value=karpenter.discovery_value,
            after=karpenter.chart,
            security_group_ids=[EXTRA_SECURITY_GROUP],
        )
        for construct_id, pool in (("ServingPool", SERVING), ("BatchPool", BATCH))
    )
    plugin = NvidiaDevicePlugin(stack, "DevicePlugin", cluster=cluster, chart_version="0.18.0")
    return Built(stack, vpc, security_group, karpenter, serving, batch, plugin, Template.from_stack(stack))


def logical_id(construct: IConstruct) -> str:
    """Logical ID of a construct's CloudFormation resource, through wrappers such as HelmChart's."""
    while not isinstance(construct, cdk.CfnElement):
        child = construct.node.default_child
        assert child is not None, f"{construct.node.path} has no default child"
        construct = child
    return cdk.Stack.of(construct).get_logical_id(construct)


def props(built: Built, construct: Any) -> dict[str, Any]:
    """The Properties of a construct's resource in the template."""
    type_ = built.template.to_json()["Resources"][logical_id(construct)]["Type"]
    properties: dict[str, Any] = resources(built.template, type_)[logical_id(construct)]["Properties"]
    return properties


def statements(built: Built) -> dict[str, dict[str, Any]]:
    """Every statement of the controller's managed policies, by Sid."""
    out: dict[str, dict[str, Any]] = {}
    for policy in built.karpenter.policies.values():
        for statement in props(built, policy)["PolicyDocument"]["Statement"]:
            out[statement["Sid"]] = statement
    return out


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def ec2_arn(resource: str, *, account: bool = True) -> dict[str, Any]:
    owner = "*" if account else ""
    return {
        "Fn::Join": [
            "",
            ["arn:", {"Ref": "AWS::Partition"}, ":ec2:", {"Ref": "AWS::Region"}, f":{owner}:{resource}"],
        ]
    }


def get_att(construct: Any, attribute: str = "Arn") -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id(construct), attribute]}


# --------------------------------------------------------------------------- node role


def test_node_role_is_assumed_by_ec2_with_the_four_node_policies(built: Built) -> None:
    role = props(built, built.karpenter.node_role)
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}}
    ]
    assert sorted(json.dumps(p) for p in role["ManagedPolicyArns"]) == sorted(
        json.dumps(partition_arn(f":iam::aws:policy/{name}"))
        for name in (
            "AmazonEKSWorkerNodePolicy",
            "AmazonEKS_CNI_Policy",
            "AmazonEC2ContainerRegistryPullOnly",
            "AmazonSSMManagedInstanceCore",
        )
    )
    assert "Policies" not in role


def test_node_role_has_an_ec2_linux_access_entry(built: Built) -> None:
    assert props(built, built.karpenter.node_access_entry) == {
        "ClusterName": CLUSTER_NAME,
        "PrincipalArn": get_att(built.karpenter.node_role),
        "Type": "EC2_LINUX",
    }


# --------------------------------------------------------------------------- controller role


def test_controller_role_is_for_pod_identity(built: Built) -> None:
    trust = props(built, built.karpenter.controller_role)["AssumeRolePolicyDocument"]["Statement"]
    assert {a for s in trust for a in as_list(s["Action"])} == {"sts:AssumeRole", "sts:TagSession"}
    assert {s["Principal"]["Service"] for s in trust} == {"pods.eks.amazonaws.com"}


def test_pod_identity_association_names_the_karpenter_service_account(built: Built) -> None:
    assert props(built, built.karpenter.pod_identity_association) == {
        "ClusterName": CLUSTER_NAME,
        "Namespace": "kube-system",
        "ServiceAccount": "karpenter",
        "RoleArn": get_att(built.karpenter.controller_role),
    }


def test_controller_policies_attach_to_the_controller_role_only(built: Built) -> None:
    assert set(built.karpenter.policies) == {
        "NodeLifecycle",
        "IAMIntegration",
        "EKSIntegration",
        "Interruption",
        "ZonalShift",
        "ResourceDiscovery",
    }
    for policy in built.karpenter.policies.values():
        assert props(built, policy)["Roles"] == [{"Ref": logical_id(built.karpenter.controller_role)}]
    # The node role carries no inline or customer-managed policy.
    attached = [
        p["Properties"].get("Roles", [])
        for p in resources(built.template, "AWS::IAM::ManagedPolicy").values()
    ]
    assert {"Ref": logical_id(built.karpenter.node_role)} not in [r for roles in attached for r in roles]


def test_instance_launch_requires_the_cluster_and_nodepool_request_tags(built: Built) -> None:
    statement = statements(built)["AllowScopedEC2InstanceActionsWithTags"]
    assert statement["Action"] == ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"]
    assert statement["Condition"] == {
        "StringEquals": {
            f"aws:RequestTag/{OWNED}": "owned",
            "aws:RequestTag/eks:eks-cluster-name": CLUSTER_NAME,
        },
        "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
    }
    assert statement["Resource"] == [
        ec2_arn(r)
        for r in (
            "fleet/*",
            "instance/*",
            "volume/*",
            "network-interface/*",
            "launch-template/*",
            "spot-instances-request/*",
        )
    ]


def test_launch_templates_are_used_only_when_karpenter_owns_them(built: Built) -> None:
    statement = statements(built)["AllowScopedEC2LaunchTemplateAccessActions"]
    assert statement["Resource"] == ec2_arn("launch-template/*")
    assert statement["Condition"] == {
        "StringEquals": {f"aws:ResourceTag/{OWNED}": "owned"},
        "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
    }


def test_unconditioned_launch_access_is_limited_to_shared_inputs(built: Built) -> None:
    statement = statements(built)["AllowScopedEC2InstanceAccessActions"]
    assert "Condition" not in statement
    assert statement["Action"] == ["ec2:RunInstances", "ec2:CreateFleet"]
    assert statement["Resource"] == [
        ec2_arn("image/*", account=False),
        ec2_arn("snapshot/*", account=False),
        ec2_arn("security-group/*"),
        ec2_arn("subnet/*"),
        ec2_arn("capacity-reservation/*"),
        ec2_arn("placement-group/*"),
    ]


def test_termination_requires_the_ownership_tags(built: Built) -> None:
    statement = statements(built)["AllowScopedDeletion"]
    assert statement["Action"] == ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"]
    assert statement["Condition"] == {
        "StringEquals": {f"aws:ResourceTag/{OWNED}": "owned"},
        "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
    }


def test_tagging_existing_instances_is_limited_to_nodeclaim_and_name(built: Built) -> None:
    condition = statements(built)["AllowScopedResourceTagging"]["Condition"]
    assert condition["ForAllValues:StringEquals"] == {
        "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
    }
    assert condition["StringEquals"] == {f"aws:ResourceTag/{OWNED}": "owned"}


def test_pass_role_names_only_the_node_role_toward_ec2(built: Built) -> None:
    passing = [s for s in statements(built).values() if "iam:PassRole" in as_list(s["Action"])]
    assert passing == [
        {
            "Sid": "AllowPassingInstanceRole",
            "Effect": "Allow",
            "Resource": get_att(built.karpenter.node_role),
            "Action": "iam:PassRole",
            "Condition": {
                "StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}
            },
        }
    ]


def test_instance_profile_creation_requires_cluster_region_and_nodeclass_tags(built: Built) -> None:
    condition = statements(built)["AllowScopedInstanceProfileCreationActions"]["Condition"]
    assert condition == {
        "StringEquals": {
            f"aws:RequestTag/{OWNED}": "owned",
            "aws:RequestTag/eks:eks-cluster-name": CLUSTER_NAME,
            "aws:RequestTag/topology.kubernetes.io/region": {"Ref": "AWS::Region"},
        },
        "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
    }


def test_sqs_actions_only_on_the_interruption_queue(built: Built) -> None:
    sqs = [s for s in statements(built).values() if any(a.startswith("sqs:") for a in as_list(s["Action"]))]
    assert len(sqs) == 1
    assert sqs[0]["Resource"] == get_att(built.karpenter.queue)
    assert sorted(sqs[0]["Action"]) == ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"]


def test_describe_cluster_only_on_this_cluster(built: Built) -> None:
    statement = statements(built)["AllowAPIServerEndpointDiscovery"]
    assert statement["Action"] == "eks:DescribeCluster"
    assert statement["Resource"] == {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":eks:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                f":cluster/{CLUSTER_NAME}",
            ],
        ]
    }


def test_reads_are_limited_to_the_stack_region(built: Built) -> None:
    statement = statements(built)["AllowRegionalReadActions"]
    assert statement["Condition"] == {"StringEquals": {"aws:RequestedRegion": {"Ref": "AWS::Region"}}}
    assert all(a.startswith("ec2:Describe") for a in statement["Action"])


def test_no_statement_has_a_wildcard_action(built: Built) -> None:
    actions = [a for s in statements(built).values() for a in as_list(s["Action"])]
    assert [a for a in actions if "*" in a] == []
    assert all(s["Effect"] == "Allow" for s in statements(built).values())


def test_unscoped_resources_are_only_reads_that_support_no_resource_arn(built: Built) -> None:
    unscoped = {a for s in statements(built).values() if s["Resource"] == "*" for a in as_list(s["Action"])}
    assert unscoped == {
        "arc-zonal-shift:GetManagedResource",
        "pricing:GetProducts",
        "iam:ListInstanceProfiles",
        *statements(built)["AllowRegionalReadActions"]["Action"],
    }


# --------------------------------------------------------------------------- interruption queue and rules


def test_queue_retains_messages_300_seconds_encrypted(built: Built) -> None:
    assert props(built, built.karpenter.queue) == {
        "MessageRetentionPeriod": 300,
        "SqsManagedSseEnabled": True,
    }


def queue_policy(built: Built) -> list[dict[str, Any]]:
    [policy] = resources(built.template, "AWS::SQS::QueuePolicy").values()
    assert policy["Properties"]["Queues"] == [{"Ref": logical_id(built.karpenter.queue)}]
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def test_queue_denies_requests_without_tls(built: Built) -> None:
    deny = [s for s in queue_policy(built) if s["Effect"] == "Deny"]
    assert deny == [
        {
            "Action": "sqs:*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Resource": get_att(built.karpenter.queue),
        }
    ]


def test_only_the_interruption_rules_may_send_to_the_queue(built: Built) -> None:
    allow = [s for s in queue_policy(built) if s["Effect"] == "Allow"]
    assert {json.dumps(s["Principal"]) for s in allow} == {json.dumps({"Service": "events.amazonaws.com"})}
    assert all("sqs:SendMessage" in s["Action"] for s in allow)
    sources = [s["Condition"]["ArnEquals"]["aws:SourceArn"] for s in allow]
    assert sorted(json.dumps(s) for s in sources) == sorted(
        json.dumps(get_att(rule)) for rule in built.karpenter.rules.values()
    )


def test_five_interruption_rules(built: Built) -> None:
    built.template.resource_count_is("AWS::Events::Rule", 5)
    assert set(built.karpenter.rules) == {
        "HealthEvent",
        "SpotInterruption",
        "Rebalance",
        "InstanceStateChange",
        "CapacityReservationInterruption",
    }


@pytest.mark.parametrize(
    ("rule_id", "source", "detail_type"),
    [
        ("HealthEvent", "aws.health", "AWS Health Event"),
        ("SpotInterruption", "aws.ec2", "EC2 Spot Instance Interruption Warning"),
        ("Rebalance", "aws.ec2", "EC2 Instance Rebalance Recommendation"),
        ("InstanceStateChange", "aws.ec2", "EC2 Instance State-change Notification"),
        (
            "CapacityReservationInterruption",
            "aws.ec2",
            "EC2 Capacity Reservation Instance Interruption Warning",
        ),
    ],
)
def test_interruption_rule_pattern_and_target(
    built: Built, rule_id: str, source: str, detail_type: str
) -> None:
    assert INTERRUPTION_EVENTS[rule_id] == (source, detail_type)
    rule = props(built, built.karpenter.rules[rule_id])
    assert rule["EventPattern"] == {"source": [source], "detail-type": [detail_type]}
    assert rule["State"] == "ENABLED"
    assert [t["Arn"] for t in rule["Targets"]] == [get_att(built.karpenter.queue)]


# --------------------------------------------------------------------------- discovery tags


def tags_of(built: Built, construct: Any) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in props(built, construct).get("Tags", [])}


def test_discovery_value_defaults_to_the_cluster_name(built: Built) -> None:
    assert built.karpenter.discovery_value == CLUSTER_NAME


def test_given_subnets_and_security_groups_carry_the_discovery_tag(built: Built) -> None:
    for subnet in built.vpc.private_subnets:
        assert tags_of(built, subnet)["karpenter.sh/discovery"] == CLUSTER_NAME
    assert tags_of(built, built.security_group)["karpenter.sh/discovery"] == CLUSTER_NAME


def test_other_subnets_are_not_tagged(built: Built) -> None:
    for subnet in built.vpc.public_subnets:
        assert "karpenter.sh/discovery" not in tags_of(built, subnet)


def test_discovery_value_can_be_given() -> None:
    stack = new_stack("Discovery")
    vpc = new_vpc(stack)
    karpenter = Karpenter(
        stack,
        "Karpenter",
        cluster=imported_cluster(stack),
        config=CONFIG,
        subnets=vpc.private_subnets,
        security_groups=[],
        discovery_value="gpu-nodes",
    )
    template = Template.from_stack(stack)
    subnet = vpc.private_subnets[0].node.default_child
    assert isinstance(subnet, cdk.CfnResource)
    tags = resources(template, "AWS::EC2::Subnet")[stack.get_logical_id(subnet)]["Properties"]["Tags"]
    assert {"Key": "karpenter.sh/discovery", "Value": "gpu-nodes"} in tags
    assert karpenter.discovery_value == "gpu-nodes"


# --------------------------------------------------------------------------- Helm charts


def test_chart_is_karpenter_from_its_oci_repository_pinned(built: Built) -> None:
    chart = props(built, built.karpenter.chart)
    assert chart["Repository"] == "oci://public.ecr.aws/karpenter/karpenter"
    assert chart["Chart"] == "karpenter"
    assert chart["Version"] == CONFIG.chart_version == "1.14.0"
    assert chart["Release"] == "karpenter"
    assert chart["Namespace"] == CONFIG.namespace
    assert chart["Wait"] is True
    assert chart["Timeout"] == "600s"
    assert chart["ServiceToken"] == KUBECTL_SERVICE_TOKEN


def test_crds_come_from_their_own_chart_at_the_same_version(built: Built) -> None:
    crds = props(built, built.karpenter.crd_chart)
    assert crds["Repository"] == "oci://public.ecr.aws/karpenter/karpenter-crd"
    assert crds["Version"] == CONFIG.chart_version
    assert crds["Namespace"] == CONFIG.namespace


def _kubectl_handler_helm_source() -> str:
    """aws-cdk-lib's kubectl handler (aws-eks-v2) as this installation ships it."""
    bundle = next((Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz"))
    with tarfile.open(bundle) as tar:
        member = tar.extractfile(
            "package/custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/helm/__init__.py"
        )
        assert member is not None
        return member.read().decode()


def test_skip_crds_is_not_relied_on_because_the_kubectl_handler_drops_it(built: Built) -> None:
    source = _kubectl_handler_helm_source()
    handler = source[source.index("def helm_handler") : source.index("def get_oci_cmd")]
    # The handler reads SkipCrds, but its `helm upgrade` call never passes it on.
    assert "skip_crds        = props.get('SkipCrds', False)" in handler
    [upgrade] = [line for line in handler.splitlines() if "helm('upgrade'" in line]
    assert "skip_crds" not in upgrade
    assert "SkipCrds" not in props(built, built.karpenter.chart)


def chart_values(built: Built) -> dict[str, Any]:
    """The controller chart's values, with the queue-name token as a placeholder."""
    joined = props(built, built.karpenter.chart)["Values"]["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else json.dumps(p).replace('"', "'") for p in joined)
    values: dict[str, Any] = json.loads(text)
    return values


def test_chart_values_name_the_cluster_and_the_interruption_queue(built: Built) -> None:
    settings = chart_values(built)["settings"]
    assert settings["clusterName"] == CLUSTER_NAME
    queue_name = json.dumps(get_att(built.karpenter.queue, "QueueName")).replace('"', "'")
    assert settings["interruptionQueue"] == queue_name


def test_chart_values_turn_node_repair_on(built: Built) -> None:
    assert chart_values(built)["settings"]["featureGates"] == {"nodeRepair": True}


def test_node_repair_can_be_turned_off() -> None:
    stack = new_stack("KarpenterNoRepair")
    vpc = new_vpc(stack)
    karpenter = Karpenter(
        stack,
        "Karpenter",
        cluster=imported_cluster(stack),
        config=KarpenterConfig(node_repair=False),
        subnets=vpc.private_subnets,
        security_groups=[],
    )
    assert "featureGates" not in karpenter.values["settings"]


def test_node_repair_needs_no_statement_beyond_the_upstream_policies(built: Built) -> None:
    # Repair deletes the NodeClaim and the instance is terminated by the upstream template's
    # AllowScopedDeletion, the only statement granting ec2:TerminateInstances; gpufarm's copy
    # carries the same actions and condition.
    upstream = load("iam.json")["karpenter@1.14"]["policies"]["NodeLifecyclePolicy"]
    (reference,) = [s for s in upstream if "ec2:TerminateInstances" in as_list(s["Action"])]
    terminating = [s for s in statements(built).values() if "ec2:TerminateInstances" in as_list(s["Action"])]
    assert [s["Sid"] for s in terminating] == [reference["Sid"]]
    cluster_tag = f"aws:ResourceTag/kubernetes.io/cluster/{CLUSTER_NAME}"
    expected = json.loads(json.dumps(reference["Condition"]).replace("{CLUSTER}", CLUSTER_NAME))
    assert terminating[0]["Action"] == reference["Action"]
    assert terminating[0]["Condition"] == expected
    assert expected["StringEquals"] == {cluster_tag: "owned"}


def test_chart_values_carry_replicas_and_the_service_account(built: Built) -> None:
    values = chart_values(built)
    assert values["replicas"] == 3
    assert (
        values["serviceAccount"]["name"]
        == props(built, built.karpenter.pod_identity_association)["ServiceAccount"]
    )


def test_chart_is_applied_after_its_identity_permissions_crds_and_node_access(built: Built) -> None:
    depends = set(resources(built.template, HELM_RESOURCE)[logical_id(built.karpenter.chart)]["DependsOn"])
    expected = {
        logical_id(built.karpenter.crd_chart),
        logical_id(built.karpenter.pod_identity_association),
        logical_id(built.karpenter.node_access_entry),
        *(logical_id(p) for p in built.karpenter.policies.values()),
    }
    assert expected <= depends


# --------------------------------------------------------------------------- GPU node pools


def test_each_pool_is_one_manifest_with_nodeclass_then_nodepool(built: Built) -> None:
    for pool, config in ((built.serving, SERVING), (built.batch, BATCH)):
        docs = manifest_of(built.template, pool.resource)
        assert [d["kind"] for d in docs] == ["EC2NodeClass", "NodePool"]
        assert docs[1] == karpenter_gpu_nodepool(config)
        assert pool.node_pool_name == f"gpu-{config.name}"
        resource = resources(built.template, "Custom::AWSCDK-EKS-KubernetesResource")[
            logical_id(pool.resource)
        ]
        assert resource["Properties"]["Overwrite"] is True


def test_nodeclass_uses_the_node_role_and_discovery_tag(built: Built) -> None:
    [node_class, _] = manifest_of(built.template, built.serving.resource)
    expected = ec2_nodeclass(
        SERVING,
        node_role_name="@@role@@",
        discovery_value=CLUSTER_NAME,
        security_group_ids=[EXTRA_SECURITY_GROUP],
    )
    expected["spec"]["role"] = {"Ref": logical_id(built.karpenter.node_role)}
    assert node_class == expected


def test_nodepools_carry_weight_capacity_and_taint(built: Built) -> None:
    by_name = {
        p.node_pool_name: manifest_of(built.template, p.resource)[1] for p in (built.serving, built.batch)
    }
    serving, batch = by_name["gpu-serving"]["spec"], by_name["gpu-batch"]["spec"]
    assert (serving["weight"], batch["weight"]) == (50, 10)
    capacity = {
        name: next(
            r
            for r in doc["spec"]["template"]["spec"]["requirements"]
            if r["key"] == "karpenter.sh/capacity-type"
        )
        for name, doc in by_name.items()
    }
    assert capacity["gpu-serving"]["values"] == ["on-demand"]
    assert capacity["gpu-batch"]["values"] == ["spot", "on-demand"]
    for spec in (serving, batch):
        assert spec["template"]["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]


def test_pools_are_applied_after_the_karpenter_chart(built: Built) -> None:
    manifests = resources(built.template, "Custom::AWSCDK-EKS-KubernetesResource")
    for pool in (built.serving, built.batch):
        assert logical_id(built.karpenter.chart) in manifests[logical_id(pool.resource)]["DependsOn"]


def test_add_gpu_node_pool_builds_the_pool_the_constructor_builds() -> None:
    stack = new_stack("AddedPool")
    cluster = imported_cluster(stack)
    karpenter = Karpenter(stack, "Karpenter", cluster=cluster, config=CONFIG, subnets=[], security_groups=[])
    added = karpenter.add_gpu_node_pool("Serving", pool=SERVING, security_group_ids=[EXTRA_SECURITY_GROUP])
    beside = karpenter.add_gpu_node_pool("ServingBeside", scope=stack, pool=BATCH)
    explicit = KarpenterGpuNodePool(
        stack,
        "Explicit",
        cluster=cluster,
        pool=SERVING,
        node_role=karpenter.node_role,
        discovery_value=karpenter.discovery_value,
        after=karpenter.chart,
        security_group_ids=[EXTRA_SECURITY_GROUP],
    )
    assert added.node.scope is karpenter
    assert beside.node.path == "AddedPool/ServingBeside"
    assert stack.resolve(added.manifest) == stack.resolve(explicit.manifest)
    assert beside.pool is BATCH
    manifests = resources(Template.from_stack(stack), "Custom::AWSCDK-EKS-KubernetesResource")
    for pool in (added, beside):
        assert manifests[logical_id(pool.resource)]["DependsOn"] == [logical_id(karpenter.chart)]


# --------------------------------------------------------------------------- NVIDIA device plugin


def test_device_plugin_chart_is_pinned(built: Built) -> None:
    chart = props(built, built.plugin.chart)
    assert chart["Repository"] == "https://nvidia.github.io/k8s-device-plugin"
    assert chart["Chart"] == "nvidia-device-plugin"
    assert chart["Version"] == "0.18.0"
    assert chart["Namespace"] == "kube-system"
    assert json.loads(chart["Values"]) == nvidia_device_plugin_values()


# --------------------------------------------------------------------------- invalid input


def test_a_cluster_without_a_known_name_is_rejected() -> None:
    stack = new_stack("Unnamed")
    vpc = new_vpc(stack)
    cluster = eks.Cluster(stack, "Cluster", version=eks.KubernetesVersion.V1_35, vpc=vpc)
    with pytest.raises(ValueError) as error:
        Karpenter(
            stack,
            "Karpenter",
            cluster=typing.cast(eks.ICluster, cluster),
            config=CONFIG,
            subnets=[],
            security_groups=[],
        )
    assert str(error.value) == (
        "'cluster' must have a name known at synth time: Karpenter's IAM conditions carry it in "
        "condition keys (aws:RequestTag/kubernetes.io/cluster/<name>), which CloudFormation cannot "
        "compute; give the cluster an explicit cluster_name, got 'Unnamed/Cluster' without one"
    )


def test_a_named_cluster_created_in_the_stack_is_accepted() -> None:
    stack = new_stack("Named")
    vpc = new_vpc(stack)
    cluster = eks.Cluster(
        stack,
        "Cluster",
        cluster_name="gpu",
        version=eks.KubernetesVersion.V1_35,
        vpc=vpc,
        kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV35Layer(stack, "Kubectl")),
    )
    karpenter = Karpenter(
        stack,
        "Karpenter",
        cluster=typing.cast(eks.ICluster, cluster),
        config=CONFIG,
        subnets=[],
        security_groups=[],
    )
    assert karpenter.discovery_value == "gpu"


@pytest.mark.parametrize("value", ["", "x" * 257])
def test_karpenter_rejects_an_invalid_discovery_value(value: str) -> None:
    stack = new_stack("BadDiscovery")
    with pytest.raises(ValueError) as error:
        Karpenter(
            stack,
            "Karpenter",
            cluster=imported_cluster(stack),
            config=CONFIG,
            subnets=[],
            security_groups=[],
            discovery_value=value,
        )
    assert str(error.value) == f"'discovery_value' must be a tag value of 1 to 256 characters, got {value!r}"


def test_pool_rejects_an_empty_discovery_value(built: Built) -> None:
    stack = new_stack("BadPool")
    with pytest.raises(ValueError) as error:
        KarpenterGpuNodePool(
            stack,
            "Pool",
            cluster=imported_cluster(stack),
            pool=SERVING,
            node_role=built.karpenter.node_role,
            discovery_value="",
        )
    assert str(error.value) == "'discovery_value' must be a tag value of 1 to 256 characters, got ''"


# --------------------------------------------------------------------------- compliance


@pytest.fixture(scope="module")
def compliant_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Karpenter, a pool and the device plugin on an existing VPC and cluster, with cdk-nag on."""
    outdir = tmp_path_factory.mktemp("karpenter-nag")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "KarpenterNag", env=cdk.Environment(region=REGION))
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        availability_zones=AZS,
        private_subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    )
    cluster = imported_cluster(stack)
    nodes = ec2.SecurityGroup(stack, "Nodes", vpc=vpc, description="Karpenter GPU nodes")
    karpenter = Karpenter(
        stack,
        "Karpenter",
        cluster=cluster,
        config=CONFIG,
        subnets=vpc.private_subnets,
        security_groups=[nodes],
    )
    KarpenterGpuNodePool(
        stack,
        "Pool",
        cluster=cluster,
        pool=SERVING,
        node_role=karpenter.node_role,
        discovery_value=karpenter.discovery_value,
        after=karpenter.chart,
    )
    NvidiaDevicePlugin(
        stack, "DevicePlugin", cluster=cluster, chart_version=CONFIG.nvidia_device_plugin_chart_version
    )
    app.synth()  # raises when cdk-nag reports an unacknowledged finding
    return outdir / "KarpenterNag.template.json"


def test_karpenter_passes_cdk_nag(compliant_template: Path) -> None:
    # The fixture's synth raises on an unacknowledged finding; the report must be empty too.
    assert nag_violations(compliant_template.parent, annotations=False) == {}


def test_karpenter_template_has_no_cfn_lint_errors(compliant_template: Path) -> None:
    assert cfn_lint_errors(compliant_template) == []
