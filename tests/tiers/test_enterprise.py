"""The enterprise tier, synthesized once: reserved capacity, the capacity mix, multi-node serving,
GWLB inspection, PrivateLink, the NLB variant, both compliance packs, and its size with 8 models."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gpufarm.config import NodeGroupConfig, NodePoolConfig, load_preset
from gpufarm.core.placement import placement_of
from gpufarm.k8s.gateway import route_env_name
from gpufarm.k8s.labels import CAPACITY_CLASS_LABEL, POOL_LABEL, workload_name
from gpufarm.k8s.lws import leader_service_name
from tests.assemblies import shared_assembly
from tests.conftest import cfn_lint_errors, nag_violations
from tests.tiers.billing_walk import costing_gaps
from tests.tiers.conftest import synthesize, variant
from tests.tiers.helpers import (
    STATEFUL_TYPES,
    default_target_group,
    manifest_of,
    manifests,
    model_target_groups,
    only,
    resources,
    stateful_logical_ids,
)

SNAPSHOT = Path(__file__).parent / "snapshots" / "enterprise-stateful-logical-ids.json"
ENTERPRISE = load_preset("enterprise")
MULTI = next(m for m in ENTERPRISE.models if m.pipeline_parallel > 1)
CFN_RESOURCE_LIMIT = 500
CFN_TEMPLATE_BYTES = 1_000_000


def _helm(template: dict[str, Any], chart: str) -> dict[str, Any]:
    (found,) = [
        r["Properties"]
        for r in resources(template, "Custom::AWSCDK-EKS-HelmChart").values()
        if r["Properties"].get("Chart") == chart
    ]
    return found


# ----------------------------------------------------------------------------- reserved base


def _node_group(template: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [
        g["Properties"]
        for g in resources(template, "AWS::EKS::Nodegroup").values()
        if g["Properties"].get("Labels", {}).get(POOL_LABEL) == name
    ]
    return found


def _launch_data(template: dict[str, Any], group: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = template["Resources"][group["LaunchTemplate"]["Id"]["Ref"]]["Properties"][
        "LaunchTemplateData"
    ]
    return data


def test_reserved_and_karpenter_nodes_enforce_network_policies(enterprise_template: dict[str, Any]) -> None:
    # Reserved managed node groups join the same cluster as the system nodes and Karpenter's, so
    # the one VPC CNI add-on, network policy agent on, serves them all.
    (cni,) = [
        a
        for a in resources(enterprise_template, "AWS::EKS::Addon").values()
        if a["Properties"]["AddonName"] == "vpc-cni"
    ]
    assert json.loads(cni["Properties"]["ConfigurationValues"]) == {"enableNetworkPolicy": "true"}
    groups = resources(enterprise_template, "AWS::EKS::Nodegroup").values()
    assert len(groups) == 1 + len(ENTERPRISE.node_groups)
    assert {json.dumps(g["Properties"]["ClusterName"]) for g in groups} == {
        json.dumps(cni["Properties"]["ClusterName"])
    }


@pytest.mark.parametrize("group", ENTERPRISE.node_groups, ids=[g.name for g in ENTERPRISE.node_groups])
def test_each_reserved_group_runs_in_its_own_reservation_and_az(
    enterprise_template: dict[str, Any], group: NodeGroupConfig
) -> None:
    props = _node_group(enterprise_template, group.name)
    assert props["AmiType"] == group.ami_type.value
    assert props["ScalingConfig"] == {
        "MinSize": group.nodes,
        "DesiredSize": group.nodes,
        "MaxSize": group.nodes,
    }
    data = _launch_data(enterprise_template, props)
    assert data["InstanceType"] == group.instance_type
    reservation_id = data["CapacityReservationSpecification"]["CapacityReservationTarget"][
        "CapacityReservationId"
    ]["Ref"]
    reservation = enterprise_template["Resources"][reservation_id]
    assert reservation["Type"] == "AWS::EC2::CapacityReservation"
    r = reservation["Properties"]
    assert (r["InstanceType"], r["AvailabilityZone"]) == (group.instance_type, group.availability_zone)
    assert r["InstanceCount"] == (group.capacity.instance_count or group.nodes)
    assert r["InstanceMatchCriteria"] == "targeted"
    # The group lives only in the reservation's AZ.
    (subnet,) = props["Subnets"]
    assert (
        enterprise_template["Resources"][subnet["Ref"]]["Properties"]["AvailabilityZone"]
        == group.availability_zone
    )


def test_reserved_nodes_are_tainted_and_labelled_with_their_class(
    enterprise_template: dict[str, Any],
) -> None:
    for group in ENTERPRISE.node_groups:
        props = _node_group(enterprise_template, group.name)
        assert props["Labels"][CAPACITY_CLASS_LABEL] == group.capacity_class_name
        assert {"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NO_SCHEDULE"} in props["Taints"]


def test_only_efa_groups_get_efa_interfaces_and_the_device_plugin(
    enterprise_template: dict[str, Any],
) -> None:
    for group in ENTERPRISE.node_groups:
        data = _launch_data(enterprise_template, _node_group(enterprise_template, group.name))
        kinds = {i.get("InterfaceType") for i in data.get("NetworkInterfaces", [])}
        assert bool(kinds & {"efa", "efa-only"}) is group.efa, group.name
    values = json.loads(_helm(enterprise_template, "aws-efa-k8s-device-plugin")["Values"])
    # Pulled in the tier's region, not from the chart's us-west-2 default (through NAT).
    assert values["image"]["repository"] == (
        f"602401143452.dkr.ecr.{ENTERPRISE.environment.region}.amazonaws.com/eks/aws-efa-k8s-device-plugin"
    )


# ----------------------------------------------------------------------------- the capacity mix


def test_burst_and_background_pools_follow_the_base(enterprise_template: dict[str, Any]) -> None:
    pools = {
        p["metadata"]["name"]: p["spec"] for p in manifests(enterprise_template) if p["kind"] == "NodePool"
    }
    weights = {}
    for pool in ENTERPRISE.node_pools:
        spec = pools[f"gpu-{pool.name}"]
        labels = spec["template"]["metadata"]["labels"]
        assert labels[CAPACITY_CLASS_LABEL] == pool.capacity_class_name
        capacity = next(
            r for r in spec["template"]["spec"]["requirements"] if r["key"] == "karpenter.sh/capacity-type"
        )
        assert capacity["values"] == [c.value for c in pool.capacity_types]
        weights[pool.name] = spec["weight"]
    assert weights["h100-burst"] > weights["background"]


@pytest.mark.parametrize("model", ENTERPRISE.models, ids=[m.name for m in ENTERPRISE.models])
def test_each_model_selects_its_capacity_class(enterprise_template: dict[str, Any], model: Any) -> None:
    kind = "LeaderWorkerSet" if model.pipeline_parallel > 1 else "Deployment"
    workload = manifest_of(enterprise_template, kind, workload_name(model.name))
    if kind == "LeaderWorkerSet":
        pod = workload["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    else:
        pod = workload["spec"]["template"]["spec"]
    if model.capacity_class is not None:
        assert pod["nodeSelector"] == {CAPACITY_CLASS_LABEL: model.capacity_class}
    else:  # a model placed on one reserved node group selects that group
        assert pod["nodeSelector"] == {POOL_LABEL: model.node_pool}
    targets = placement_of(ENTERPRISE, model)
    spot = any(
        isinstance(t, NodePoolConfig) and "spot" in [c.value for c in t.capacity_types] for t in targets
    )
    assert spot is (not model.critical)
    # In the preset, critical models run on reserved capacity first; background models never do.
    assert any(isinstance(t, NodeGroupConfig) for t in targets) is model.critical


# ----------------------------------------------------------------------------- multi-node serving


def test_multi_node_model_runs_as_a_leader_worker_set(enterprise_template: dict[str, Any]) -> None:
    lws = manifest_of(enterprise_template, "LeaderWorkerSet", workload_name(MULTI.name))
    assert lws["spec"]["replicas"] == MULTI.replicas
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == MULTI.pipeline_parallel
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    command = " ".join(leader.get("command", []) + leader.get("args", []))
    assert f"--tensor-parallel-size {MULTI.gpus}" in command or str(MULTI.gpus) in command
    assert "--pipeline-parallel-size" in command
    assert _helm(enterprise_template, "lws")


def test_traffic_reaches_multi_node_leaders_only(enterprise_template: dict[str, Any]) -> None:
    leader = leader_service_name(MULTI.name)
    service = manifest_of(enterprise_template, "Service", leader)
    assert service["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    bindings = [b for b in manifests(enterprise_template) if b["kind"] == "TargetGroupBinding"]
    assert any(b["spec"]["serviceRef"]["name"] == leader for b in bindings)
    import yaml

    config = yaml.safe_load(
        manifest_of(enterprise_template, "ConfigMap", "gateway-config")["data"]["config.yaml"]
    )
    # The gateway calls the model's route on the load balancer (ADR 0050), whose target group holds
    # the leaders: least outstanding requests across leaders.
    bases = [e["litellm_params"].get("api_base", "") for e in config["model_list"]]
    assert f"os.environ/{route_env_name(MULTI)}" in bases
    assert not any(f"//{leader}." in b for b in bases)


# ----------------------------------------------------------------------------- ingress


def test_alb_reserves_capacity_units(enterprise_template: dict[str, Any]) -> None:
    albs = [
        lb["Properties"]
        for lb in resources(enterprise_template, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()
        if lb["Properties"].get("Type", "application") == "application"
    ]
    (alb,) = albs
    assert alb["MinimumLoadBalancerCapacity"] == {"CapacityUnits": ENTERPRISE.ingress.lcu_reservation}


def test_ingress_passes_through_gateway_load_balancer_endpoints(enterprise_template: dict[str, Any]) -> None:
    (gwlb,) = [
        k
        for k, lb in resources(enterprise_template, "AWS::ElasticLoadBalancingV2::LoadBalancer").items()
        if lb["Properties"].get("Type") == "gateway"
    ]
    geneve = [
        g["Properties"]
        for g in resources(enterprise_template, "AWS::ElasticLoadBalancingV2::TargetGroup").values()
        if g["Properties"].get("Protocol") == "GENEVE"
    ]
    assert [(g["Port"], g["TargetType"]) for g in geneve] == [(6081, "instance")]
    endpoints = [
        e["Properties"]
        for e in resources(enterprise_template, "AWS::EC2::VPCEndpoint").values()
        if e["Properties"].get("VpcEndpointType") == "GatewayLoadBalancer"
    ]
    assert len(endpoints) == len(ENTERPRISE.environment.availability_zones)
    services = resources(enterprise_template, "AWS::EC2::VPCEndpointService")
    assert any(s["Properties"].get("GatewayLoadBalancerArns") == [{"Ref": gwlb}] for s in services.values())
    _, edge = only(enterprise_template, "AWS::EC2::GatewayRouteTableAssociation")
    assert "GatewayId" in edge["Properties"]
    # Every public subnet sends its default route to an inspection endpoint, not the IGW.
    public = [
        r["Properties"]
        for k, r in resources(enterprise_template, "AWS::EC2::Route").items()
        if "Public" in k and r["Properties"].get("DestinationCidrBlock") == "0.0.0.0/0"
    ]
    assert public and all("VpcEndpointId" in r and "GatewayId" not in r for r in public)


def test_private_link_offers_the_models_to_named_principals(enterprise_template: dict[str, Any]) -> None:
    services = [
        s["Properties"]
        for s in resources(enterprise_template, "AWS::EC2::VPCEndpointService").values()
        if "NetworkLoadBalancerArns" in s["Properties"]
    ]
    (service,) = services
    assert service["AcceptanceRequired"] is ENTERPRISE.ingress.private_link.acceptance_required
    permissions = [
        p["Properties"]["AllowedPrincipals"]
        for p in resources(enterprise_template, "AWS::EC2::VPCEndpointServicePermissions").values()
    ]
    assert ENTERPRISE.ingress.private_link.allowed_principals in permissions
    # The NLB in front of the ALB forwards to it through an ALB-type target group.
    assert any(
        g["Properties"].get("TargetType") == "alb"
        for g in resources(enterprise_template, "AWS::ElasticLoadBalancingV2::TargetGroup").values()
    )
    assert "PrivateLinkServiceName" in enterprise_template["Outputs"]


# ----------------------------------------------------------------------------- hardening


def test_stack_has_termination_protection(enterprise_template: dict[str, Any], enterprise_dir: Path) -> None:
    manifest = json.loads((enterprise_dir / "manifest.json").read_text())
    assert manifest["artifacts"]["gpufarm-enterprise"]["properties"]["terminationProtection"] is True


def test_load_balancers_have_deletion_protection(enterprise_template: dict[str, Any]) -> None:
    for lb in resources(enterprise_template, "AWS::ElasticLoadBalancingV2::LoadBalancer").values():
        attributes = {a["Key"]: a["Value"] for a in lb["Properties"].get("LoadBalancerAttributes", [])}
        if lb["Properties"].get("Type") != "gateway":
            assert attributes.get("deletion_protection.enabled") == "true"


def test_stateful_resources_are_retained(enterprise_template: dict[str, Any]) -> None:
    for type_name in ("AWS::FSx::FileSystem", "AWS::KMS::Key", "AWS::S3::Bucket"):
        for key, resource in resources(enterprise_template, type_name).items():
            assert resource.get("DeletionPolicy") == "Retain", key


def test_both_compliance_packs_passed(enterprise_template: dict[str, Any], enterprise_dir: Path) -> None:
    # The agent image, AWS's ':latest', warns as a placeholder (tests/tiers/test_placeholders.py).
    assert nag_violations(enterprise_dir) == {}


def test_cfn_lint_reports_no_errors(enterprise_template: dict[str, Any], enterprise_dir: Path) -> None:
    assert cfn_lint_errors(enterprise_dir / "gpufarm-enterprise.template.json") == []


def test_stateful_logical_ids_match_snapshot(enterprise_template: dict[str, Any]) -> None:
    current = stateful_logical_ids(enterprise_template)
    if os.environ.get("GPUFARM_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(json.dumps(current, indent=2) + "\n")
    assert current == json.loads(SNAPSHOT.read_text()), (
        "a stateful resource would be replaced; if intended, rerun with GPUFARM_UPDATE_SNAPSHOTS=1 "
        "and review the diff"
    )


# ----------------------------------------------------------------------------- eight models, NLB


def _eight_models(document: dict[str, Any]) -> list[dict[str, Any]]:
    models = [dict(m) for m in document["models"]]
    for i in range(len(models), 8):
        models.append(
            {
                "name": f"batch-{i}",
                "weights": f"s3://gpufarm-enterprise-models/batch/model-{i}/",
                "weights_gib": 16,
                "capacity_class": "background",
                "gpus": 1,
                "replicas": 1,
                "critical": False,
                "bedrock": "none",
            }
        )
    return models


@pytest.fixture(scope="module")
def eight_models(enterprise_document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = variant(enterprise_document, {"models": _eight_models(enterprise_document)})
    outdir = tmp_path_factory.mktemp("enterprise-8")
    synthesize([config], outdir)
    return outdir / "gpufarm-enterprise.template.json"


RESOURCE_BUDGET = 0.67
"""Share of CloudFormation's 500 resources the preset with 8 models may use (docs/enterprise.md,
"Template size": the fixed part grew by AMP alerting and Grafana, then by the gateway's NLB, then
by the image cache's 5 rules and first-pull policy; what scales is a model's cost)."""
RESOURCES_PER_MODEL = 7
"""A model's serving manifest, binding, target group, two alarms, and a listener rule on each of
the client's and the gateway's listeners (ADR 0050: the gateway calls each model's route)."""


def test_eight_models_stay_within_budget_of_cloudformation_limits(
    enterprise_template: dict[str, Any], enterprise_document: dict[str, Any], eight_models: Path
) -> None:
    template = json.loads(eight_models.read_text())
    added = len(_eight_models(enterprise_document)) - len(enterprise_document["models"])
    per_model = (len(template["Resources"]) - len(enterprise_template["Resources"])) / added
    assert per_model <= RESOURCES_PER_MODEL
    assert len(template["Resources"]) <= RESOURCE_BUDGET * CFN_RESOURCE_LIMIT
    assert eight_models.stat().st_size <= 0.6 * CFN_TEMPLATE_BYTES


def test_adding_models_replaces_no_stateful_resource(
    enterprise_template: dict[str, Any], eight_models: Path
) -> None:
    after = json.loads(eight_models.read_text())
    for type_name in STATEFUL_TYPES:
        if type_name == "AWS::ElasticLoadBalancingV2::TargetGroup":
            continue
        before_ids = stateful_logical_ids(enterprise_template).get(type_name, [])
        assert set(before_ids) <= set(stateful_logical_ids(after).get(type_name, [])), type_name
    assert set(model_target_groups(enterprise_template)) < set(model_target_groups(after))
    assert default_target_group(enterprise_template) == default_target_group(after)


@pytest.fixture(scope="module")
def nlb_variant(enterprise_document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    models = [
        dict(m, listener_port=port)
        for m, port in zip(enterprise_document["models"], (8443, 9443, 10443), strict=True)
    ]
    config = variant(
        enterprise_document,
        {
            "models": models,
            "ingress": {
                "kind": "nlb",
                "target_optimizer": {"enabled": False},
                "waf": {"enabled": False},
                "lcu_reservation": None,
            },
        },
    )
    # Both packs gate this synth too; tests/tiers/test_upstream.py builds the same variant and
    # shares it (tests/assemblies.py).
    return shared_assembly([config], tmp_path_factory)


def test_nlb_variant_listens_per_model_on_static_addresses(nlb_variant: Path) -> None:
    template = json.loads((nlb_variant / "gpufarm-enterprise.template.json").read_text())
    nlbs = [
        lb["Properties"]
        for k, lb in resources(template, "AWS::ElasticLoadBalancingV2::LoadBalancer").items()
        if lb["Properties"].get("Type") == "network" and k.startswith("Ingress")
    ]
    (nlb,) = nlbs
    assert nlb["Scheme"] == "internet-facing"
    assert len(nlb["SubnetMappings"]) == len(ENTERPRISE.environment.availability_zones)
    assert all("AllocationId" in m for m in nlb["SubnetMappings"])
    ports = sorted(
        listener["Properties"]["Port"]
        for k, listener in resources(template, "AWS::ElasticLoadBalancingV2::Listener").items()
        if k.startswith("Ingress")
    )
    assert ports == [443, 8443, 9443, 10443]  # the gateway's and one per model
    assert all(
        listener["Properties"]["Protocol"] == "TLS"
        for k, listener in resources(template, "AWS::ElasticLoadBalancingV2::Listener").items()
        if k.startswith("Ingress")
    )
    assert cfn_lint_errors(nlb_variant / "gpufarm-enterprise.template.json") == []


def test_nlb_variant_alarms_on_network_metrics(nlb_variant: Path) -> None:
    template = json.loads((nlb_variant / "gpufarm-enterprise.template.json").read_text())
    alarms = [a["Properties"] for a in resources(template, "AWS::CloudWatch::Alarm").values()]
    assert {a["Namespace"] for a in alarms} == {"AWS/NetworkELB"}
    unhealthy = [a for a in alarms if a["MetricName"] == "UnHealthyHostCount"]
    assert len(unhealthy) == len(ENTERPRISE.models) + 1  # and the gateway's listener


def test_nlb_variant_dashboard_charts_network_metrics(nlb_variant: Path) -> None:
    template = json.loads((nlb_variant / "gpufarm-enterprise.template.json").read_text())
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "AWS/NetworkELB" in body and "NewFlowCount" in body
    assert "AWS/ApplicationELB" not in body


def test_nlb_variant_bills_every_resource_type(nlb_variant: Path) -> None:
    # The NLB's Elastic IPs per AZ, its listeners per model, no WAF (tests/tiers/billing_walk.py).
    template = json.loads((nlb_variant / "gpufarm-enterprise.template.json").read_text())
    assert costing_gaps(template) == []
