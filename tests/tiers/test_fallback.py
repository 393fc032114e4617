"""The Bedrock fallback gateway in each tier: routing, placement, IAM scope and the private endpoint."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpufarm.config import TierConfig, load_preset
from gpufarm.config.bedrock import destination_regions, foundation_model_id
from gpufarm.core.gateway_sizing import gateway_sizing
from gpufarm.k8s.gateway import BACKEND_HEADER, bedrock_model_name
from gpufarm.k8s.labels import POOL_LABEL
from tests.tiers.helpers import client_listener, flatten, manifest_of, manifests, only, resources, rules_of

TIERS = ["poc", "production"]


@pytest.fixture(scope="module", params=TIERS)
def tier(request: pytest.FixtureRequest) -> tuple[TierConfig, dict[str, Any]]:
    name: str = request.param
    template = request.getfixturevalue(f"{name}_template")
    return load_preset(name), template


def _gateway_config(template: dict[str, Any]) -> dict[str, Any]:
    import yaml

    config_map = manifest_of(template, "ConfigMap", "gateway-config")
    data: dict[str, Any] = yaml.safe_load(config_map["data"]["config.yaml"])
    return data


def test_unmatched_paths_go_to_the_gateway(tier: tuple[TierConfig, dict[str, Any]]) -> None:
    cfg, template = tier
    listener_id, listener = client_listener(template)
    forward = listener["Properties"]["DefaultActions"][-1]
    assert forward["Type"] == "forward"
    group = template["Resources"][forward["TargetGroupArn"]["Ref"]]["Properties"]
    assert group["Port"] == cfg.fallback.port
    assert group["HealthCheckPath"] == "/health/readiness"
    assert "TargetControlPort" not in group
    # The per-model routes stay for clients that opt out of fallback.
    assert len(rules_of(template, listener_id)) == len(cfg.models)


def test_gateway_pods_join_the_default_target_group(tier: tuple[TierConfig, dict[str, Any]]) -> None:
    _, template = tier
    _, listener = client_listener(template)
    group_id = listener["Properties"]["DefaultActions"][-1]["TargetGroupArn"]["Ref"]
    bindings = [m for m in manifests(template) if m["kind"] == "TargetGroupBinding"]
    (gateway,) = [b for b in bindings if b["spec"]["serviceRef"]["name"] == "gateway"]
    assert gateway["spec"]["targetGroupARN"] == f"<Ref:{group_id}>"


def test_gateway_runs_replicated_on_cpu_nodes_only(tier: tuple[TierConfig, dict[str, Any]]) -> None:
    cfg, template = tier
    deployment = manifest_of(template, "Deployment", "gateway")
    sizing = gateway_sizing(cfg)
    if sizing.autoscaled:
        # The HPA owns the count, from the tier's replicas up to the sized bound.
        assert "replicas" not in deployment["spec"]
        hpa = manifest_of(template, "HorizontalPodAutoscaler", "gateway")
        assert hpa["spec"]["scaleTargetRef"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "gateway",
        }
        assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (
            cfg.fallback.replicas,
            sizing.max_replicas,
        )
        assert cfg.fallback.replicas >= 2
    else:
        assert deployment["spec"]["replicas"] == cfg.fallback.replicas >= 2
    pod = deployment["spec"]["template"]["spec"]
    assert not any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", []))
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert all({"key": POOL_LABEL, "operator": "DoesNotExist"} in t["matchExpressions"] for t in terms)
    budget = manifest_of(template, "PodDisruptionBudget", "gateway")
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels(deployment).items()


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels


def test_each_model_falls_back_to_its_bedrock_target_or_not_at_all(
    tier: tuple[TierConfig, dict[str, Any]],
) -> None:
    cfg, template = tier
    config = _gateway_config(template)
    fallbacks = {k: v for entry in config["router_settings"]["fallbacks"] for k, v in entry.items()}
    for model in cfg.models:
        if model.bedrock_target is None:
            assert model.api_model_name not in fallbacks
        else:
            assert fallbacks[model.api_model_name] == [bedrock_model_name(model)]


def test_backend_is_named_in_a_response_header(tier: tuple[TierConfig, dict[str, Any]]) -> None:
    cfg, template = tier
    ids = {e["model_info"]["id"] for e in _gateway_config(template)["model_list"]}
    assert BACKEND_HEADER == "x-litellm-model-id"
    for model in cfg.models:
        assert f"vllm-{model.name}" in ids
        assert (f"bedrock-{model.name}" in ids) is (model.bedrock_target is not None)


def test_gateway_may_invoke_only_the_configured_bedrock_models(
    tier: tuple[TierConfig, dict[str, Any]],
) -> None:
    cfg, template = tier
    association = next(
        a
        for a in resources(template, "AWS::EKS::PodIdentityAssociation").values()
        if a["Properties"]["ServiceAccount"] == "gateway"
    )
    role_id = association["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    statements = [
        s
        for p in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    actions = {
        a for s in statements for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    }
    expected_actions = {"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"}
    if cfg.fallback.master_key_secret:
        expected_actions.add("secretsmanager:GetSecretValue")
    assert actions == expected_actions
    resources_text = json.dumps([s["Resource"] for s in statements])
    assert "*" not in resources_text.replace("-??????", "")
    for model in cfg.models:
        target = model.bedrock_target
        if target is None:
            continue
        for region in destination_regions(target, cfg.environment.region):
            arn = f"arn:aws:bedrock:{region}::foundation-model/{foundation_model_id(target.model_id)}"
            assert arn in resources_text


def test_bedrock_runtime_endpoint_admits_only_the_nodes(tier: tuple[TierConfig, dict[str, Any]]) -> None:
    _, template = tier
    cluster_id, _ = only(template, "AWS::EKS::Cluster")
    (endpoint,) = [
        e["Properties"]
        for e in resources(template, "AWS::EC2::VPCEndpoint").values()
        if flatten(e["Properties"]["ServiceName"]).endswith(".bedrock-runtime")
    ]
    assert endpoint["PrivateDnsEnabled"] is True
    group_id = endpoint["SecurityGroupIds"][0]["Fn::GetAtt"][0]
    group = template["Resources"][group_id]["Properties"]
    assert all("CidrIp" not in r for r in group.get("SecurityGroupIngress", []))
    rules = [
        r["Properties"]
        for r in resources(template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}
    ]
    assert [(r["FromPort"], r["ToPort"], r["SourceSecurityGroupId"]) for r in rules] == [
        (443, 443, {"Fn::GetAtt": [cluster_id, "ClusterSecurityGroupId"]})
    ]


def test_gateway_base_url_is_an_output(tier: tuple[TierConfig, dict[str, Any]]) -> None:
    _, template = tier
    value = flatten(template["Outputs"]["GatewayBaseUrl"]["Value"])
    assert value.endswith("/v1") and "<GetAtt:" in value


def test_master_key_is_never_in_the_template(tier: tuple[TierConfig, dict[str, Any]]) -> None:
    cfg, template = tier
    deployment = manifest_of(template, "Deployment", "gateway")
    env = [e for c in deployment["spec"]["template"]["spec"]["containers"] for e in c.get("env", [])]
    assert all(e["name"] != "LITELLM_MASTER_KEY" for e in env)
    if cfg.fallback.master_key_secret:
        assert _gateway_config(template)["general_settings"]["master_key"] == "os.environ/LITELLM_MASTER_KEY"
