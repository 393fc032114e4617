"""Karpenter manifests and Helm values: EC2NodeClass, NodePool, controller and device plugin."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gpufarm.config import CapacityType, NodePoolConfig, TierConfig, load_preset
from gpufarm.config.loader import preset_names
from gpufarm.config.model import AmiFamily, ImagePull, PoolPurpose
from gpufarm.constructs.reserved_capacity import EFA_DEVICE_PLUGIN_CHART, EFA_DEVICE_PLUGIN_CHART_VERSION
from gpufarm.core.instances import EFA_NETWORK_CARDS
from gpufarm.k8s.karpenter import (
    AMI_FAMILY_LABEL,
    EFA_DEVICE_PLUGIN_IMAGE,
    GPU_MANUFACTURER_LABEL,
    NODE_REPAIR_GATE,
    NODEGROUP_LABEL,
    PURPOSE_LABEL,
    SERVICE_ACCOUNT,
    ami_alias,
    ec2_nodeclass,
    efa_device_plugin_values,
    efa_interfaces,
    karpenter_gpu_nodepool,
    karpenter_values,
    nvidia_device_plugin_values,
)
from gpufarm.k8s.labels import CAPACITY_CLASS_LABEL, EFA_LABEL, POOL_LABEL
from gpufarm.k8s.nodepool import auto_mode_gpu_nodepool
from tests.helm import chart_available, chart_defaults, helm_merge

from .k8s_schema import crd_errors, nodepool_errors
from .upstream_ref import chart_data, helm_value_issues

EFA_CHART = f"{EFA_DEVICE_PLUGIN_CHART}@{EFA_DEVICE_PLUGIN_CHART_VERSION}"

NODECLASS_CRD = "karpenter.k8s.aws_ec2nodeclasses.yaml"
ROLE = "gpufarm-karpenter-node"
DISCOVERY = "gpufarm-production"

DEFAULT_POOL = NodePoolConfig(name="l40s")
BATCH_POOL = NodePoolConfig(
    name="batch",
    purpose=PoolPurpose.BATCH,
    instance_families=["g6e", "g6"],
    instance_types=["g6e.12xlarge"],
    capacity_types=[CapacityType.SPOT, CapacityType.ON_DEMAND],
    gpu_limit=16,
    consolidate_after="15m",
    expire_after="720h",
    disruption_budget_nodes="20%",
    root_volume_gib=200,
)
BOTTLEROCKET_POOL = NodePoolConfig(name="br", ami_family=AmiFamily.BOTTLEROCKET, ami_version="1.50.0")


@pytest.fixture(scope="module")
def production() -> TierConfig:
    return load_preset("production")


def nodeclass(pool: NodePoolConfig = DEFAULT_POOL, **kwargs: Any) -> dict[str, Any]:
    return ec2_nodeclass(pool, node_role_name=ROLE, discovery_value=DISCOVERY, **kwargs)


def requirement(nodepool: dict[str, Any], key: str) -> dict[str, Any] | None:
    found = [r for r in nodepool["spec"]["template"]["spec"]["requirements"] if r["key"] == key]
    assert len(found) <= 1, f"requirement {key} appears {len(found)} times"
    return found[0] if found else None


def _term_matches(term: dict[str, Any], labels: dict[str, str]) -> bool:
    for expr in term["matchExpressions"]:
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def schedulable_on(values: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a pod with the chart's required node affinity may land on a node with `labels`."""
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    return any(_term_matches(t, labels) for t in terms)


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, str]) -> bool:
    """Whether a toleration list tolerates one taint (Kubernetes' matching rules)."""
    for t in tolerations:
        key_ok = t.get("key") == taint["key"] or ("key" not in t and t.get("operator") == "Exists")
        effect_ok = t.get("effect") in (None, taint["effect"])
        value_ok = t.get("operator") == "Exists" or t.get("value") == taint.get("value")
        if key_ok and effect_ok and value_ok:
            return True
    return False


def karpenter_node_labels(pool: NodePoolConfig) -> dict[str, str]:
    """Labels of a GPU node Karpenter launched for `pool` (template labels + Karpenter's own)."""
    template = karpenter_gpu_nodepool(pool)["spec"]["template"]
    return {
        **template["metadata"]["labels"],
        "karpenter.sh/nodepool": karpenter_gpu_nodepool(pool)["metadata"]["name"],
        GPU_MANUFACTURER_LABEL: "nvidia",
        "kubernetes.io/os": "linux",
    }


