"""The production tier, synthesized once: what it deploys, and that it passes the compliance gates.

Expected values come from the preset (`PRODUCTION`), so each test states the rule that ties the
template to the config rather than a copy of the output.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufarm.config import load_preset
from gpufarm.config.fsx_capacity import fsx_storage_capacity_gib
from gpufarm.config.model import CapacityType, PoolPurpose
from gpufarm.k8s.autoscaling import queue_query, wake_query, wake_window_seconds
from gpufarm.k8s.labels import nodepool_name, workload_name
from gpufarm.k8s.storage import fsx_sub_path
from tests.conftest import PLACEHOLDER_ANNOTATION, cfn_lint_errors
from tests.tiers.helpers import (
    application_load_balancer,
    client_listener,
    flatten,
    manifest_of,
    manifests,
    model_target_groups,
    only,
    resources,
    stateful_logical_ids,
)

SNAPSHOT = Path(__file__).parent / "snapshots" / "production-stateful-logical-ids.json"
PRODUCTION = load_preset("production")
OPTIMIZER = PRODUCTION.ingress.target_optimizer


def _of_kind(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [m for m in manifests(template) if m["kind"] == kind]


def _helm(template: dict[str, Any], chart: str) -> dict[str, Any]:
    found = [
        r
        for r in resources(template, "Custom::AWSCDK-EKS-HelmChart").values()
        if r["Properties"].get("Chart") == chart
    ]
    assert len(found) == 1, f"expected one {chart} chart, got {len(found)}"
    return found[0]


def _depends_on(resource: dict[str, Any]) -> set[str]:
    value = resource.get("DependsOn", [])
    return {value} if isinstance(value, str) else set(value)


def _logical_id_of(template: dict[str, Any], type_name: str, **properties: Any) -> str:
    found = [
        k
        for k, v in resources(template, type_name).items()
        if all(v["Properties"].get(p) == want for p, want in properties.items())
    ]
    assert len(found) == 1, f"expected one {type_name} with {properties}, got {found}"
    return found[0]


# ----------------------------------------------------------------------------- network and cluster


def test_network_spans_three_azs_with_a_nat_gateway_each(production_template: dict[str, Any]) -> None:
    nats = resources(production_template, "AWS::EC2::NatGateway")
    assert len(nats) == len(PRODUCTION.environment.availability_zones) == 3
    subnets = resources(production_template, "AWS::EC2::Subnet").values()
    assert {s["Properties"]["AvailabilityZone"] for s in subnets} == set(
        PRODUCTION.environment.availability_zones
    )


def test_endpoints_serve_karpenter_and_keda(production_template: dict[str, Any]) -> None:
    services = json.dumps(
        [
            e["Properties"]["ServiceName"]
            for e in resources(production_template, "AWS::EC2::VPCEndpoint").values()
        ]
    )
    for service in ("sqs", "ec2", "ssm", "eks", "eks-auth", "aps-workspaces"):
        assert f".{service}" in services, service


def test_cluster_endpoint_is_private_and_not_auto_mode(production_template: dict[str, Any]) -> None:
    _, cluster = only(production_template, "AWS::EKS::Cluster")
    props = cluster["Properties"]
    assert props["ResourcesVpcConfig"]["EndpointPublicAccess"] is False
    assert props["ResourcesVpcConfig"]["EndpointPrivateAccess"] is True
    assert props["ComputeConfig"] == {"Enabled": False}
    # Every core add-on is an EKS add-on, so EKS must not install its own copies too.
    assert props["BootstrapSelfManagedAddons"] is False


def test_core_addons_are_eks_addons(production_template: dict[str, Any]) -> None:
    names = {a["Properties"]["AddonName"] for a in resources(production_template, "AWS::EKS::Addon").values()}
    assert {a.value for a in PRODUCTION.cluster.core_addons} <= names


def test_every_node_enforces_network_policies_through_the_vpc_cni_addon(
    production_template: dict[str, Any],
) -> None:
    # One VPC CNI for the system node group and every Karpenter node, its network policy agent
    # on (EKS user guide, cni-network-policy-configure); Auto Mode's ConfigMap is not applied.
    (cni,) = [
        a
        for a in resources(production_template, "AWS::EKS::Addon").values()
        if a["Properties"]["AddonName"] == "vpc-cni"
    ]
    assert json.loads(cni["Properties"]["ConfigurationValues"]) == {"enableNetworkPolicy": "true"}
    assert not [m for m in manifests(production_template) if m["metadata"]["name"] == "amazon-vpc-cni"]


def test_system_node_group_is_small_on_demand_al2023(production_template: dict[str, Any]) -> None:
    _, group = only(production_template, "AWS::EKS::Nodegroup")
    props = group["Properties"]
    nodes = PRODUCTION.cluster.system_nodes
    assert props["AmiType"] == "AL2023_x86_64_STANDARD"
    assert props["CapacityType"] == "ON_DEMAND"
    assert props["InstanceTypes"] == nodes.instance_types
    assert props["ScalingConfig"] == {
        "MinSize": nodes.min_size,
        "DesiredSize": nodes.desired_size,
        "MaxSize": nodes.max_size,
    }


# ----------------------------------------------------------------------------- Karpenter


def test_interruption_queue_keeps_messages_300s_encrypted(production_template: dict[str, Any]) -> None:
    _, queue = only(production_template, "AWS::SQS::Queue")
    assert queue["Properties"]["MessageRetentionPeriod"] == 300
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    _, policy = only(production_template, "AWS::SQS::QueuePolicy")
    denies = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert any(s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}} for s in denies)


def test_eventbridge_rules_cover_every_interruption_signal(production_template: dict[str, Any]) -> None:
    queue_id, _ = only(production_template, "AWS::SQS::Queue")
    detail_types = set()
    for rule in resources(production_template, "AWS::Events::Rule").values():
        detail_types |= set(rule["Properties"]["EventPattern"]["detail-type"])
        assert [t["Arn"] for t in rule["Properties"]["Targets"]] == [{"Fn::GetAtt": [queue_id, "Arn"]}]
    assert detail_types == {
        "AWS Health Event",
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "EC2 Capacity Reservation Instance Interruption Warning",
    }


def test_karpenter_chart_is_pinned_and_knows_cluster_and_queue(production_template: dict[str, Any]) -> None:
    chart = _helm(production_template, "karpenter")["Properties"]
    assert chart["Version"] == PRODUCTION.karpenter.chart_version
    assert chart["Repository"] == "oci://public.ecr.aws/karpenter/karpenter"
    settings = json.loads(flatten(chart["Values"]))["settings"]
    cluster_id, _ = only(production_template, "AWS::EKS::Cluster")
    queue_id, _ = only(production_template, "AWS::SQS::Queue")
    assert settings["clusterName"] == f"<Ref:{cluster_id}>"
    assert settings["interruptionQueue"] == f"<GetAtt:{queue_id}.QueueName>"


def test_karpenter_controller_uses_pod_identity(production_template: dict[str, Any]) -> None:
    associations = resources(production_template, "AWS::EKS::PodIdentityAssociation").values()
    assert {"Namespace": PRODUCTION.karpenter.namespace, "ServiceAccount": "karpenter"} in [
        {k: a["Properties"][k] for k in ("Namespace", "ServiceAccount")} for a in associations
    ]


def test_karpenter_nodes_join_through_an_ec2_access_entry(production_template: dict[str, Any]) -> None:
    entries = [
        e
        for e in resources(production_template, "AWS::EKS::AccessEntry").values()
        if e["Properties"].get("Type") == "EC2_LINUX"
    ]
    assert len(entries) == 1


def test_private_subnets_are_tagged_for_discovery(production_template: dict[str, Any]) -> None:
    tagged = [
        k
        for k, s in resources(production_template, "AWS::EC2::Subnet").items()
        if {"Key": "karpenter.sh/discovery", "Value": PRODUCTION.stack_name} in s["Properties"]["Tags"]
    ]
    assert tagged and all("Private" in k for k in tagged)
    assert len(tagged) == len(PRODUCTION.environment.availability_zones)


@pytest.mark.parametrize("pool", PRODUCTION.node_pools, ids=[p.name for p in PRODUCTION.node_pools])
def test_each_pool_has_a_nodeclass_and_nodepool(production_template: dict[str, Any], pool: Any) -> None:
    name = nodepool_name(pool.name)
    node_class = manifest_of(production_template, "EC2NodeClass", name)
    node_pool = manifest_of(production_template, "NodePool", name)
    assert node_pool["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": name,
    }
    # Karpenter's aliases write a Bottlerocket version with a leading v (`bottlerocket@v1.53.0`).
    version = f"v{pool.ami_version}" if pool.ami_family.value == "bottlerocket" else pool.ami_version
    assert node_class["spec"]["amiSelectorTerms"] == [{"alias": f"{pool.ami_family.value}@{version}"}]
    requirements = {r["key"]: r["values"] for r in node_pool["spec"]["template"]["spec"]["requirements"]}
    assert requirements["karpenter.sh/capacity-type"] == [c.value for c in pool.capacity_types]
    assert requirements["karpenter.k8s.aws/instance-family"] == pool.instance_families
    assert node_pool["spec"]["weight"] == pool.nodepool_weight
    assert node_pool["spec"]["limits"] == {"nvidia.com/gpu": str(pool.gpu_limit)}
    assert node_pool["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert {"key": "nvidia.com/gpu", "effect": "NoSchedule"} in node_pool["spec"]["template"]["spec"][
        "taints"
    ]


def test_spot_only_on_the_batch_pool_and_serving_outweighs_it(production_template: dict[str, Any]) -> None:
    pools = {p["metadata"]["name"]: p for p in _of_kind(production_template, "NodePool")}
    weights = {}
    for pool in PRODUCTION.node_pools:
        spec = pools[nodepool_name(pool.name)]["spec"]
        types = next(
            r for r in spec["template"]["spec"]["requirements"] if r["key"] == "karpenter.sh/capacity-type"
        )
        assert ("spot" in types["values"]) is (pool.purpose is PoolPurpose.BATCH)
        weights[pool.purpose] = spec["weight"]
    assert weights[PoolPurpose.SERVING] > weights[PoolPurpose.BATCH]


def test_nodepools_are_applied_after_the_karpenter_chart(production_template: dict[str, Any]) -> None:
    chart_id = _logical_id_of(production_template, "Custom::AWSCDK-EKS-HelmChart", Chart="karpenter")
    for key, resource in resources(production_template, "Custom::AWSCDK-EKS-KubernetesResource").items():
        if "GpuPool" in key:
            assert chart_id in _depends_on(resource), key


def test_nvidia_device_plugin_is_installed_for_al2023(production_template: dict[str, Any]) -> None:
    chart = _helm(production_template, "nvidia-device-plugin")["Properties"]
    assert chart["Version"] == PRODUCTION.karpenter.nvidia_device_plugin_chart_version


def test_critical_models_never_run_on_spot(production_template: dict[str, Any]) -> None:
    spot_pools = {
        nodepool_name(p.name) for p in PRODUCTION.node_pools if CapacityType.SPOT in p.capacity_types
    }
    for model in PRODUCTION.models:
        deployment = manifest_of(production_template, "Deployment", workload_name(model.name))
        pool = deployment["spec"]["template"]["spec"]["nodeSelector"]["karpenter.sh/nodepool"]
        if model.critical:
            assert pool not in spot_pools, model.name


# ----------------------------------------------------------------------------- FSx model store


def test_fsx_is_persistent_2_sized_from_the_models_and_encrypted(production_template: dict[str, Any]) -> None:
    _, fs = only(production_template, "AWS::FSx::FileSystem")
    props = fs["Properties"]
    assert props["FileSystemType"] == "LUSTRE"
    assert props["StorageCapacity"] == fsx_storage_capacity_gib(PRODUCTION)
    lustre = props["LustreConfiguration"]
    assert lustre["DeploymentType"] == "PERSISTENT_2"
    assert lustre["PerUnitStorageThroughput"] == PRODUCTION.model_store.fsx.throughput_per_tib
    key_id = props["KmsKeyId"]["Fn::GetAtt"][0]
    assert production_template["Resources"][key_id]["Properties"]["EnableKeyRotation"] is True


def test_fsx_and_its_key_are_retained(production_template: dict[str, Any]) -> None:
    _, fs = only(production_template, "AWS::FSx::FileSystem")
    assert fs["DeletionPolicy"] == fs["UpdateReplacePolicy"] == "Retain"
    key = production_template["Resources"][fs["Properties"]["KmsKeyId"]["Fn::GetAtt"][0]]
    assert key["DeletionPolicy"] == "Retain"


def test_fsx_imports_the_model_bucket(production_template: dict[str, Any]) -> None:
    fs_id, _ = only(production_template, "AWS::FSx::FileSystem")
    _, dra = only(production_template, "AWS::FSx::DataRepositoryAssociation")
    props = dra["Properties"]
    assert props["FileSystemId"] == {"Ref": fs_id}
    assert props["DataRepositoryPath"] == PRODUCTION.model_store.fsx.import_path
    assert props["S3"]["AutoImportPolicy"]["Events"] == ["NEW", "CHANGED", "DELETED"]


def test_fsx_accepts_lustre_ports_only_from_cluster_and_itself(production_template: dict[str, Any]) -> None:
    _, fs = only(production_template, "AWS::FSx::FileSystem")
    fs_sg = fs["Properties"]["SecurityGroupIds"][0]["Fn::GetAtt"][0]
    cluster_id, _ = only(production_template, "AWS::EKS::Cluster")
    rules = [
        r["Properties"]
        for r in resources(production_template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [fs_sg, "GroupId"]}
    ]
    inline = production_template["Resources"][fs_sg]["Properties"].get("SecurityGroupIngress", [])
    ports = {(r["FromPort"], r["ToPort"]) for r in rules + inline}
    assert ports == {(988, 988), (1018, 1023)}
    sources = {json.dumps(r["SourceSecurityGroupId"]) for r in rules + inline}
    assert sources == {
        json.dumps({"Fn::GetAtt": [fs_sg, "GroupId"]}),
        json.dumps({"Fn::GetAtt": [cluster_id, "ClusterSecurityGroupId"]}),
    }
    assert all("CidrIp" not in r for r in rules + inline)


def test_fsx_csi_driver_is_an_addon_and_the_claim_is_static(production_template: dict[str, Any]) -> None:
    addons = {
        a["Properties"]["AddonName"]: a for a in resources(production_template, "AWS::EKS::Addon").values()
    }
    assert addons["aws-fsx-csi-driver"]["Properties"]["PodIdentityAssociations"][0]["ServiceAccount"] == (
        "fsx-csi-controller-sa"
    )
    fs_id, _ = only(production_template, "AWS::FSx::FileSystem")
    claim = manifest_of(production_template, "PersistentVolumeClaim", "fsx-models")
    volume = manifest_of(production_template, "PersistentVolume", claim["spec"]["volumeName"])
    assert volume["spec"]["csi"]["driver"] == "fsx.csi.aws.com"
    assert volume["spec"]["csi"]["volumeHandle"] == f"<Ref:{fs_id}>"


@pytest.mark.parametrize("model", PRODUCTION.models, ids=[m.name for m in PRODUCTION.models])
def test_vllm_loads_each_model_from_its_fsx_folder(production_template: dict[str, Any], model: Any) -> None:
    deployment = manifest_of(production_template, "Deployment", workload_name(model.name))
    pod = deployment["spec"]["template"]["spec"]
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in pod["volumes"]
        if "persistentVolumeClaim" in v
    }
    (engine,) = [c for c in pod["containers"] if c["name"] == model.engine.value]
    (mount,) = [m for m in engine["volumeMounts"] if claims.get(m["name"]) == "fsx-models"]
    assert mount["subPath"] == fsx_sub_path(PRODUCTION.model_store.fsx.import_path, model.weights)
    # vLLM takes the weights as its first argument, SGLang after --model-path.
    assert mount["mountPath"] in engine["args"][:2]


# ----------------------------------------------------------------------------- Target Optimizer


def test_target_groups_carry_the_control_port_and_receive_on_the_data_port(
    production_template: dict[str, Any],
) -> None:
    groups = model_target_groups(production_template)
    assert len(groups) == len(PRODUCTION.models)
    for group in groups.values():
        props = group["Properties"]
        assert props["TargetControlPort"] == OPTIMIZER.control_port
        assert props["Port"] == OPTIMIZER.data_port
        assert props["HealthCheckPort"] == "traffic-port"


def test_each_models_target_group_checks_its_engines_readiness_path(
    production_template: dict[str, Any],
) -> None:
    # The SGLang model's pods are ready at /ready, the vLLM model's at /health: the load balancer
    # asks each the path its own pods' readiness probe asks.
    paths = sorted(
        g["Properties"]["HealthCheckPath"] for g in model_target_groups(production_template).values()
    )
    assert [m.engine.value for m in PRODUCTION.models] == ["vllm", "sglang"]
    assert paths == ["/health", "/ready"]
    for model in PRODUCTION.models:
        deployment = manifest_of(production_template, "Deployment", workload_name(model.name))
        (engine,) = [
            c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == model.engine.value
        ]
        expected = "/ready" if model.engine.value == "sglang" else "/health"
        assert engine["readinessProbe"]["httpGet"]["path"] == expected


@pytest.mark.parametrize("model", PRODUCTION.models, ids=[m.name for m in PRODUCTION.models])
def test_agent_sidecar_matches_its_target_group(production_template: dict[str, Any], model: Any) -> None:
    deployment = manifest_of(production_template, "Deployment", workload_name(model.name))
    (agent,) = [
        c
        for c in deployment["spec"]["template"]["spec"]["initContainers"]
        if c.get("restartPolicy") == "Always"
    ]
    env = {e["name"]: e["value"] for e in agent["env"]}
    assert env["TARGET_CONTROL_DATA_ADDRESS"].endswith(f":{OPTIMIZER.data_port}")
    assert env["TARGET_CONTROL_CONTROL_ADDRESS"].endswith(f":{OPTIMIZER.control_port}")
    assert env["TARGET_CONTROL_DESTINATION"] == f"127.0.0.1:{PRODUCTION.serving.port}"
    assert env["TARGET_CONTROL_MAX_CONCURRENCY"] == str(model.max_concurrency)
    binding = [
        b
        for b in _of_kind(production_template, "TargetGroupBinding")
        if b["spec"]["serviceRef"]["name"] == workload_name(model.name)
    ]
    (binding,) = binding
    assert binding["apiVersion"] == "elbv2.k8s.aws/v1beta1"
    assert binding["spec"]["serviceRef"]["port"] == OPTIMIZER.data_port
    service = manifest_of(production_template, "Service", workload_name(model.name))
    assert {p["port"]: p["targetPort"] for p in service["spec"]["ports"]}[
        OPTIMIZER.data_port
    ] == OPTIMIZER.data_port


def test_alb_reaches_pods_only_on_data_and_control_ports(production_template: dict[str, Any]) -> None:
    _, lb = application_load_balancer(production_template)
    alb_sg = lb["Properties"]["SecurityGroups"][0]
    from_alb = [
        r["Properties"]
        for r in resources(production_template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"].get("SourceSecurityGroupId") == alb_sg
    ]
    assert {(r["FromPort"], r["ToPort"]) for r in from_alb} == {
        (OPTIMIZER.data_port, OPTIMIZER.data_port),
        (OPTIMIZER.control_port, OPTIMIZER.control_port),
        # The fallback gateway behind the default route.
        (PRODUCTION.fallback.port, PRODUCTION.fallback.port),
    }


def test_bindings_wait_for_the_load_balancer_controller(production_template: dict[str, Any]) -> None:
    controller = _logical_id_of(
        production_template, "Custom::AWSCDK-EKS-HelmChart", Chart="aws-load-balancer-controller"
    )
    bindings = [
        k for k in resources(production_template, "Custom::AWSCDK-EKS-KubernetesResource") if "Binding" in k
    ]
    assert len(bindings) == len(PRODUCTION.models) + 1  # and the gateway's
    for key in bindings:
        assert controller in _depends_on(production_template["Resources"][key]), key


# ----------------------------------------------------------------------------- ingress hardening


def test_internet_facing_alb_serves_tls_1_2_and_up_only(production_template: dict[str, Any]) -> None:
    _, lb = application_load_balancer(production_template)
    assert lb["Properties"]["Scheme"] == "internet-facing"
    _, listener = client_listener(production_template)
    assert listener["Properties"]["Protocol"] == "HTTPS"
    assert listener["Properties"]["SslPolicy"] == "ELBSecurityPolicy-TLS13-1-2-2021-06"


def test_waf_rate_limits_and_applies_managed_rules_to_the_alb(production_template: dict[str, Any]) -> None:
    acl_id, acl = only(production_template, "AWS::WAFv2::WebACL")
    rules = {r["Name"]: r for r in acl["Properties"]["Rules"]}
    assert (
        rules["RateLimitPerIp"]["Statement"]["RateBasedStatement"]["Limit"]
        == PRODUCTION.ingress.waf.rate_limit_per_5_minutes
    )
    common = rules["AWSManagedRulesCommonRuleSet"]["Statement"]["ManagedRuleGroupStatement"]
    # Prompts are longer than the 8 KB of body the ALB lets WAF inspect: count, never block.
    assert common["RuleActionOverrides"] == [{"Name": "SizeRestrictions_BODY", "ActionToUse": {"Count": {}}}]
    assert "AWSManagedRulesKnownBadInputsRuleSet" in rules
    lb_id, _ = application_load_balancer(production_template)
    _, association = only(production_template, "AWS::WAFv2::WebACLAssociation")
    assert association["Properties"] == {
        "ResourceArn": {"Ref": lb_id},
        "WebACLArn": {"Fn::GetAtt": [acl_id, "Arn"]},
    }


# ----------------------------------------------------------------------------- autoscaling


@pytest.mark.parametrize("model", PRODUCTION.models, ids=[m.name for m in PRODUCTION.models])
def test_each_autoscaled_model_has_a_scaled_object(production_template: dict[str, Any], model: Any) -> None:
    assert model.autoscaling is not None
    scaled = manifest_of(production_template, "ScaledObject", workload_name(model.name))
    spec = scaled["spec"]
    assert spec["scaleTargetRef"]["name"] == workload_name(model.name)
    assert spec["minReplicaCount"] == model.autoscaling.min_replicas
    assert spec["maxReplicaCount"] == model.autoscaling.max_replicas
    # Each engine's own queue series (vllm:num_requests_waiting, sglang:num_queue_reqs).
    query = queue_query(model, PRODUCTION.serving.namespace)
    queue = next(t for t in spec["triggers"] if query in t["metadata"]["query"])
    assert queue["metadata"]["serverAddress"].startswith(
        f"https://aps-workspaces.{PRODUCTION.environment.region}."
    )
    assert float(queue["metadata"]["threshold"]) == model.autoscaling.queue_target
    # KEDA owns the replica count: the Deployment must not reset it on every deploy.
    assert "replicas" not in manifest_of(production_template, "Deployment", workload_name(model.name))["spec"]


def test_only_non_critical_models_scale_to_zero(production_template: dict[str, Any]) -> None:
    for model in PRODUCTION.models:
        scaled = manifest_of(production_template, "ScaledObject", workload_name(model.name))
        assert (scaled["spec"]["minReplicaCount"] == 0) is (not model.critical), model.name


def test_the_parked_model_wakes_on_the_gateways_counter_which_the_gateway_serves_and_the_scraper_reads(
    production_template: dict[str, Any],
) -> None:
    batch = next(
        m for m in PRODUCTION.models if m.autoscaling is not None and m.autoscaling.min_replicas == 0
    )
    triggers = {
        t["name"]: t
        for t in manifest_of(production_template, "ScaledObject", workload_name(batch.name))["spec"][
            "triggers"
        ]
    }
    # The query in the template is the one the end-to-end test evaluates (tests/e2e/test_wake_from_zero.py).
    assert triggers["wake"]["metadata"]["query"] == wake_query(
        batch,
        PRODUCTION.serving.namespace,
        window_seconds=wake_window_seconds(
            batch.autoscaling, PRODUCTION.observability.prometheus.scrape_interval_seconds
        ),
    )
    assert "[90s]" in triggers["wake"]["metadata"]["query"]  # 2 x (30 s scrape + 15 s poll)
    # The gateway counts the parked model's client-facing name and serves the count on 9090.
    gateway = manifest_of(production_template, "Deployment", "gateway")
    (container,) = gateway["spec"]["template"]["spec"]["containers"]
    assert {"name": "metrics", "containerPort": 9090, "protocol": "TCP"} in container["ports"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert json.loads(env["GPUFARM_DEMAND_MODELS"]) == [batch.api_model_name]
    assert container["args"][container["args"].index("--prometheus_metrics_port") + 1] == "9090"
    config_map = manifest_of(production_template, "ConfigMap", "gateway-config")
    assert (
        "gpufarm_demand.handler"
        in yaml.safe_load(config_map["data"]["config.yaml"])["litellm_settings"]["callbacks"]
    )
    assert "gpufarm_demand.py" in config_map["data"]


def test_keda_may_query_only_the_workspace(production_template: dict[str, Any]) -> None:
    workspace_id, _ = only(production_template, "AWS::APS::Workspace")
    association = next(
        a
        for a in resources(production_template, "AWS::EKS::PodIdentityAssociation").values()
        if a["Properties"]["ServiceAccount"] == "keda-operator"
    )
    role_id = association["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    statements = [
        s
        for p in resources(production_template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert statements == [
        {"Action": "aps:QueryMetrics", "Effect": "Allow", "Resource": {"Fn::GetAtt": [workspace_id, "Arn"]}}
    ]
    assert (
        _helm(production_template, "keda")["Properties"]["Version"]
        == PRODUCTION.autoscaling.keda_chart_version
    )


# ----------------------------------------------------------------------------- observability


def test_managed_scraper_feeds_the_workspace_from_the_cluster(production_template: dict[str, Any]) -> None:
    workspace_id, _ = only(production_template, "AWS::APS::Workspace")
    cluster_id, _ = only(production_template, "AWS::EKS::Cluster")
    _, scraper = only(production_template, "AWS::APS::Scraper")
    props = scraper["Properties"]
    assert props["Destination"]["AmpConfiguration"]["WorkspaceArn"] == {"Fn::GetAtt": [workspace_id, "Arn"]}
    assert props["Source"]["EksConfiguration"]["ClusterArn"] == {"Fn::GetAtt": [cluster_id, "Arn"]}
    jobs = [
        j["job_name"]
        for j in yaml.safe_load(props["ScrapeConfiguration"]["ConfigurationBlob"])["scrape_configs"]
    ]
    # The gateway job: production parks a model at zero, which wakes on the gateway's counter.
    assert set(jobs) == {"vllm", "sglang", "dcgm-exporter", "gateway"}
    interval = yaml.safe_load(props["ScrapeConfiguration"]["ConfigurationBlob"])["global"]["scrape_interval"]
    assert interval == f"{PRODUCTION.observability.prometheus.scrape_interval_seconds}s"


def test_dcgm_exporter_is_deployed(production_template: dict[str, Any]) -> None:
    chart = _helm(production_template, "dcgm-exporter")["Properties"]
    assert chart["Version"] == PRODUCTION.observability.prometheus.dcgm_exporter_chart_version


def test_alarms_cover_errors_latency_health_and_rejections(production_template: dict[str, Any]) -> None:
    alarms = list(resources(production_template, "AWS::CloudWatch::Alarm").values())
    topic_id, _ = only(production_template, "AWS::SNS::Topic")
    metrics = []
    for alarm in alarms:
        props = alarm["Properties"]
        assert props["AlarmActions"] == [{"Ref": topic_id}]
        names = (
            [props["MetricName"]]
            if "MetricName" in props
            else [m["MetricStat"]["Metric"]["MetricName"] for m in props["Metrics"] if "MetricStat" in m]
        )
        metrics += names
    per_target_group = len(PRODUCTION.models) + 1  # and the gateway's
    assert metrics.count("TargetResponseTime") == per_target_group
    assert metrics.count("UnHealthyHostCount") == per_target_group
    assert {"HTTPCode_ELB_5XX_Count", "HTTPCode_Target_5XX_Count", "TargetControlRequestRejectCount"} <= set(
        metrics
    )


def test_p99_alarms_use_the_configured_threshold(production_template: dict[str, Any]) -> None:
    p99 = [
        a["Properties"]
        for a in resources(production_template, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "TargetResponseTime"
    ]
    assert {a["ExtendedStatistic"] for a in p99} == {"p99"}
    assert {a["Threshold"] for a in p99} == {PRODUCTION.observability.alarms.p99_response_seconds}


def test_alarm_topic_is_encrypted(production_template: dict[str, Any]) -> None:
    _, topic = only(production_template, "AWS::SNS::Topic")
    assert "KmsMasterKeyId" in topic["Properties"]


def test_dashboard_has_a_panel_per_model(production_template: dict[str, Any]) -> None:
    _, dashboard = only(production_template, "AWS::CloudWatch::Dashboard")
    assert dashboard["Properties"]["DashboardName"] == PRODUCTION.stack_name
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for model in PRODUCTION.models:
        assert model.name in body


# ----------------------------------------------------------------------------- compliance


def test_cdk_nag_gate_passed_with_no_warning_but_the_placeholders(
    production_template: dict[str, Any], production_dir: Path
) -> None:
    report = json.loads((production_dir / "validation-report.json").read_text())
    findings = {p["pluginName"]: [v["ruleName"] for v in p["violations"]] for p in report["pluginReports"]}
    assert all(p["conclusion"] == "success" for p in report["pluginReports"])
    # The agent, published under ':latest' only, and the images without a confirmed digest warn
    # as placeholders, like the preset's example values (tests/tiers/test_placeholders.py).
    annotations = [r for r in findings.pop("Construct Annotations", []) if r != PLACEHOLDER_ANNOTATION]
    assert annotations == []
    assert all(rules == [] for rules in findings.values()), findings


def test_cfn_lint_reports_no_errors(production_template: dict[str, Any], production_dir: Path) -> None:
    assert cfn_lint_errors(str(production_dir / "gpufarm-production.template.json")) == []


def test_stateful_logical_ids_match_snapshot(production_template: dict[str, Any]) -> None:
    current = stateful_logical_ids(production_template)
    if os.environ.get("GPUFARM_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(json.dumps(current, indent=2) + "\n")
    assert current == json.loads(SNAPSHOT.read_text()), (
        "a stateful resource would be replaced; if intended, rerun with GPUFARM_UPDATE_SNAPSHOTS=1 "
        "and review the diff"
    )
