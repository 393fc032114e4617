"""The ec2-poc tier, synthesized once: GPU Auto Scaling groups behind the ALB, no Kubernetes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpufarm.config import load_preset
from gpufarm.constructs.gpu_fleet import DLAMI_PARAMETER, DRAIN_MARGIN_SECONDS, LAUNCH_HOOK, TERMINATION_HOOK
from gpufarm.core.endpoints import GATEWAY_LISTENER_PORT
from gpufarm.core.engine_metrics import Role, metric_name
from gpufarm.hosts import engine as host_engine
from gpufarm.hosts.metrics import GROUP_DIMENSION, METRICS_NAMESPACE
from gpufarm.k8s.gateway import READINESS_PATH, route_env_name
from tests.conftest import cfn_lint_errors
from tests.tiers.helpers import (
    default_target_group,
    flatten,
    gateway_listener,
    model_target_groups,
    only,
    resources,
    stateful_logical_ids,
)

TIER = load_preset("ec2-poc")
SNAPSHOT = Path(__file__).parent / "snapshots" / "ec2-poc-stateful-logical-ids.json"
POC_SNAPSHOT = Path(__file__).parent / "snapshots" / "poc-stateful-logical-ids.json"
GROUP_NAME = "gpufarm-ec2-poc-l40s"


def _gpu_group(template: dict[str, Any]) -> dict[str, Any]:
    groups = resources(template, "AWS::AutoScaling::AutoScalingGroup")
    (found,) = [g for g in groups.values() if g["Properties"].get("AutoScalingGroupName") == GROUP_NAME]
    return found


def _gateway_group(template: dict[str, Any]) -> dict[str, Any]:
    groups = resources(template, "AWS::AutoScaling::AutoScalingGroup")
    (found,) = [g for k, g in groups.items() if k.startswith("GatewayGroup")]
    return found


def _launch_template(template: dict[str, Any], group: dict[str, Any]) -> dict[str, Any]:
    ref = group["Properties"]["LaunchTemplate"]["LaunchTemplateId"]["Ref"]
    data: dict[str, Any] = template["Resources"][ref]["Properties"]["LaunchTemplateData"]
    return data


def _user_data(launch_template: dict[str, Any]) -> str:
    return flatten(launch_template["UserData"]["Fn::Base64"])


def _statements(template: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    found = []
    for key, policy in resources(template, "AWS::IAM::Policy").items():
        if key.startswith(prefix):
            found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


# ----------------------------------------------------------------------------- no Kubernetes


def test_the_tier_has_no_cluster_no_kubernetes_objects_and_no_functions_of_its_own(
    ec2_poc_template: dict[str, Any],
) -> None:
    types = {r["Type"] for r in ec2_poc_template["Resources"].values()}
    assert not {t for t in types if t.startswith(("AWS::EKS::", "Custom::AWSCDK-EKS"))}
    # The only function is aws-cdk-lib's default-security-group cleaner (the network's, as on EKS).
    functions = resources(ec2_poc_template, "AWS::Lambda::Function")
    assert all(k.startswith("CustomVpcRestrictDefaultSG") for k in functions)


def test_stateful_resources_shared_with_the_eks_poc_keep_its_logical_ids(
    ec2_poc_template: dict[str, Any],
) -> None:
    found = stateful_logical_ids(ec2_poc_template)
    assert found == json.loads(SNAPSHOT.read_text())
    poc = json.loads(POC_SNAPSHOT.read_text())
    for kind in ("AWS::EC2::VPC", "AWS::ElasticLoadBalancingV2::LoadBalancer", "AWS::S3::Bucket"):
        assert found[kind] == poc[kind]
    # Same key, flow logs and model target group as the EKS tier: switching a tier's provisioning
    # replaces the compute, not the network, the logs or the load balancer.
    assert set(poc["AWS::KMS::Key"]) - {"ClusterSecretsKey462B29B5"} <= set(found["AWS::KMS::Key"])
    assert "NetworkFlowLogGroup4F8CEEEF" in found["AWS::Logs::LogGroup"]
    assert set(poc["AWS::ElasticLoadBalancingV2::TargetGroup"]) == set(
        found["AWS::ElasticLoadBalancingV2::TargetGroup"]
    )


def test_cfn_lint_finds_no_errors(ec2_poc_dir: Path) -> None:
    assert cfn_lint_errors(ec2_poc_dir / "gpufarm-ec2-poc.template.json") == []


# ----------------------------------------------------------------------------- GPU group


def test_target_groups_take_instances_by_least_outstanding_requests(ec2_poc_template: dict[str, Any]) -> None:
    groups = resources(ec2_poc_template, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert {g["Properties"]["TargetType"] for g in groups.values()} == {"instance"}
    for group in groups.values():
        attributes = {a["Key"]: a["Value"] for a in group["Properties"]["TargetGroupAttributes"]}
        assert attributes["load_balancing.algorithm.type"] == "least_outstanding_requests"
        # No EKS cluster to tag target groups for.
        assert all(t["Key"] != "eks:eks-cluster-name" for t in group["Properties"].get("Tags", []))


def test_the_gpu_group_registers_in_its_models_target_group(ec2_poc_template: dict[str, Any]) -> None:
    (model_group,) = model_target_groups(ec2_poc_template)
    props = _gpu_group(ec2_poc_template)["Properties"]
    assert props["TargetGroupARNs"] == [{"Ref": model_group}]
    assert props["HealthCheckType"] == "ELB"
    assert (props["MinSize"], props["MaxSize"]) == ("1", "2")


def test_the_launch_template_resolves_the_dlami_at_deploy_time_and_locks_the_instance_down(
    ec2_poc_template: dict[str, Any],
) -> None:
    data = _launch_template(ec2_poc_template, _gpu_group(ec2_poc_template))
    assert data["ImageId"] == f"{{{{resolve:ssm:{DLAMI_PARAMETER}}}}}"
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    (volume,) = data["BlockDeviceMappings"]
    assert volume["Ebs"]["Encrypted"] is True and volume["Ebs"]["VolumeSize"] == 300
    (interface,) = data["NetworkInterfaces"]
    assert interface["AssociatePublicIpAddress"] is False
    # On-demand only: one type, the smallest g6e with the model's GPU count, vCPUs and memory.
    assert data["InstanceType"] == "g6e.2xlarge"
    assert "KeyName" not in data


def test_hooks_hold_a_launch_until_the_engine_answers_and_a_termination_for_the_drain(
    ec2_poc_template: dict[str, Any],
) -> None:
    hooks = {
        h["LifecycleHookName"]: h
        for h in _gpu_group(ec2_poc_template)["Properties"]["LifecycleHookSpecificationList"]
    }
    launch, drain = hooks[LAUNCH_HOOK], hooks[TERMINATION_HOOK]
    assert launch["LifecycleTransition"] == "autoscaling:EC2_INSTANCE_LAUNCHING"
    assert launch["DefaultResult"] == "ABANDON"
    assert launch["HeartbeatTimeout"] > TIER.models[0].startup_timeout_seconds
    assert drain["LifecycleTransition"] == "autoscaling:EC2_INSTANCE_TERMINATING"
    assert drain["HeartbeatTimeout"] == TIER.ingress.deregistration_delay_seconds + DRAIN_MARGIN_SECONDS


def test_a_warm_pool_keeps_a_stopped_instance_and_refresh_rolls_with_checkpoints(
    ec2_poc_template: dict[str, Any],
) -> None:
    _, pool = only(ec2_poc_template, "AWS::AutoScaling::WarmPool")
    assert pool["Properties"] == {
        "AutoScalingGroupName": GROUP_NAME,
        "InstanceReusePolicy": {"ReuseOnScaleIn": True},
        "MinSize": 1,
        "PoolState": "Stopped",
    }
    refresh = _gpu_group(ec2_poc_template)["UpdatePolicy"]["AutoScalingInstanceRefresh"]
    assert refresh["Strategy"] == "Rolling"
    assert refresh["Preferences"]["CheckpointPercentages"] == [50, 100]
    assert refresh["Preferences"]["MinHealthyPercentage"] == 100


def test_the_group_tracks_the_engines_queue_and_the_request_count(ec2_poc_template: dict[str, Any]) -> None:
    policies = [
        p["Properties"]
        for p in resources(ec2_poc_template, "AWS::AutoScaling::ScalingPolicy").values()
        if p["Properties"]["AutoScalingGroupName"] == GROUP_NAME
    ]
    by_kind = {
        "queue" if "CustomizedMetricSpecification" in p["TargetTrackingConfiguration"] else "requests": p
        for p in policies
    }
    queue = by_kind["queue"]["TargetTrackingConfiguration"]
    assert queue["CustomizedMetricSpecification"] == {
        "MetricName": metric_name("vllm", Role.WAITING),
        "Namespace": METRICS_NAMESPACE,
        "Dimensions": [{"Name": GROUP_DIMENSION, "Value": GROUP_NAME}],
        "Statistic": "Average",
    }
    assert queue["TargetValue"] == TIER.models[0].autoscaling.queue_target  # type: ignore[union-attr]
    requests = by_kind["requests"]["TargetTrackingConfiguration"]
    assert requests["PredefinedMetricSpecification"]["PredefinedMetricType"] == "ALBRequestCountPerTarget"
    assert requests["TargetValue"] == TIER.ec2.requests_per_target


def test_the_user_data_runs_the_engine_from_synced_weights_and_scrapes_its_queue(
    ec2_poc_template: dict[str, Any],
) -> None:
    text = _user_data(_launch_template(ec2_poc_template, _gpu_group(ec2_poc_template)))
    model = TIER.models[0]
    assert f"aws s3 sync --region us-east-1 --only-show-errors {model.weights}" in text
    assert f"/models/{model.name}" in text and "--served-model-name" in text
    assert "--gpus all" in text and "vllm/vllm-openai" in text
    for unit in (host_engine.ENGINE_UNIT, host_engine.READY_UNIT, host_engine.DRAIN_UNIT):
        assert f"/etc/systemd/system/{unit}" in text
    assert metric_name("vllm", Role.WAITING) in text


def test_the_gpu_role_reads_only_the_models_prefix_and_acts_only_on_its_own_group(
    ec2_poc_template: dict[str, Any],
) -> None:
    statements = {s["Sid"]: s for s in _statements(ec2_poc_template, "GpuPoolL40s")}
    assert flatten(statements["ReadModelWeights"]["Resource"]) == (
        "arn:aws:s3:::gpufarm-ec2-poc-models/Qwen/Qwen3-8B/*"
    )
    assert statements["ListModelWeights"]["Condition"] == {"StringLike": {"s3:prefix": ["Qwen/Qwen3-8B/*"]}}
    assert flatten(statements["OwnLifecycleActions"]["Resource"]).endswith(
        f":autoScalingGroup:*:autoScalingGroupName/{GROUP_NAME}"
    )
    (model_group,) = model_target_groups(ec2_poc_template)
    assert statements["DeregisterFromOwnTargetGroup"]["Resource"] == {"Ref": model_group}


# ----------------------------------------------------------------------------- gateway


def test_the_gateway_group_serves_the_default_route_and_calls_the_model_routes(
    ec2_poc_template: dict[str, Any],
) -> None:
    target_group = default_target_group(ec2_poc_template)
    group = _gateway_group(ec2_poc_template)
    assert group["Properties"]["TargetGroupARNs"] == [{"Ref": target_group}]
    health = ec2_poc_template["Resources"][target_group]["Properties"]
    assert (health["HealthCheckPath"], health["Port"]) == (READINESS_PATH, TIER.fallback.port)
    assert gateway_listener(ec2_poc_template) is not None
    text = _user_data(_launch_template(ec2_poc_template, group))
    model = TIER.models[0]
    # The route the generated config reads, at the gateway listener of the same ALB.
    assert f"{route_env_name(model)}=http://<GetAtt:Ingress72968116.DNSName>:{GATEWAY_LISTENER_PORT}/" in text
    assert f"os.environ/{route_env_name(model)}" in text
    assert "ghcr.io/berriai/litellm" in text


def test_the_gateway_may_invoke_exactly_what_the_eks_gateway_may(
    ec2_poc_template: dict[str, Any], poc_template: dict[str, Any]
) -> None:
    def bedrock(template: dict[str, Any]) -> dict[str, Any]:
        return {s["Sid"]: s for s in _statements(template, "GatewayRole") if s["Sid"].startswith("Invoke")}

    assert bedrock(ec2_poc_template) == bedrock(poc_template) != {}


# ----------------------------------------------------------------------------- stability


def test_routine_changes_keep_the_stateful_and_traffic_ids_and_the_group(
    ec2_poc_template: dict[str, Any], tmp_path_factory: Any
) -> None:
    from tests.tiers.conftest import synthesize, variant
    from tests.unit.factories import ec2_document

    base = ec2_document()
    model = dict(base["models"][0], autoscaling=dict(base["models"][0]["autoscaling"], max_replicas=4))
    second = {
        "name": "llama-3-1-8b",
        "weights": "s3://my-models/llama-3.1-8b/",
        "gpus": 1,
        "cpu": 6,
        "memory_gib": 48,
        "node_pool": "spare",
        "bedrock": "none",
    }
    pools = [
        dict(base["node_pools"][0], root_volume_gib=400),
        {"name": "spare", "instance_families": ["g6e"]},
    ]
    changed = synthesize(
        [variant(base, {"models": [model, second], "node_pools": pools})],
        tmp_path_factory.mktemp("ec2-changed"),
    )["gpufarm-ec2-poc"]
    before, after = stateful_logical_ids(ec2_poc_template), stateful_logical_ids(changed)
    for kind, ids in before.items():
        assert set(ids) <= set(after[kind]), kind
    assert len(model_target_groups(changed)) == 2
    assert _gpu_group(changed)["Properties"]["MaxSize"] == "4"  # the same group, by name, resized
    groups = resources(changed, "AWS::AutoScaling::AutoScalingGroup")
    assert set(resources(ec2_poc_template, "AWS::AutoScaling::AutoScalingGroup")) <= set(groups)