SYSTEM_NODE_LABELS = {NODEGROUP_LABEL: "system", "kubernetes.io/os": "linux"}

# --------------------------------------------------------------------------- EC2NodeClass


def test_nodeclass_identity() -> None:
    doc = nodeclass()
    assert doc["apiVersion"] == "karpenter.k8s.aws/v1"
    assert doc["kind"] == "EC2NodeClass"
    assert doc["metadata"]["name"] == "gpu-l40s"
    assert "namespace" not in doc["metadata"], "EC2NodeClasses are cluster-scoped"


@pytest.mark.parametrize(
    "pool", [DEFAULT_POOL, BATCH_POOL, BOTTLEROCKET_POOL], ids=["al2023", "batch", "bottlerocket"]
)
def test_nodeclass_matches_its_crd(pool: NodePoolConfig) -> None:
    assert crd_errors(nodeclass(pool, security_group_ids=["sg-0123456789abcdef0"]), NODECLASS_CRD, "v1") == []


def test_production_nodeclasses_match_their_crd(production: TierConfig) -> None:
    for pool in production.node_pools:
        assert crd_errors(nodeclass(pool), NODECLASS_CRD, "v1") == [], pool.name


@pytest.mark.parametrize(
    ("pool", "alias"),
    [
        (DEFAULT_POOL, "al2023@latest"),
        (NodePoolConfig(name="p", ami_version="v20251120"), "al2023@v20251120"),
        (BOTTLEROCKET_POOL, "bottlerocket@v1.50.0"),
        (NodePoolConfig(name="p", ami_family=AmiFamily.BOTTLEROCKET), "bottlerocket@latest"),
    ],
)
def test_nodeclass_selects_the_pool_ami_by_alias(pool: NodePoolConfig, alias: str) -> None:
    assert ami_alias(pool) == alias
    assert nodeclass(pool)["spec"]["amiSelectorTerms"] == [{"alias": alias}]


def test_alias_satisfies_the_crd_rules() -> None:
    # CEL rules the JSON schema check cannot evaluate: 'family@version', at most 30 characters.
    for pool in (DEFAULT_POOL, BOTTLEROCKET_POOL, NodePoolConfig(name="p", ami_version="v20251120")):
        alias = ami_alias(pool)
        assert re.fullmatch(r"[a-zA-Z0-9]+@.+", alias)
        assert len(alias) <= 30


def test_nodeclass_uses_the_node_role() -> None:
    spec = nodeclass()["spec"]
    assert spec["role"] == ROLE
    assert "instanceProfile" not in spec, "role and instanceProfile are mutually exclusive"


def test_nodeclass_discovers_subnets_and_security_groups_by_tag() -> None:
    spec = nodeclass()["spec"]
    assert spec["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": DISCOVERY}}]
    assert spec["securityGroupSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": DISCOVERY}}]


def test_nodeclass_adds_security_groups_by_id() -> None:
    terms = nodeclass(security_group_ids=["sg-1", "sg-2"])["spec"]["securityGroupSelectorTerms"]
    assert terms == [{"tags": {"karpenter.sh/discovery": DISCOVERY}}, {"id": "sg-1"}, {"id": "sg-2"}]


def test_al2023_root_volume_is_the_encrypted_kubelet_volume() -> None:
    assert nodeclass(BATCH_POOL)["spec"]["blockDeviceMappings"] == [
        {
            "deviceName": "/dev/xvda",
            "rootVolume": True,
            "ebs": {
                "volumeSize": "200Gi",
                "volumeType": "gp3",
                "iops": 3000,
                "throughput": 500,
                "encrypted": True,
                "deleteOnTermination": True,
            },
        }
    ]


def test_bottlerocket_sizes_its_data_volume_and_keeps_a_small_os_volume() -> None:
    mappings = {m["deviceName"]: m for m in nodeclass(BOTTLEROCKET_POOL)["spec"]["blockDeviceMappings"]}
    assert set(mappings) == {"/dev/xvda", "/dev/xvdb"}
    assert mappings["/dev/xvda"]["ebs"]["volumeSize"] == "4Gi"
    assert "rootVolume" not in mappings["/dev/xvda"]
    assert mappings["/dev/xvdb"]["rootVolume"] is True
    assert mappings["/dev/xvdb"]["ebs"]["volumeSize"] == f"{BOTTLEROCKET_POOL.root_volume_gib}Gi"
    assert all(m["ebs"]["encrypted"] for m in mappings.values())


