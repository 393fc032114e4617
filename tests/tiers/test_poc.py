"""The poc tier, synthesized once: what it deploys, and that it passes the compliance gates."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gpufarm.config import load_preset
from gpufarm.core.endpoints import GATEWAY_LISTENER_PORT
from gpufarm.k8s.gateway import route_env_name
from tests.conftest import PLACEHOLDER_ANNOTATION, cfn_lint_errors
from tests.tiers.helpers import (
    client_listener,
    default_target_group,
    gateway_listener,
    manifest_of,
    manifests,
    model_target_groups,
    only,
    resources,
    rules_of,
    stateful_logical_ids,
)

SNAPSHOT = Path(__file__).parent / "snapshots" / "poc-stateful-logical-ids.json"
POC = load_preset("poc")


def _ref(logical_id: str) -> dict[str, str]:
    return {"Ref": logical_id}


def _attributes(props: dict[str, Any], key: str) -> dict[str, Any]:
    return {a["Key"]: a["Value"] for a in props[key]}


# ----------------------------------------------------------------------------- cluster


def test_cluster_runs_auto_mode_with_builtin_cpu_pools(poc_template: dict[str, Any]) -> None:
    _, cluster = only(poc_template, "AWS::EKS::Cluster")
    props = cluster["Properties"]
    assert props["Version"] == POC.cluster.kubernetes_version
    assert props["ComputeConfig"]["Enabled"] is True
    assert props["ComputeConfig"]["NodePools"] == ["system", "general-purpose"]
    assert props["StorageConfig"] == {"BlockStorage": {"Enabled": True}}
    assert props["KubernetesNetworkConfig"]["ElasticLoadBalancing"] == {"Enabled": True}


def test_cluster_encrypts_secrets_with_a_rotating_key(poc_template: dict[str, Any]) -> None:
    _, cluster = only(poc_template, "AWS::EKS::Cluster")
    (config,) = cluster["Properties"]["EncryptionConfig"]
    assert config["Resources"] == ["secrets"]
    key_id = config["Provider"]["KeyArn"]["Fn::GetAtt"][0]
    key = poc_template["Resources"][key_id]
    assert key["Type"] == "AWS::KMS::Key"
    assert key["Properties"]["EnableKeyRotation"] is True


def test_cluster_logs_every_control_plane_log_type(poc_template: dict[str, Any]) -> None:
    _, cluster = only(poc_template, "AWS::EKS::Cluster")
    enabled = [t["Type"] for t in cluster["Properties"]["Logging"]["ClusterLogging"]["EnabledTypes"]]
    assert enabled == ["api", "audit", "authenticator", "controllerManager", "scheduler"]


def test_cluster_public_endpoint_admits_only_configured_cidrs(poc_template: dict[str, Any]) -> None:
    _, cluster = only(poc_template, "AWS::EKS::Cluster")
    vpc_config = cluster["Properties"]["ResourcesVpcConfig"]
    assert vpc_config["EndpointPublicAccess"] is True
    assert vpc_config["EndpointPrivateAccess"] is True
    assert vpc_config["PublicAccessCidrs"] == POC.cluster.public_access_cidrs
    assert "0.0.0.0/0" not in vpc_config["PublicAccessCidrs"]


def test_nodes_and_kubectl_provider_live_in_private_subnets(poc_template: dict[str, Any]) -> None:
    private = {k for k, v in resources(poc_template, "AWS::EC2::Subnet").items() if "Private" in k}
    _, cluster = only(poc_template, "AWS::EKS::Cluster")
    assert {s["Ref"] for s in cluster["Properties"]["ResourcesVpcConfig"]["SubnetIds"]} == private
    handlers = [
        f for f in resources(poc_template, "AWS::Lambda::Function").values() if "VpcConfig" in f["Properties"]
    ]
    assert handlers, "the kubectl provider must run inside the VPC to reach the endpoint"
    for handler in handlers:
        assert {s["Ref"] for s in handler["Properties"]["VpcConfig"]["SubnetIds"]} == private


# ----------------------------------------------------------------------------- network


def test_network_spans_two_azs_with_one_nat(poc_template: dict[str, Any]) -> None:
    azs = sorted(
        {s["Properties"]["AvailabilityZone"] for s in resources(poc_template, "AWS::EC2::Subnet").values()}
    )
    assert azs == POC.environment.availability_zones
    assert len(resources(poc_template, "AWS::EC2::NatGateway")) == 1


def test_network_has_flow_logs_and_the_private_node_endpoints(poc_template: dict[str, Any]) -> None:
    _, flow_log = only(poc_template, "AWS::EC2::FlowLog")
    assert flow_log["Properties"]["TrafficType"] == "ALL"
    services = sorted(
        json.dumps(e["Properties"]["ServiceName"])
        for e in resources(poc_template, "AWS::EC2::VPCEndpoint").values()
    )
    expected = sorted(
        [
            json.dumps(f"com.amazonaws.us-east-1.{name}")
            # bedrock-runtime: the fallback gateway's, open to the nodes only (tests/tiers/test_fallback.py).
            for name in ("ecr.api", "ecr.dkr", "sts", "logs", "bedrock-runtime")
        ]
    )
    interface = [s for s in services if "s3" not in s]
    assert interface == expected
    assert any("s3" in s for s in services), "S3 gateway endpoint expected"


# ----------------------------------------------------------------------------- GPU pool


def test_gpu_nodepool_uses_auto_mode_nodeclass_and_taint(poc_template: dict[str, Any]) -> None:
    pool = manifest_of(poc_template, "NodePool", "gpu-l40s")
    spec = pool["spec"]["template"]["spec"]
    assert spec["nodeClassRef"] == {"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "default"}
    requirements = {r["key"]: r["values"] for r in spec["requirements"]}
    assert requirements["eks.amazonaws.com/instance-family"] == ["g6e"]
    assert requirements["karpenter.sh/capacity-type"] == ["on-demand"]
    assert spec["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert pool["spec"]["limits"] == {"nvidia.com/gpu": str(POC.node_pools[0].gpu_limit)}
    assert pool["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"


def test_auto_mode_enforces_network_policies_on_the_gpu_nodes(poc_template: dict[str, Any]) -> None:
    # Auto Mode's network policy controller is off until kube-system/amazon-vpc-cni says
    # otherwise (EKS user guide, auto-net-pol, Step 1); then nodes of every NodeClass enforce,
    # the built-in `default` one the GPU pool uses included. There is no VPC CNI add-on.
    config_map = manifest_of(poc_template, "ConfigMap", "amazon-vpc-cni")
    assert config_map["metadata"]["namespace"] == "kube-system"
    assert config_map["data"] == {"enable-network-policy-controller": "true"}
    addons = {a["Properties"]["AddonName"] for a in resources(poc_template, "AWS::EKS::Addon").values()}
    assert "vpc-cni" not in addons
    # No NodeClass of gpufarm's own: the ConfigMap is all the built-in one needs.
    assert not [m for m in manifests(poc_template) if m["kind"] == "NodeClass"]


# ----------------------------------------------------------------------------- serving


def test_each_model_has_a_deployment_on_its_gpu_pool(poc_template: dict[str, Any]) -> None:
    for model in POC.models:
        deployment = manifest_of(poc_template, "Deployment", f"vllm-{model.name}")
        pod = deployment["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"karpenter.sh/nodepool": "gpu-l40s"}
        (container,) = pod["containers"]
        assert container["image"] == POC.serving.vllm_image
        assert container["resources"]["limits"]["nvidia.com/gpu"] == str(model.gpus)
        args = container["args"]
        assert args[0] == model.weights
        assert args[args.index("--tensor-parallel-size") + 1] == str(model.gpus)


def test_serving_objects_are_applied_after_namespace_and_nodepool(poc_template: dict[str, Any]) -> None:
    kube = resources(poc_template, "Custom::AWSCDK-EKS-KubernetesResource")
    by_kind = {}
    for logical_id, resource in kube.items():
        text = json.dumps(resource["Properties"]["Manifest"])
        if "gateway" in text:  # the fallback gateway's objects have their own ordering tests
            continue
        for kind in ("Namespace", "NodePool", "Deployment", "TargetGroupBinding"):
            if f'\\"kind\\":\\"{kind}\\"' in text:
                by_kind[kind] = logical_id
    deployment = kube[by_kind["Deployment"]]
    assert by_kind["Namespace"] in deployment["DependsOn"]
    assert by_kind["NodePool"] in deployment["DependsOn"]
    assert by_kind["Deployment"] in kube[by_kind["TargetGroupBinding"]]["DependsOn"]


# ----------------------------------------------------------------------------- ingress


def test_alb_is_internal_with_long_idle_timeout_and_access_logs(poc_template: dict[str, Any]) -> None:
    _, alb = only(poc_template, "AWS::ElasticLoadBalancingV2::LoadBalancer")
    props = alb["Properties"]
    assert props["Scheme"] == "internal"
    attributes = _attributes(props, "LoadBalancerAttributes")
    assert attributes["idle_timeout.timeout_seconds"] == str(POC.ingress.idle_timeout_seconds)
    assert attributes["access_logs.s3.enabled"] == "true"
    bucket_id = attributes["access_logs.s3.bucket"]["Ref"]
    bucket = poc_template["Resources"][bucket_id]["Properties"]
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"
    ] == {"SSEAlgorithm": "AES256"}


def test_internal_alb_listens_on_http_only(poc_template: dict[str, Any]) -> None:
    _, listener = client_listener(poc_template)
    assert (listener["Properties"]["Protocol"], listener["Properties"]["Port"]) == ("HTTP", 80)
    # Paths that name no model go to the fallback gateway.
    assert listener["Properties"]["DefaultActions"] == [
        {"Type": "forward", "TargetGroupArn": _ref(str(default_target_group(poc_template)))}
    ]


def test_target_group_per_model_routes_least_outstanding(poc_template: dict[str, Any]) -> None:
    groups = model_target_groups(poc_template)
    assert len(groups) == len(POC.models)
    for group in groups.values():
        props = group["Properties"]
        assert (props["TargetType"], props["Port"], props["HealthCheckPath"]) == ("ip", 8000, "/health")
        attributes = _attributes(props, "TargetGroupAttributes")
        assert attributes["load_balancing.algorithm.type"] == "least_outstanding_requests"
        # The ELB API refuses slow start together with least outstanding requests.
        assert "slow_start.duration_seconds" not in attributes
        assert attributes["deregistration_delay.timeout_seconds"] == str(
            POC.ingress.deregistration_delay_seconds
        )
        assert {
            "Key": "eks:eks-cluster-name",
            "Value": {"Ref": only(poc_template, "AWS::EKS::Cluster")[0]},
        } in props["Tags"]


def test_listener_rule_reaches_each_model_by_path(poc_template: dict[str, Any]) -> None:
    (group_id,) = model_target_groups(poc_template)
    (rule,) = rules_of(poc_template, client_listener(poc_template)[0])
    props = rule["Properties"]
    name = POC.models[0].name
    assert props["Conditions"] == [{"Field": "path-pattern", "PathPatternConfig": {"Values": [f"/{name}/*"]}}]
    assert props["Transforms"] == [
        {
            "Type": "url-rewrite",
            "UrlRewriteConfig": {"Rewrites": [{"Regex": f"^/{name}/(.*)$", "Replace": "/$1"}]},
        }
    ]
    assert props["Actions"] == [{"Type": "forward", "TargetGroupArn": _ref(group_id)}]


def test_the_gateway_calls_the_model_route_on_its_own_listener(poc_template: dict[str, Any]) -> None:
    """ADR 0050: an internal ALB without WAF gives the gateway the model routes (LOR and all)."""
    found = gateway_listener(poc_template)
    assert found is not None
    listener_id, listener = found
    props = listener["Properties"]
    assert (props["Protocol"], props["Port"]) == ("HTTP", GATEWAY_LISTENER_PORT)
    assert props["DefaultActions"][0]["Type"] == "fixed-response"
    # The same rule as the client listener's: same path, rewrite, priority and target group.
    (client_rule,) = rules_of(poc_template, client_listener(poc_template)[0])
    (gateway_rule,) = rules_of(poc_template, listener_id)
    same = ("Conditions", "Transforms", "Actions", "Priority")
    assert {k: gateway_rule["Properties"][k] for k in same} == {k: client_rule["Properties"][k] for k in same}
    # Only the cluster security group (the pods') reaches that port.
    alb_sg = only(poc_template, "AWS::ElasticLoadBalancingV2::LoadBalancer")[1]["Properties"][
        "SecurityGroups"
    ][0]
    to_port = [
        r["Properties"]
        for r in resources(poc_template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == alb_sg and r["Properties"]["FromPort"] == GATEWAY_LISTENER_PORT
    ]
    assert [(r["ToPort"], r["SourceSecurityGroupId"]) for r in to_port] == [
        (
            GATEWAY_LISTENER_PORT,
            {"Fn::GetAtt": [only(poc_template, "AWS::EKS::Cluster")[0], "ClusterSecurityGroupId"]},
        )
    ]
    # The gateway pods read each model's route on it from their environment.
    model = POC.models[0]
    container = manifest_of(poc_template, "Deployment", "gateway")["spec"]["template"]["spec"]["containers"][
        0
    ]
    env = {e["name"]: e["value"] for e in container["env"]}
    lb_id = only(poc_template, "AWS::ElasticLoadBalancingV2::LoadBalancer")[0]
    assert (
        env[route_env_name(model)]
        == f"http://<GetAtt:{lb_id}.DNSName>:{GATEWAY_LISTENER_PORT}/{model.name}/v1"
    )


def test_pods_join_target_groups_through_auto_mode_bindings(poc_template: dict[str, Any]) -> None:
    (group_id,) = model_target_groups(poc_template)
    name = POC.models[0].name
    binding = manifest_of(poc_template, "TargetGroupBinding", f"vllm-{name}")
    assert binding["apiVersion"] == "eks.amazonaws.com/v1"
    assert binding["spec"] == {
        "serviceRef": {"name": f"vllm-{name}", "port": 8000},
        "targetGroupARN": f"<Ref:{group_id}>",
        "targetType": "ip",
    }


def test_only_the_alb_reaches_pods_and_only_on_the_vllm_port(poc_template: dict[str, Any]) -> None:
    alb_sg = only(poc_template, "AWS::ElasticLoadBalancingV2::LoadBalancer")[1]["Properties"][
        "SecurityGroups"
    ][0]
    from_alb = [
        r["Properties"]
        for r in resources(poc_template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["SourceSecurityGroupId"] == alb_sg
    ]
    # vLLM's port, and the fallback gateway's.
    ports = sorted((r["FromPort"], r["ToPort"]) for r in from_alb)
    assert ports == [(POC.fallback.port, POC.fallback.port), (8000, 8000)]
    egress = resources(poc_template, "AWS::EC2::SecurityGroupEgress").values()
    assert sorted((e["Properties"]["FromPort"], e["Properties"]["ToPort"]) for e in egress) == ports
    alb_group = poc_template["Resources"][alb_sg["Fn::GetAtt"][0]]["Properties"]
    assert [(r["CidrIp"], r["FromPort"]) for r in alb_group["SecurityGroupIngress"]] == [
        (POC.network.cidr, 80)
    ]


# ----------------------------------------------------------------------------- outputs


def test_outputs_name_the_alb_cluster_kubeconfig_and_routes(poc_template: dict[str, Any]) -> None:
    outputs = poc_template["Outputs"]
    alb_id = only(poc_template, "AWS::ElasticLoadBalancingV2::LoadBalancer")[0]
    cluster_id = only(poc_template, "AWS::EKS::Cluster")[0]
    assert outputs["LoadBalancerDnsName"]["Value"] == {"Fn::GetAtt": [alb_id, "DNSName"]}
    assert outputs["ClusterName"]["Value"] == _ref(cluster_id)
    assert outputs["KubeconfigCommand"]["Value"] == {
        "Fn::Join": ["", ["aws eks update-kubeconfig --region us-east-1 --name ", _ref(cluster_id)]]
    }
    assert outputs["ModelRouteQwen38b"]["Value"] == {
        "Fn::Join": ["", ["http://", {"Fn::GetAtt": [alb_id, "DNSName"]}, "/qwen3-8b/v1"]]
    }


# ----------------------------------------------------------------------------- compliance


def test_cdk_nag_gate_passed_with_no_findings(poc_template: dict[str, Any], poc_dir: Path) -> None:
    report = json.loads((poc_dir / "validation-report.json").read_text())
    for plugin in report["pluginReports"]:
        # The preset's example endpoint range is a warning (tests/tiers/test_placeholders.py).
        violations = [v for v in plugin["violations"] if v["ruleName"] != PLACEHOLDER_ANNOTATION]
        assert (plugin["pluginName"], plugin["conclusion"], violations) == (
            plugin["pluginName"],
            "success",
            [],
        )


def test_cfn_lint_reports_no_errors(poc_template: dict[str, Any], poc_dir: Path) -> None:
    assert cfn_lint_errors(str(poc_dir / "gpufarm-poc.template.json")) == []


def test_stateful_logical_ids_match_snapshot(poc_template: dict[str, Any]) -> None:
    current = stateful_logical_ids(poc_template)
    if os.environ.get("GPUFARM_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(json.dumps(current, indent=2) + "\n")
    assert current == json.loads(SNAPSHOT.read_text()), (
        "a stateful resource would be replaced; if intended, rerun with GPUFARM_UPDATE_SNAPSHOTS=1 "
        "and review the diff"
    )
