"""EKS Hybrid Nodes through the enterprise tier: on-premises GPUs first, cloud GPUs next, Bedrock last.

One variant of the enterprise preset, synthesized once with its three compliance packs: hybrid
nodes on (SSM hybrid activations, a transit gateway, two hosts of 8 H100s), a cloud burst pool in
the `on-prem` class, and the 70B-class model (Hugging Face weights) on that class. The preset
itself leaves hybrid nodes off: they need the operator's networks and gateway
(docs/decisions/0068-hybrid-nodes.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufarm.config import TierConfig
from gpufarm.core.hybrid import HYBRID_COMPUTE_TYPE_LABEL
from gpufarm.core.labels import CAPACITY_CLASS_LABEL
from gpufarm.k8s.gateway import vllm_deployment_id
from tests.conftest import cfn_lint_errors, nag_violations
from tests.tiers.billing_walk import costing_gaps
from tests.tiers.conftest import synthesize
from tests.tiers.helpers import STATEFUL_TYPES, manifest_of, resources, stateful_logical_ids
from tests.unit.factories import make_enterprise
from tests.unit.test_config_hybrid import HYBRID, ON_PREM_70B, with_burst

NODE_CIDR = "192.168.0.0/20"
POD_CIDR = "192.168.64.0/18"
GATEWAY = "tgw-0a1b2c3d4e5f60718"


@pytest.fixture(scope="module")
def tier() -> TierConfig:
    return make_enterprise(HYBRID, with_burst(), ON_PREM_70B)


@pytest.fixture(scope="module")
def outdir(tier: TierConfig, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hybrid")
    synthesize([tier], out)  # the preset's compliance packs and the deploy rules gate this synth
    return out


@pytest.fixture(scope="module")
def template(outdir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((outdir / "gpufarm-enterprise.template.json").read_text())
    return data


def test_cluster_takes_the_remote_networks(template: dict[str, Any]) -> None:
    (cluster,) = resources(template, "AWS::EKS::Cluster").values()
    props = cluster["Properties"]
    assert props["RemoteNetworkConfig"] == {
        "RemoteNodeNetworks": [{"Cidrs": [NODE_CIDR]}],
        "RemotePodNetworks": [{"Cidrs": [POD_CIDR]}],
    }
    # What EKS requires of a cluster with hybrid nodes: access entries, one endpoint kind.
    assert props["AccessConfig"]["AuthenticationMode"] in ("API", "API_AND_CONFIG_MAP")
    assert props["ResourcesVpcConfig"]["EndpointPublicAccess"] is False


def test_hybrid_nodes_role_joins_through_a_hybrid_linux_access_entry(template: dict[str, Any]) -> None:
    entries = [e["Properties"] for e in resources(template, "AWS::EKS::AccessEntry").values()]
    (hybrid,) = [e for e in entries if e.get("Type") == "HYBRID_LINUX"]
    role_id = hybrid["PrincipalArn"]["Fn::GetAtt"][0]
    trust = resources(template, "AWS::IAM::Role")[role_id]["Properties"]["AssumeRolePolicyDocument"]
    assert [s["Principal"] for s in trust["Statement"]] == [{"Service": "ssm.amazonaws.com"}]
    # The name the SSM activation takes (docs/operations.md, Onboarding an on-premises node).
    assert template["Outputs"]["HybridNodesRoleName"]["Value"] == {"Ref": role_id}


def test_every_private_route_table_reaches_on_premises(template: dict[str, Any]) -> None:
    routes = [
        r["Properties"]
        for r in resources(template, "AWS::EC2::Route").values()
        if r["Properties"].get("TransitGatewayId") == GATEWAY
    ]
    # Three AZs, one private route table each, the node and the pod network.
    assert sorted((str(r["RouteTableId"]), r["DestinationCidrBlock"]) for r in routes) == sorted(
        (str(table), cidr)
        for table in {str(r["RouteTableId"]) for r in routes}
        for cidr in (NODE_CIDR, POD_CIDR)
    )
    assert len({str(r["RouteTableId"]) for r in routes}) == 3


def test_load_balancer_reaches_only_the_model_ports_in_the_pod_network(
    template: dict[str, Any], tier: TierConfig
) -> None:
    egress = [
        (r["FromPort"], r["Description"])
        for g in resources(template, "AWS::EC2::SecurityGroup").values()
        for r in g["Properties"].get("SecurityGroupEgress", [])
        if r.get("CidrIp") == POD_CIDR
    ]
    optimizer = tier.ingress.target_optimizer
    # The Target Optimizer's data and control ports; not the gateway's port (it runs in the VPC).
    assert sorted(egress) == [
        (optimizer.control_port, "Load balancer to model pods on hybrid nodes"),
        (optimizer.data_port, "Load balancer to model pods on hybrid nodes"),
    ]


def test_model_prefers_hybrid_nodes_then_bursts_to_its_class(template: dict[str, Any]) -> None:
    spec = manifest_of(template, "Deployment", "vllm-llama-3-3-70b")["spec"]["template"]["spec"]
    assert "nodeSelector" not in spec
    affinity = spec["affinity"]["nodeAffinity"]
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchExpressions"] for t in terms] == [
        [{"key": HYBRID_COMPUTE_TYPE_LABEL, "operator": "In", "values": ["hybrid"]}],
        [{"key": CAPACITY_CLASS_LABEL, "operator": "In", "values": ["on-prem"]}],
    ]
    (preferred,) = affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["preference"]["matchExpressions"][0]["key"] == HYBRID_COMPUTE_TYPE_LABEL
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


def test_burst_pool_labels_its_nodes_with_the_class(template: dict[str, Any]) -> None:
    pool = manifest_of(template, "NodePool", "gpu-onprem-burst")
    assert pool["spec"]["template"]["metadata"]["labels"][CAPACITY_CLASS_LABEL] == "on-prem"


def test_gateway_falls_back_to_bedrock_last(template: dict[str, Any], tier: TierConfig) -> None:
    model = tier.models[1]
    config = yaml.safe_load(manifest_of(template, "ConfigMap", "gateway-config")["data"]["config.yaml"])
    ids = [e["model_info"]["id"] for e in config["model_list"] if e["model_name"] == model.api_model_name]
    assert ids == [vllm_deployment_id(model)]
    assert {model.api_model_name: [f"{model.api_model_name}@bedrock"]} in config["router_settings"][
        "fallbacks"
    ]


def test_pod_identity_agent_serves_hybrid_nodes(template: dict[str, Any]) -> None:
    (agent,) = [
        a["Properties"]
        for a in resources(template, "AWS::EKS::Addon").values()
        if a["Properties"]["AddonName"] == "eks-pod-identity-agent"
    ]
    assert json.loads(agent["ConfigurationValues"]) == {"daemonsets": {"hybrid": {"create": True}}}


def test_compliance_packs_and_cfn_lint_pass(outdir: Path, template: dict[str, Any]) -> None:
    assert nag_violations(outdir) == {}
    assert cfn_lint_errors(outdir / "gpufarm-enterprise.template.json") == []


def test_turning_hybrid_nodes_on_replaces_no_stateful_resource(template: dict[str, Any]) -> None:
    # Against the preset's snapshot: the cluster, FSx, buckets, keys and load balancers keep their
    # logical IDs (EKS API reference, RemoteNetworkConfigRequest: "You can add, change, or remove
    # this configuration after the cluster is created"). The 70B model moves class, so only
    # its target groups may be new.
    before = json.loads(
        (Path(__file__).parent / "snapshots" / "enterprise-stateful-logical-ids.json").read_text()
    )
    after = stateful_logical_ids(template)
    for type_name in STATEFUL_TYPES:
        assert not set(before.get(type_name, [])) - set(after.get(type_name, [])), type_name


def test_hybrid_tier_bills_every_resource_type(template: dict[str, Any]) -> None:
    assert costing_gaps(template) == []