@pytest.mark.parametrize("pool", [DEFAULT_POOL, BOTTLEROCKET_POOL], ids=["al2023", "bottlerocket"])
def test_gp3_throughput_fits_the_provisioned_iops(pool: NodePoolConfig) -> None:
    # gp3 allows at most 0.25 MiB/s per provisioned IOPS (and 125-2000 MiB/s, 3000-80000 IOPS).
    for mapping in nodeclass(pool)["spec"]["blockDeviceMappings"]:
        ebs = mapping["ebs"]
        assert 3000 <= ebs["iops"] <= 80000
        assert 125 <= ebs["throughput"] <= min(2000, ebs["iops"] // 4)


def test_nodeclass_requires_imdsv2_with_hop_limit_one() -> None:
    assert nodeclass()["spec"]["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpProtocolIPv6": "disabled",
        "httpPutResponseHopLimit": 1,
        "httpTokens": "required",
    }


def test_nodeclass_tags_instances_with_pool_and_purpose() -> None:
    tags = nodeclass(BATCH_POOL)["spec"]["tags"]
    assert tags == {POOL_LABEL: "batch", PURPOSE_LABEL: "batch"}
    # Karpenter rejects its own and the cluster's tag keys (CEL rules).
    assert not any(k.startswith(("karpenter.", "kubernetes.io/cluster", "eks:")) for k in tags)


# --------------------------------------------------------------------------- NodePool


def test_nodepool_identity() -> None:
    doc = karpenter_gpu_nodepool(DEFAULT_POOL)
    assert doc["apiVersion"] == "karpenter.sh/v1"
    assert doc["kind"] == "NodePool"
    assert doc["metadata"]["name"] == "gpu-l40s"
    assert "namespace" not in doc["metadata"]


@pytest.mark.parametrize(
    "pool",
    [DEFAULT_POOL, BATCH_POOL, BOTTLEROCKET_POOL],
    ids=["default", "batch", "bottlerocket"],
)
def test_nodepool_matches_its_crd(pool: NodePoolConfig) -> None:
    assert nodepool_errors(karpenter_gpu_nodepool(pool)) == []


def test_production_nodepools_match_their_crd(production: TierConfig) -> None:
    for pool in production.node_pools:
        assert nodepool_errors(karpenter_gpu_nodepool(pool)) == [], pool.name


def test_nodepool_uses_the_ec2nodeclass_of_the_same_name() -> None:
    doc = karpenter_gpu_nodepool(DEFAULT_POOL)
    assert doc["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": nodeclass()["metadata"]["name"],
    }


def test_nodepool_requirements_use_karpenter_labels() -> None:
    doc = karpenter_gpu_nodepool(BATCH_POOL)
    assert requirement(doc, "karpenter.k8s.aws/instance-family") == {
        "key": "karpenter.k8s.aws/instance-family",
        "operator": "In",
        "values": ["g6e", "g6"],
    }
    assert requirement(doc, "karpenter.sh/capacity-type")["values"] == ["spot", "on-demand"]  # type: ignore[index]
    assert requirement(doc, "karpenter.k8s.aws/instance-gpu-manufacturer")["values"] == ["nvidia"]  # type: ignore[index]
    assert requirement(doc, "kubernetes.io/arch")["values"] == ["amd64"]  # type: ignore[index]
    assert requirement(doc, "node.kubernetes.io/instance-type")["values"] == ["g6e.12xlarge"]  # type: ignore[index]
    assert not any(
        r["key"].startswith("eks.amazonaws.com/") for r in doc["spec"]["template"]["spec"]["requirements"]
    )


def test_nodepool_has_no_instance_type_requirement_unless_configured() -> None:
    assert requirement(karpenter_gpu_nodepool(DEFAULT_POOL), "node.kubernetes.io/instance-type") is None


@pytest.mark.parametrize(
    ("pool", "weight"),
    [
        (DEFAULT_POOL, 50),
        (BATCH_POOL, 10),
        (NodePoolConfig(name="p", purpose=PoolPurpose.BATCH, weight=70), 70),
    ],
    ids=["serving-default", "batch-default", "explicit"],
)
def test_nodepool_weight(pool: NodePoolConfig, weight: int) -> None:
    assert karpenter_gpu_nodepool(pool)["spec"]["weight"] == weight


def test_production_serving_pool_fills_before_batch(production: TierConfig) -> None:
    weights = {p.name: karpenter_gpu_nodepool(p)["spec"]["weight"] for p in production.node_pools}
    assert weights["serving"] > weights["batch"]


def test_nodepool_taints_limits_and_disruption() -> None:
    spec = karpenter_gpu_nodepool(BATCH_POOL)["spec"]
    assert spec["template"]["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert spec["limits"] == {"nvidia.com/gpu": "16"}
    assert spec["disruption"] == {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "15m",
        "budgets": [{"nodes": "20%"}],
    }
    assert spec["template"]["spec"]["expireAfter"] == "720h"


def test_nodepool_shares_taints_limits_and_disruption_with_auto_mode() -> None:
    karpenter, auto = karpenter_gpu_nodepool(BATCH_POOL)["spec"], auto_mode_gpu_nodepool(BATCH_POOL)["spec"]
    for key in ("limits", "disruption"):
        assert karpenter[key] == auto[key]
    for key in ("taints", "expireAfter"):
        assert karpenter["template"]["spec"][key] == auto["template"]["spec"][key]


def test_nodepool_labels_nodes_with_pool_purpose_and_os() -> None:
    labels = karpenter_gpu_nodepool(BOTTLEROCKET_POOL)["spec"]["template"]["metadata"]["labels"]
    assert labels == {
        POOL_LABEL: "br",
        PURPOSE_LABEL: "serving",
        AMI_FAMILY_LABEL: "bottlerocket",
        CAPACITY_CLASS_LABEL: "br",  # a pool without capacity_class is its own class
    }


# --------------------------------------------------------------------------- Karpenter chart values


def test_karpenter_values_settings() -> None:
    values = karpenter_values(cluster_name="c", interruption_queue="q", replicas=3, node_repair=False)
    assert values["settings"] == {"clusterName": "c", "interruptionQueue": "q"}
    assert values["replicas"] == 3


def test_karpenter_values_turn_node_repair_on_by_default() -> None:
    # The 1.14.0 chart ships nodeRepair false; gpufarm sets only that gate and Helm keeps the
    # chart's other gates (reservedCapacity true among them).
    values = karpenter_values(cluster_name="c", interruption_queue="q")
    assert values["settings"]["featureGates"] == {"nodeRepair": True}


def test_node_repair_gate_is_a_key_the_pinned_chart_reads() -> None:
    data = chart_data("karpenter", "1.14.0")
    assert data["values"]["settings"]["featureGates"]["nodeRepair"] is False
    assert f"settings.featureGates.{NODE_REPAIR_GATE}" in data["template_refs"]
    values = karpenter_values(cluster_name="c", interruption_queue="q")
    assert helm_value_issues("karpenter", "1.14.0", values) == []


def test_karpenter_service_account_is_the_pod_identity_one() -> None:
    values = karpenter_values(cluster_name="c", interruption_queue="q")
    assert values["serviceAccount"] == {"create": True, "name": SERVICE_ACCOUNT}
    assert SERVICE_ACCOUNT == "karpenter"


def test_karpenter_controller_runs_on_the_system_node_group_only() -> None:
    values = karpenter_values(cluster_name="c", interruption_queue="q")
    assert schedulable_on(values, SYSTEM_NODE_LABELS)
    for pool in (DEFAULT_POOL, BATCH_POOL):
        assert not schedulable_on(values, karpenter_node_labels(pool))
    assert not schedulable_on(values, {"kubernetes.io/os": "linux"}), "nodes outside a managed node group"


def test_karpenter_controller_does_not_tolerate_gpu_nodes() -> None:
    values = karpenter_values(cluster_name="c", interruption_queue="q")
    assert not tolerates(values["tolerations"], {"key": "nvidia.com/gpu", "effect": "NoSchedule"})
    assert tolerates(values["tolerations"], {"key": "CriticalAddonsOnly", "effect": "NoSchedule"})


def test_karpenter_replicas_spread_over_nodes() -> None:
    anti = karpenter_values(cluster_name="c", interruption_queue="q")["affinity"]["podAntiAffinity"]
    assert anti["requiredDuringSchedulingIgnoredDuringExecution"] == [
        {"topologyKey": "kubernetes.io/hostname"}
    ]


def test_karpenter_controller_resources_are_guaranteed() -> None:
    resources = karpenter_values(cluster_name="c", interruption_queue="q")["controller"]["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "1", "memory": "1Gi"}


# --------------------------------------------------------------------------- NVIDIA device plugin values


def test_device_plugin_runs_on_al2023_gpu_nodes() -> None:
    values = nvidia_device_plugin_values()
    for pool in (DEFAULT_POOL, BATCH_POOL):
        labels = karpenter_node_labels(pool)
        assert schedulable_on(values, labels)
        taints = karpenter_gpu_nodepool(pool)["spec"]["template"]["spec"]["taints"]
        assert all(tolerates(values["tolerations"], t) for t in taints)


def test_device_plugin_skips_bottlerocket_which_ships_its_own() -> None:
    assert not schedulable_on(nvidia_device_plugin_values(), karpenter_node_labels(BOTTLEROCKET_POOL))


def test_device_plugin_skips_nodes_without_nvidia_gpus() -> None:
    values = nvidia_device_plugin_values()
    assert not schedulable_on(values, SYSTEM_NODE_LABELS)
    assert not schedulable_on(values, {**SYSTEM_NODE_LABELS, GPU_MANUFACTURER_LABEL: "amd"})


def test_device_plugin_runs_on_nodes_labelled_gpu_present() -> None:
    assert schedulable_on(
        nvidia_device_plugin_values(), {**SYSTEM_NODE_LABELS, "nvidia.com/gpu.present": "true"}
    )


def test_device_plugin_is_node_critical_without_feature_discovery() -> None:
    values = nvidia_device_plugin_values()
    assert values["priorityClassName"] == "system-node-critical"
    assert values["gfd"] == {"enabled": False}


# --------------------------------------------------------------------------- reserved capacity and EFA

RESERVED_POOL = NodePoolConfig(
    name="h100-reserved",
    instance_families=["p5"],
    instance_types=["p5.48xlarge"],
    capacity_types=[CapacityType.RESERVED, CapacityType.ON_DEMAND],
    reservation_ids=["cr-0123456789abcdef0", "cr-0123456789abcdef1"],
    capacity_class="h100",
)
EFA_POOL = NodePoolConfig(
    name="h100-efa", instance_families=["p5"], instance_types=["p5.48xlarge"], efa=True, capacity_class="h100"
)


@pytest.fixture(scope="module")
def enterprise() -> TierConfig:
    if "enterprise" not in preset_names():
        pytest.skip("the enterprise preset is not in gpufarm/config")
    return load_preset("enterprise")


def test_nodeclass_selects_the_pool_reservations_by_id() -> None:
    assert nodeclass(RESERVED_POOL)["spec"]["capacityReservationSelectorTerms"] == [
        {"id": "cr-0123456789abcdef0"},
        {"id": "cr-0123456789abcdef1"},
    ]


def test_nodeclass_without_reservations_selects_none() -> None:
    assert "capacityReservationSelectorTerms" not in nodeclass(DEFAULT_POOL)["spec"]


@pytest.mark.parametrize("pool", [RESERVED_POOL, EFA_POOL], ids=["reserved", "efa"])
def test_reserved_and_efa_nodeclasses_match_their_crd(pool: NodePoolConfig) -> None:
    assert crd_errors(nodeclass(pool), NODECLASS_CRD, "v1") == []


def test_reservation_selector_terms_satisfy_the_crd_rules() -> None:
    # CEL rules: each term names something; an 'id' term names nothing else.
    for term in nodeclass(RESERVED_POOL)["spec"]["capacityReservationSelectorTerms"]:
        assert set(term) == {"id"}
        assert re.fullmatch(r"cr-[0-9a-z]+", term["id"])


def test_enterprise_nodeclasses_and_nodepools_match_their_crds(enterprise: TierConfig) -> None:
    for pool in enterprise.node_pools:
        assert crd_errors(nodeclass(pool), NODECLASS_CRD, "v1") == [], pool.name
        assert nodepool_errors(karpenter_gpu_nodepool(pool)) == [], pool.name


def test_efa_layout_of_a_p5_is_one_ena_primary_and_one_efa_only_per_card() -> None:
    layout = efa_interfaces("p5.48xlarge")
    assert layout is not None
    assert (layout[0].network_card_index, layout[0].device_index, layout[0].interface_type) == (
        0,
        0,
        "interface",
    )
    efa_only = [i for i in layout if i.interface_type == "efa-only"]
    assert sorted(i.network_card_index for i in efa_only) == list(range(32))
    assert {(i.network_card_index, i.device_index) for i in efa_only if i.network_card_index == 0} == {(0, 1)}
    assert len(layout) == 33


@pytest.mark.parametrize(("instance_type", "cards"), sorted(EFA_NETWORK_CARDS.items()))
def test_efa_layout_gives_every_network_card_one_efa(instance_type: str, cards: int) -> None:
    layout = efa_interfaces(instance_type)
    assert layout is not None
    assert sorted(i.network_card_index for i in layout if i.interface_type == "efa-only") == list(
        range(cards)
    )


def test_efa_layout_of_an_unknown_instance_type_is_none() -> None:
    assert efa_interfaces("g6e.48xlarge") is None


def test_efa_nodeclass_lists_the_interfaces_of_its_instance_type() -> None:
    interfaces = nodeclass(EFA_POOL)["spec"]["networkInterfaces"]
    layout = efa_interfaces("p5.48xlarge")
    assert layout is not None
    assert interfaces == [
        {
            "networkCardIndex": i.network_card_index,
            "deviceIndex": i.device_index,
            "interfaceType": i.interface_type,
        }
        for i in layout
    ]


def test_efa_nodeclass_interfaces_satisfy_the_crd_rules() -> None:
    # CEL rules the JSON schema check cannot evaluate: a primary 'interface' on card 0 device 0,
    # no duplicate (card, device) pair, at most one efa-only interface per card.
    interfaces = nodeclass(EFA_POOL)["spec"]["networkInterfaces"]
    assert {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"} in interfaces
    pairs = [(i["networkCardIndex"], i["deviceIndex"]) for i in interfaces]
    assert len(pairs) == len(set(pairs))
    efa_cards = [i["networkCardIndex"] for i in interfaces if i["interfaceType"] == "efa-only"]
    assert len(efa_cards) == len(set(efa_cards))


@pytest.mark.parametrize(
    "pool",
    [
        NodePoolConfig(name="p", instance_families=["p5"], efa=True),
        NodePoolConfig(
            name="p",
            instance_families=["p5", "p4d"],
            instance_types=["p5.48xlarge", "p4d.24xlarge"],
            efa=True,
        ),
        NodePoolConfig(name="p", instance_families=["g6e"], instance_types=["g6e.48xlarge"], efa=True),
    ],
    ids=["any-size", "mixed-layouts", "unknown-type"],
)
def test_efa_nodeclass_leaves_interfaces_to_karpenter_without_one_known_layout(pool: NodePoolConfig) -> None:
    # Karpenter then gives EFA interfaces to nodes it launches for pods requesting vpc.amazonaws.com/efa.
    assert "networkInterfaces" not in nodeclass(pool)["spec"]


def test_nodepool_labels_nodes_with_the_capacity_class_when_set() -> None:
    labels = karpenter_gpu_nodepool(RESERVED_POOL)["spec"]["template"]["metadata"]["labels"]
    assert labels[CAPACITY_CLASS_LABEL] == "h100"


def test_nodepool_without_a_capacity_class_is_labelled_with_its_own_name(production: TierConfig) -> None:
    # Models select a class by this label, so a pool of one is a class of its own.
    for pool in (DEFAULT_POOL, *production.node_pools):
        labels = karpenter_gpu_nodepool(pool)["spec"]["template"]["metadata"]["labels"]
        assert labels[CAPACITY_CLASS_LABEL] == pool.name


def test_nodepool_labels_efa_nodes_only() -> None:
    assert karpenter_gpu_nodepool(EFA_POOL)["spec"]["template"]["metadata"]["labels"][EFA_LABEL] == "true"
    assert EFA_LABEL not in karpenter_gpu_nodepool(RESERVED_POOL)["spec"]["template"]["metadata"]["labels"]


# --------------------------------------------------------------------------- EFA device plugin values


def efa_plugin_schedulable_on(labels: dict[str, str]) -> bool:
    """Whether the chart's DaemonSet may land on a node: one affinity term per label key."""
    selector = efa_device_plugin_values("us-east-1")["supportedInstanceLabels"]
    return any(labels.get(key) in selector["values"] for key in selector["keys"])


def test_efa_device_plugin_runs_on_efa_nodes_only() -> None:
    assert efa_plugin_schedulable_on(karpenter_node_labels(EFA_POOL))
    assert not efa_plugin_schedulable_on(karpenter_node_labels(RESERVED_POOL))
    assert not efa_plugin_schedulable_on(SYSTEM_NODE_LABELS)


def test_efa_device_plugin_tolerates_the_gpu_taint() -> None:
    taints = karpenter_gpu_nodepool(EFA_POOL)["spec"]["template"]["spec"]["taints"]
    assert all(tolerates(efa_device_plugin_values("us-east-1")["tolerations"], t) for t in taints)


@pytest.mark.parametrize(
    ("region", "repository"),
    [
        ("us-east-1", "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin"),
        ("eu-south-1", "590381155156.dkr.ecr.eu-south-1.amazonaws.com/eks/aws-efa-k8s-device-plugin"),
        ("cn-north-1", "918309763551.dkr.ecr.cn-north-1.amazonaws.com.cn/eks/aws-efa-k8s-device-plugin"),
    ],
)
def test_efa_device_plugin_image_comes_from_the_regions_eks_registry(region: str, repository: str) -> None:
    assert efa_device_plugin_values(region)["image"] == {"repository": repository, "tag": "v0.5.20"}


def test_efa_device_plugin_digest_supplied_by_the_tier_rides_in_the_tag() -> None:
    digest = "sha256:" + "c" * 64
    image = efa_device_plugin_values("us-east-1", {"efa-device-plugin": digest})["image"]
    assert image["tag"] == f"v0.5.20@{digest}"


@pytest.mark.skipif(not chart_available(EFA_CHART), reason="../shared/upstream-ref is not beside the repo")
def test_efa_device_plugin_keeps_the_charts_tag_and_replaces_its_us_west_2_repository() -> None:
    defaults = chart_defaults(EFA_CHART)
    assert defaults["image"]["repository"].startswith("602401143452.dkr.ecr.us-west-2.amazonaws.com/")
    rendered = helm_merge(defaults, efa_device_plugin_values("us-east-1"))["image"]
    assert rendered == {
        "repository": "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin",
        "tag": defaults["image"]["tag"],
    }
    assert defaults["image"]["repository"].endswith("/" + EFA_DEVICE_PLUGIN_IMAGE)


def test_efa_device_plugin_refuses_a_region_without_a_known_registry() -> None:
    with pytest.raises(ValueError) as caught:
        efa_device_plugin_values("xx-east-9")
    assert str(caught.value) == (
        "'region' must be one with a known Amazon EKS image registry (38 regions, see "
        "gpufarm/core/registries.py), got 'xx-east-9'"
    )


# --------------------------------------------------------------------------- SOCI parallel pull

SOCI_POOL = BOTTLEROCKET_POOL.model_copy(update={"image_pull": ImagePull.SOCI_PARALLEL_PULL})


def test_a_soci_pool_carries_the_bottlerocket_snapshotter_settings() -> None:
    import tomllib

    settings = tomllib.loads(nodeclass(SOCI_POOL)["spec"]["userData"])["settings"]
    # The two keys of the Bottlerocket 1.44 settings reference's example; nothing else.
    assert settings == {
        "container-runtime": {"snapshotter": "soci"},
        "container-runtime-plugins": {"soci-snapshotter": {"pull-mode": "parallel-pull-unpack"}},
    }
    assert crd_errors(nodeclass(SOCI_POOL), NODECLASS_CRD, "v1") == []


def test_a_default_pool_has_no_user_data() -> None:
    assert "userData" not in nodeclass(BOTTLEROCKET_POOL)["spec"]
