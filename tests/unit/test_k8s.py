"""Kubernetes manifest builders: behaviour of the dicts they return."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import ModelConfig, NodePoolConfig, ServingConfig, TierConfig
from gpufarm.config.model import TargetOptimizerConfig
from gpufarm.k8s import (
    AUTO_MODE_TGB_API,
    LBC_TGB_API,
    SERVICE_ACCOUNT,
    auto_mode_gpu_nodepool,
    namespace,
    s3_weights_volume,
    service_account,
    target_group_binding,
    vllm_args,
    vllm_deployment,
    vllm_service,
    weights_claim_name,
)
from gpufarm.k8s.binding import (
    READINESS_GATE_INJECT_LABEL,
    REGISTRATION_ALLOWANCE_SECONDS,
    TGB_APIS,
    min_ready_seconds,
    readiness_gates,
)
from gpufarm.k8s.serving import AGENT_CONTAINER
from gpufarm.k8s.storage import MOUNTPOINT_DRIVER

from .conftest import HF_TOKEN_SECRET, S3_WEIGHTS
from .factories import make_tier, model_override, overrides, pool_override
from .k8s_schema import validate_core, validate_crd

REGION = "us-east-1"


def requirement(nodepool: dict[str, Any], key: str) -> dict[str, Any] | None:
    reqs = nodepool["spec"]["template"]["spec"]["requirements"]
    found = [r for r in reqs if r["key"] == key]
    assert len(found) <= 1, f"requirement {key} appears {len(found)} times"
    return found[0] if found else None


def deployment_of(tier: TierConfig, index: int = 0, **kwargs: Any) -> dict[str, Any]:
    model = tier.models[index]
    return vllm_deployment(
        model, tier.serving, pool_name=tier.pool_of(model).name, region=tier.environment.region, **kwargs
    )


def pod_spec(deployment: dict[str, Any]) -> dict[str, Any]:
    return deployment["spec"]["template"]["spec"]


def vllm_container(deployment: dict[str, Any]) -> dict[str, Any]:
    [container] = [c for c in pod_spec(deployment)["containers"] if c["name"] == "vllm"]
    return container


def flag(args: list[str], name: str) -> str | None:
    """The value after `name` in an argument list (None when the flag is absent)."""
    if name not in args:
        return None
    assert args.count(name) == 1, f"{name} given {args.count(name)} times"
    return args[args.index(name) + 1]


# --------------------------------------------------------------------------- NodePool


@pytest.fixture(scope="module")
def poc_nodepool(poc: TierConfig) -> dict[str, Any]:
    return auto_mode_gpu_nodepool(poc.node_pools[0])


def test_nodepool_identity(poc_nodepool: dict[str, Any]) -> None:
    assert poc_nodepool["apiVersion"] == "karpenter.sh/v1"
    assert poc_nodepool["kind"] == "NodePool"
    assert poc_nodepool["metadata"]["name"] == "gpu-l40s"
    assert "namespace" not in poc_nodepool["metadata"], "NodePools are cluster-scoped"


def test_nodepool_uses_the_auto_mode_nodeclass(poc_nodepool: dict[str, Any]) -> None:
    assert poc_nodepool["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "eks.amazonaws.com",
        "kind": "NodeClass",
        "name": "default",
    }


def test_nodepool_custom_nodeclass(poc: TierConfig) -> None:
    nodepool = auto_mode_gpu_nodepool(poc.node_pools[0], node_class="gpu")
    assert nodepool["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "gpu"


def test_nodepool_requirements(poc_nodepool: dict[str, Any]) -> None:
    assert requirement(poc_nodepool, "eks.amazonaws.com/instance-family") == {
        "key": "eks.amazonaws.com/instance-family",
        "operator": "In",
        "values": ["g6e"],
    }
    assert requirement(poc_nodepool, "karpenter.sh/capacity-type") == {
        "key": "karpenter.sh/capacity-type",
        "operator": "In",
        "values": ["on-demand"],
    }
    assert requirement(poc_nodepool, "eks.amazonaws.com/instance-gpu-manufacturer") == {
        "key": "eks.amazonaws.com/instance-gpu-manufacturer",
        "operator": "In",
        "values": ["nvidia"],
    }
    assert requirement(poc_nodepool, "kubernetes.io/arch")["values"] == ["amd64"]


def test_nodepool_has_no_instance_type_requirement_unless_configured(
    poc_nodepool: dict[str, Any],
) -> None:
    assert requirement(poc_nodepool, "node.kubernetes.io/instance-type") is None


def test_nodepool_with_instance_types_and_several_families() -> None:
    pool = NodePoolConfig(
        name="mixed",
        instance_families=["g6e", "p5"],
        instance_types=["g6e.12xlarge", "p5.48xlarge"],
        capacity_types=["spot", "on-demand"],
    )
    nodepool = auto_mode_gpu_nodepool(pool)
    assert requirement(nodepool, "eks.amazonaws.com/instance-family")["values"] == ["g6e", "p5"]
    assert requirement(nodepool, "karpenter.sh/capacity-type")["values"] == ["spot", "on-demand"]
    assert requirement(nodepool, "node.kubernetes.io/instance-type") == {
        "key": "node.kubernetes.io/instance-type",
        "operator": "In",
        "values": ["g6e.12xlarge", "p5.48xlarge"],
    }


def test_nodepool_taints_gpu_nodes(poc_nodepool: dict[str, Any]) -> None:
    assert poc_nodepool["spec"]["template"]["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
    ]


def test_nodepool_gpu_limit_is_a_string(poc: TierConfig, poc_nodepool: dict[str, Any]) -> None:
    assert poc_nodepool["spec"]["limits"] == {"nvidia.com/gpu": str(poc.node_pools[0].gpu_limit)}
    assert poc_nodepool["spec"]["limits"] == {"nvidia.com/gpu": "4"}


def test_nodepool_disruption_from_config() -> None:
    pool = NodePoolConfig(
        name="p", consolidate_after="45m", expire_after="168h", disruption_budget_nodes="20%"
    )
    spec = auto_mode_gpu_nodepool(pool)["spec"]
    assert spec["disruption"] == {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "45m",
        "budgets": [{"nodes": "20%"}],
    }
    assert spec["template"]["spec"]["expireAfter"] == "168h"


def test_nodepool_labels_nodes_with_the_pool(poc_nodepool: dict[str, Any]) -> None:
    assert poc_nodepool["spec"]["template"]["metadata"]["labels"] == {"gpufarm.io/pool": "l40s"}
    assert poc_nodepool["metadata"]["labels"]["gpufarm.io/pool"] == "l40s"
    assert poc_nodepool["metadata"]["labels"]["app.kubernetes.io/part-of"] == "gpufarm"


# --------------------------------------------------------------------------- Namespace, SA


def test_namespace() -> None:
    ns = namespace("serving")
    assert (ns["apiVersion"], ns["kind"], ns["metadata"]["name"]) == ("v1", "Namespace", "serving")
    assert ns["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpufarm"


def test_namespace_asks_the_load_balancer_controller_for_readiness_gates_only_when_told() -> None:
    assert READINESS_GATE_INJECT_LABEL not in namespace("serving")["metadata"]["labels"]
    labels = namespace("serving", readiness_gates=True)["metadata"]["labels"]
    assert labels[READINESS_GATE_INJECT_LABEL] == "enabled"
    assert READINESS_GATE_INJECT_LABEL == "elbv2.k8s.aws/pod-readiness-gate-inject"


def test_only_the_load_balancer_controller_injects_readiness_gates() -> None:
    assert readiness_gates(LBC_TGB_API) is True
    assert readiness_gates(AUTO_MODE_TGB_API) is False


@pytest.mark.parametrize(("api_version", "expected"), [(LBC_TGB_API, 0), (AUTO_MODE_TGB_API, 60)])
def test_rollouts_wait_for_target_health_where_no_readiness_gate_does(
    api_version: str, expected: int
) -> None:
    # Auto Mode: registration allowance (30 s) + 2 healthy checks x 15 s before an old pod goes.
    assert min_ready_seconds(api_version, 15) == expected


def test_rollout_wait_follows_the_health_check_interval() -> None:
    assert min_ready_seconds(AUTO_MODE_TGB_API, 30) == REGISTRATION_ALLOWANCE_SECONDS + 2 * 30


def test_min_ready_seconds_reaches_the_deployment(poc: TierConfig) -> None:
    assert "minReadySeconds" not in deployment_of(poc)["spec"]
    assert deployment_of(poc, min_ready_seconds=60)["spec"]["minReadySeconds"] == 60


def test_service_account_mounts_no_kubernetes_token() -> None:
    sa = service_account("serving")
    assert sa["kind"] == "ServiceAccount"
    assert sa["metadata"] == {**sa["metadata"], "name": SERVICE_ACCOUNT, "namespace": "serving"}
    # vLLM never calls the Kubernetes API; the Pod Identity webhook mounts a token of its own
    # (audience pods.eks.amazonaws.com), which this setting does not govern.
    assert sa["automountServiceAccountToken"] is False


# --------------------------------------------------------------------------- vLLM args


def test_vllm_args_for_the_poc_model(poc: TierConfig) -> None:
    args = vllm_args(poc.models[0], poc.serving)
    assert args[0] == "Qwen/Qwen3-8B", "the weights come first (vllm serve's positional model)"
    assert flag(args, "--served-model-name") == "qwen3-8b"
    assert flag(args, "--tensor-parallel-size") == "1"
    assert flag(args, "--max-model-len") == "16384"
    assert flag(args, "--gpu-memory-utilization") == "0.9"
    assert flag(args, "--port") == "8000"
    assert flag(args, "--host") == "0.0.0.0"
    assert flag(args, "--dtype") == "auto"
    for optional in ("--revision", "--quantization", "--max-num-seqs"):
        assert optional not in args


def test_vllm_args_follow_the_model_config() -> None:
    tier = make_tier(
        pool_override(gpu_limit=8),
        model_override(
            gpus=4,
            served_model_name="qwen-large",
            revision="0123abc",
            quantization="fp8",
            max_num_seqs=64,
            max_model_len=32768,
            gpu_memory_utilization=0.85,
            dtype="bfloat16",
            extra_args=["--enable-prefix-caching", "--kv-cache-dtype=fp8"],
        ),
        {"serving": {"port": 8080}},
    )
    args = vllm_args(tier.models[0], tier.serving)
    assert flag(args, "--tensor-parallel-size") == "4"
    assert flag(args, "--served-model-name") == "qwen-large"
    assert flag(args, "--revision") == "0123abc"
    assert flag(args, "--quantization") == "fp8"
    assert flag(args, "--max-num-seqs") == "64"
    assert flag(args, "--max-model-len") == "32768"
    assert flag(args, "--gpu-memory-utilization") == "0.85"
    assert flag(args, "--dtype") == "bfloat16"
    assert flag(args, "--port") == "8080"
    assert args[-2:] == ["--enable-prefix-caching", "--kv-cache-dtype=fp8"], "extra_args last"


def test_vllm_args_s3_weights_use_the_mounted_path(s3_model: ModelConfig) -> None:
    args = vllm_args(s3_model, ServingConfig())
    assert args[0] == f"/models/{s3_model.name}"
    assert S3_WEIGHTS not in args


# --------------------------------------------------------------------------- Deployment


@pytest.fixture(scope="module")
def poc_deployment(poc: TierConfig) -> dict[str, Any]:
    return deployment_of(poc)


def test_deployment_identity(poc: TierConfig, poc_deployment: dict[str, Any]) -> None:
    assert poc_deployment["apiVersion"] == "apps/v1"
    assert poc_deployment["kind"] == "Deployment"
    assert poc_deployment["metadata"]["name"] == "vllm-qwen3-8b"
    assert poc_deployment["metadata"]["namespace"] == poc.serving.namespace
    assert poc_deployment["spec"]["replicas"] == poc.models[0].replicas


def test_deployment_runs_vllm_with_the_model_args(poc: TierConfig, poc_deployment: dict[str, Any]) -> None:
    container = vllm_container(poc_deployment)
    assert container["image"] == poc.serving.vllm_image
    assert container["command"] == ["vllm", "serve"]
    assert container["args"] == vllm_args(poc.models[0], poc.serving)
    assert container["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]


def test_deployment_selector_is_a_subset_of_the_pod_labels(poc_deployment: dict[str, Any]) -> None:
    selector = poc_deployment["spec"]["selector"]["matchLabels"]
    labels = poc_deployment["spec"]["template"]["metadata"]["labels"]
    assert selector
    assert selector.items() <= labels.items()
    assert selector == {"app.kubernetes.io/name": "vllm", "gpufarm.io/model": "qwen3-8b"}


def test_deployment_schedules_on_its_gpu_pool(poc_deployment: dict[str, Any]) -> None:
    spec = pod_spec(poc_deployment)
    assert spec["nodeSelector"] == {"karpenter.sh/nodepool": "gpu-l40s"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


def test_deployment_on_a_named_pool() -> None:
    pools = {"node_pools": [{"name": "small", "gpu_limit": 4}, {"name": "big", "gpu_limit": 8}]}
    tier = make_tier(pools, model_override(node_pool="big"))
    assert pod_spec(deployment_of(tier))["nodeSelector"] == {"karpenter.sh/nodepool": "gpu-big"}


def test_deployment_nodeselector_matches_the_nodepool_name(poc: TierConfig) -> None:
    nodepool = auto_mode_gpu_nodepool(poc.node_pools[0])
    assert (
        pod_spec(deployment_of(poc))["nodeSelector"]["karpenter.sh/nodepool"] == nodepool["metadata"]["name"]
    )


def test_deployment_pods_are_not_disrupted(poc_deployment: dict[str, Any]) -> None:
    annotations = poc_deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["karpenter.sh/do-not-disrupt"] == "true"


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_deployment_gpu_requests_equal_limits_equal_gpus(gpus: int) -> None:
    tier = make_tier(pool_override(gpu_limit=8), model_override(gpus=gpus))
    container = vllm_container(deployment_of(tier))
    resources = container["resources"]
    assert resources["requests"]["nvidia.com/gpu"] == str(gpus)
    assert resources["limits"]["nvidia.com/gpu"] == str(gpus)
    assert flag(container["args"], "--tensor-parallel-size") == str(gpus)


def test_deployment_cpu_and_memory(poc_deployment: dict[str, Any]) -> None:
    resources = vllm_container(poc_deployment)["resources"]
    assert resources["requests"]["cpu"] == "6"
    assert resources["requests"]["memory"] == "48Gi"
    assert resources["limits"]["memory"] == "48Gi"


def test_deployment_fractional_cpu() -> None:
    tier = make_tier(model_override(cpu=3.5))
    assert vllm_container(deployment_of(tier))["resources"]["requests"]["cpu"] == "3.5"


@pytest.mark.parametrize("timeout", [60, 61, 600, 1799, 1800, 3605, 7200])
def test_startup_probe_allows_the_startup_timeout(timeout: int) -> None:
    tier = make_tier(model_override(startup_timeout_seconds=timeout))
    probe = vllm_container(deployment_of(tier))["startupProbe"]
    assert probe["httpGet"] == {"path": "/health", "port": "http"}
    allowed = probe["failureThreshold"] * probe["periodSeconds"]
    assert allowed >= timeout
    assert allowed < timeout + probe["periodSeconds"], "no more than one period of slack"


def test_readiness_and_liveness_probes(poc_deployment: dict[str, Any]) -> None:
    container = vllm_container(poc_deployment)
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}
    assert any(p["name"] == "http" for p in container["ports"])


@pytest.mark.parametrize("delay", [0, 30, 300, 3600])
def test_termination_grace_covers_the_deregistration_delay(poc: TierConfig, delay: int) -> None:
    deployment = deployment_of(poc, termination_grace_seconds=delay)
    grace = pod_spec(deployment)["terminationGracePeriodSeconds"]
    assert grace >= delay
    pre_stop = vllm_container(deployment)["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert grace >= delay + pre_stop


def test_rolling_update_never_drops_capacity(poc_deployment: dict[str, Any]) -> None:
    strategy = poc_deployment["spec"]["strategy"]
    assert strategy["rollingUpdate"]["maxUnavailable"] == 0
    assert poc_deployment["spec"]["progressDeadlineSeconds"] > 1800


def test_deployment_without_token_has_no_init_container_nor_token(
    poc_deployment: dict[str, Any],
) -> None:
    spec = pod_spec(poc_deployment)
    assert "initContainers" not in spec
    assert "serviceAccountName" not in spec
    assert spec["automountServiceAccountToken"] is False
    env = {e["name"] for e in vllm_container(poc_deployment)["env"]}
    assert "HF_TOKEN_PATH" not in env
    assert "HF_TOKEN" not in env


def test_deployment_with_hf_token_secret(hf_token_tier: TierConfig) -> None:
    deployment = deployment_of(hf_token_tier)
    spec = pod_spec(deployment)
    assert spec["serviceAccountName"] == SERVICE_ACCOUNT
    assert spec["automountServiceAccountToken"] is False
    [init] = spec["initContainers"]
    assert init["image"] == hf_token_tier.serving.aws_cli_image
    init_env = {e["name"]: e["value"] for e in init["env"]}
    assert init_env == {"SECRET_ID": HF_TOKEN_SECRET, "AWS_REGION": REGION, "HOME": "/tmp"}
    container = vllm_container(deployment)
    env = {e["name"]: e.get("value") for e in container["env"]}
    token_path = env["HF_TOKEN_PATH"]
    # The init container writes the file vLLM reads, through a shared in-memory volume.
    [init_mount] = [m for m in init["volumeMounts"] if m["name"] == "hf-token"]
    [vllm_mount] = [m for m in container["volumeMounts"] if m["name"] == init_mount["name"]]
    assert vllm_mount["mountPath"] == init_mount["mountPath"]
    assert vllm_mount["readOnly"] is True
    assert token_path.startswith(init_mount["mountPath"] + "/")
    assert token_path in init["args"][0]
    [volume] = [v for v in spec["volumes"] if v["name"] == init_mount["name"]]
    assert volume["emptyDir"]["medium"] == "Memory"
    # The token itself is never in the manifest.
    assert "secretKeyRef" not in str(deployment)
    assert flag(container["args"], "--revision") == "main"


def test_deployment_with_s3_weights_mounts_the_claim_read_only(s3_tier: TierConfig) -> None:
    deployment = deployment_of(s3_tier)
    model = s3_tier.models[0]
    spec = pod_spec(deployment)
    [volume] = [v for v in spec["volumes"] if "persistentVolumeClaim" in v]
    assert volume["persistentVolumeClaim"] == {
        "claimName": weights_claim_name(model.name),
        "readOnly": True,
    }
    container = vllm_container(deployment)
    [mount] = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["readOnly"] is True
    assert mount["mountPath"] == f"/models/{model.name}"
    assert container["args"][0] == mount["mountPath"]
    assert "initContainers" not in spec


def test_deployment_with_hf_weights_has_no_claim(poc_deployment: dict[str, Any]) -> None:
    assert not [v for v in pod_spec(poc_deployment)["volumes"] if "persistentVolumeClaim" in v]


def test_deployment_shared_memory_grows_with_gpus() -> None:
    tier = make_tier(pool_override(gpu_limit=8), model_override(gpus=8))
    [dshm] = [v for v in pod_spec(deployment_of(tier))["volumes"] if v["name"] == "dshm"]
    assert dshm["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}


def test_deployment_every_mount_has_a_volume(hf_token_tier: TierConfig, s3_tier: TierConfig) -> None:
    for tier in (hf_token_tier, s3_tier):
        deployment = deployment_of(tier)
        spec = pod_spec(deployment)
        volumes = {v["name"] for v in spec["volumes"]}
        assert len(volumes) == len(spec["volumes"]), "volume names are unique"
        for container in spec["containers"] + spec.get("initContainers", []):
            assert {m["name"] for m in container["volumeMounts"]} <= volumes


def test_deployments_of_two_models_do_not_select_each_other() -> None:
    second = {"name": "llama", "weights": "meta-llama/Llama-3.1-8B-Instruct", "bedrock": "none"}
    tier = make_tier(
        {"models": [make_tier().models[0].model_dump(mode="json", exclude_defaults=True), second]}
    )
    first, other = deployment_of(tier, 0), deployment_of(tier, 1)
    assert first["metadata"]["name"] != other["metadata"]["name"]
    first_selector = first["spec"]["selector"]["matchLabels"].items()
    assert not first_selector <= other["spec"]["template"]["metadata"]["labels"].items()


# --------------------------------------------------------------------------- Target Optimizer agent

OPTIMIZER = TargetOptimizerConfig(enabled=True, data_port=8080, control_port=3000)
OPTIMIZED_SERVING = ServingConfig(port=8000)


def optimized(model: ModelConfig, **kwargs: Any) -> dict[str, Any]:
    """A Deployment with the Target Optimizer on (data 8080, control 3000, vLLM 8000)."""
    return vllm_deployment(
        model, OPTIMIZED_SERVING, pool_name="l40s", region=REGION, target_optimizer=OPTIMIZER, **kwargs
    )


def agent_of(deployment: dict[str, Any]) -> dict[str, Any]:
    init: list[dict[str, Any]] = pod_spec(deployment).get("initContainers", [])
    [agent] = [c for c in init if c["name"] == AGENT_CONTAINER]
    return agent


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"]}


def address_port(address: str) -> int:
    host, _, port = address.rpartition(":")
    assert host, f"{address!r} has no host"
    return int(port)


@pytest.fixture(scope="module")
def agent_model() -> ModelConfig:
    return ModelConfig(name="qwen3-8b", weights="Qwen/Qwen3-8B", max_num_seqs=48)


@pytest.fixture(scope="module")
def agent(agent_model: ModelConfig) -> dict[str, Any]:
    return agent_of(optimized(agent_model))


@pytest.mark.parametrize("setting", [None, TargetOptimizerConfig(enabled=False)])
def test_deployment_without_the_optimizer_is_unchanged(
    poc: TierConfig, poc_deployment: dict[str, Any], setting: TargetOptimizerConfig | None
) -> None:
    assert deployment_of(poc, target_optimizer=setting) == poc_deployment
    assert vllm_service(poc.models[0], poc.serving, target_optimizer=setting) == vllm_service(
        poc.models[0], poc.serving
    )


def _acknowledged_checks(manifest: dict[str, Any]) -> set[str]:
    annotations = manifest["metadata"].get("annotations", {})
    return {v.split("=", 1)[0] for k, v in annotations.items() if k.startswith("checkov.io/skip")}


def test_the_unpinned_agent_image_is_acknowledged_only_while_it_runs(agent_model: ModelConfig) -> None:
    image_checks = {"CKV_K8S_14", "CKV_K8S_15", "CKV_K8S_43"}
    # The published ':latest' default: a documentation value the deploy refuses, acknowledged.
    assert image_checks <= _acknowledged_checks(optimized(agent_model))
    # A mirrored digest: the scan checks the agent like any other image, nothing acknowledged.
    pinned = TargetOptimizerConfig(
        enabled=True,
        agent_image="123456789012.dkr.ecr.us-east-1.amazonaws.com/target-control-agent:mirror@sha256:"
        + "a" * 64,
    )
    deployment = vllm_deployment(
        agent_model, OPTIMIZED_SERVING, pool_name="l40s", region=REGION, target_optimizer=pinned
    )
    assert not image_checks & _acknowledged_checks(deployment)
    # No agent at all: nothing to acknowledge.
    off = vllm_deployment(
        agent_model,
        OPTIMIZED_SERVING,
        pool_name="l40s",
        region=REGION,
        target_optimizer=TargetOptimizerConfig(enabled=False),
    )
    assert not image_checks & _acknowledged_checks(off)


def test_agent_is_a_native_sidecar(agent: dict[str, Any]) -> None:
    assert agent["restartPolicy"] == "Always"
    assert agent["image"] == OPTIMIZER.agent_image


def test_agent_data_address_is_the_data_port(agent: dict[str, Any]) -> None:
    assert env_of(agent)["TARGET_CONTROL_DATA_ADDRESS"] == "0.0.0.0:8080"


def test_agent_control_address_is_the_control_port(agent: dict[str, Any]) -> None:
    assert env_of(agent)["TARGET_CONTROL_CONTROL_ADDRESS"] == "0.0.0.0:3000"


def test_agent_forwards_to_vllm_on_loopback(agent: dict[str, Any], agent_model: ModelConfig) -> None:
    env = env_of(agent)
    vllm_port = flag(vllm_args(agent_model, OPTIMIZED_SERVING), "--port")
    # Both spellings the published guides use, with the same value.
    assert (
        env["TARGET_CONTROL_DESTINATION_ADDRESS"]
        == env["TARGET_CONTROL_DESTINATION"]
        == f"127.0.0.1:{vllm_port}"
    )


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"target_control_max_concurrency": 8, "max_num_seqs": 48}, "8"),
        ({"max_num_seqs": 48}, "48"),
        ({}, "64"),
    ],
)
def test_agent_max_concurrency_follows_the_model(fields: dict[str, Any], expected: str) -> None:
    model = ModelConfig(name="m", weights="Qwen/Qwen3-8B", **fields)
    assert env_of(agent_of(optimized(model)))["TARGET_CONTROL_MAX_CONCURRENCY"] == expected
    assert str(model.max_concurrency) == expected


def test_agent_ports_match_its_addresses(agent: dict[str, Any]) -> None:
    env = env_of(agent)
    assert {p["name"]: p["containerPort"] for p in agent["ports"]} == {
        "data": address_port(env["TARGET_CONTROL_DATA_ADDRESS"]),
        "control": address_port(env["TARGET_CONTROL_CONTROL_ADDRESS"]),
    }


def test_agent_is_bounded_and_unprivileged(agent: dict[str, Any]) -> None:
    assert agent["resources"] == {
        "requests": {"cpu": "250m", "memory": "128Mi"},
        "limits": {"memory": "512Mi"},
    }
    assert agent["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_pod_readiness_still_follows_vllm(agent_model: ModelConfig) -> None:
    plain = vllm_deployment(agent_model, OPTIMIZED_SERVING, pool_name="l40s", region=REGION)
    with_agent = optimized(agent_model)
    assert vllm_container(with_agent) == vllm_container(plain)
    assert vllm_container(with_agent)["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    # The agent's own readiness is that it accepts connections, not vLLM's health.
    assert agent_of(with_agent)["readinessProbe"]["tcpSocket"] == {"port": "data"}


def test_token_init_container_runs_before_the_agent(hf_token_model: ModelConfig) -> None:
    init = pod_spec(optimized(hf_token_model))["initContainers"]
    assert [c["name"] for c in init] == ["hf-token", AGENT_CONTAINER]
    assert "restartPolicy" not in init[0], "the token reader runs to completion"


def test_optimized_deployment_and_service_validate(agent_model: ModelConfig) -> None:
    validate_core(optimized(agent_model))
    validate_core(vllm_service(agent_model, OPTIMIZED_SERVING, target_optimizer=OPTIMIZER))


# --------------------------------------------------------------------------- autoscaled replicas


def test_autoscaled_deployment_leaves_replicas_to_keda() -> None:
    tier = make_tier(
        {"observability": {"prometheus": {"enabled": True}}},
        model_override(autoscaling={"min_replicas": 1, "max_replicas": 3}),
    )
    deployment = deployment_of(tier)
    assert "replicas" not in deployment["spec"]
    validate_core(deployment)


def test_fixed_deployment_sets_replicas(poc: TierConfig, poc_deployment: dict[str, Any]) -> None:
    assert poc.models[0].autoscaling is None
    assert poc_deployment["spec"]["replicas"] == poc.models[0].replicas


# --------------------------------------------------------------------------- FSx weights


FSX_CLAIM_NAME = "fsx-models"


def test_fsx_weights_mount_the_claim_read_only_at_the_model_path(s3_tier: TierConfig) -> None:
    model = s3_tier.models[0]
    deployment = deployment_of(s3_tier, fsx_claim=FSX_CLAIM_NAME, fsx_sub_path="models/qwen/Qwen3-8B")
    [volume] = [v for v in pod_spec(deployment)["volumes"] if "persistentVolumeClaim" in v]
    assert volume["persistentVolumeClaim"] == {"claimName": FSX_CLAIM_NAME, "readOnly": True}
    container = vllm_container(deployment)
    [mount] = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert mount == {
        "name": volume["name"],
        "mountPath": f"/models/{model.name}",
        "readOnly": True,
        "subPath": "models/qwen/Qwen3-8B",
    }
    assert container["args"][0] == mount["mountPath"]
    validate_core(deployment)


def test_fsx_claim_leaves_hugging_face_weights_alone(poc: TierConfig, poc_deployment: dict[str, Any]) -> None:
    assert deployment_of(poc, fsx_claim=FSX_CLAIM_NAME, fsx_sub_path="models/x") == poc_deployment


def test_fsx_sub_path_without_a_claim_is_rejected(s3_tier: TierConfig) -> None:
    with pytest.raises(ValueError) as excinfo:
        deployment_of(s3_tier, fsx_sub_path="models/x")
    assert (
        str(excinfo.value) == "'fsx_sub_path' needs 'fsx_claim' (the claim it is a path in), got 'models/x'"
    )


# --------------------------------------------------------------------------- Service


def test_service_selects_the_deployment_pods(poc: TierConfig, poc_deployment: dict[str, Any]) -> None:
    service = vllm_service(poc.models[0], poc.serving)
    assert service["kind"] == "Service"
    assert service["metadata"]["name"] == poc_deployment["metadata"]["name"]
    assert service["metadata"]["namespace"] == poc_deployment["metadata"]["namespace"]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == poc_deployment["spec"]["selector"]["matchLabels"]
    assert (
        service["spec"]["selector"].items()
        <= poc_deployment["spec"]["template"]["metadata"]["labels"].items()
    )


def test_service_targets_the_named_container_port(poc: TierConfig, poc_deployment: dict[str, Any]) -> None:
    [port] = vllm_service(poc.models[0], poc.serving)["spec"]["ports"]
    assert port["port"] == poc.serving.port
    assert port["targetPort"] == "http"
    assert port["targetPort"] in {p["name"] for p in vllm_container(poc_deployment)["ports"]}


def test_optimized_service_adds_the_agent_data_port(agent_model: ModelConfig, agent: dict[str, Any]) -> None:
    http, data = vllm_service(agent_model, OPTIMIZED_SERVING, target_optimizer=OPTIMIZER)["spec"]["ports"]
    assert http == {"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}
    data_container_port = {p["name"]: p["containerPort"] for p in agent["ports"]}["data"]
    # A number, not the name: named ports of native sidecars reach EndpointSlices only lately.
    assert data == {"name": "data", "port": 8080, "targetPort": data_container_port, "protocol": "TCP"}


# --------------------------------------------------------------------------- storage


@pytest.fixture(scope="module")
def weights_volume() -> list[dict[str, Any]]:
    return s3_weights_volume(
        model_name="qwen3-8b", namespace="serving", s3_uri="s3://models-bucket/qwen/8b", region="eu-west-1"
    )


def test_s3_volume_pv_and_claim_bind_to_each_other(weights_volume: list[dict[str, Any]]) -> None:
    pv, pvc = weights_volume
    assert (pv["kind"], pvc["kind"]) == ("PersistentVolume", "PersistentVolumeClaim")
    assert "namespace" not in pv["metadata"]
    assert pvc["metadata"] == {**pvc["metadata"], "name": "weights-qwen3-8b", "namespace": "serving"}
    assert pv["spec"]["claimRef"] == {"namespace": "serving", "name": pvc["metadata"]["name"]}
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    # Static binding: an empty storage class on both sides, so no provisioner steps in.
    assert pv["spec"]["storageClassName"] == pvc["spec"]["storageClassName"] == ""
    assert pv["spec"]["accessModes"] == pvc["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert pv["spec"]["capacity"]["storage"] == pvc["spec"]["resources"]["requests"]["storage"]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"


def test_s3_volume_uses_mountpoint(weights_volume: list[dict[str, Any]]) -> None:
    pv, _ = weights_volume
    csi = pv["spec"]["csi"]
    assert csi["driver"] == MOUNTPOINT_DRIVER == "s3.csi.aws.com"
    assert csi["volumeAttributes"] == {"bucketName": "models-bucket"}
    assert csi["volumeHandle"] == pv["metadata"]["name"]
    options = pv["spec"]["mountOptions"]
    assert "read-only" in options
    assert "prefix qwen/8b/" in options
    assert "region eu-west-1" in options


def test_s3_volume_whole_bucket_has_no_prefix() -> None:
    pv, _ = s3_weights_volume(model_name="m", namespace="ns", s3_uri="s3://bucket/", region=REGION)
    assert not [o for o in pv["spec"]["mountOptions"] if o.startswith("prefix")]
    assert "read-only" in pv["spec"]["mountOptions"]


def test_s3_volume_names_are_unique_across_namespaces() -> None:
    a, _ = s3_weights_volume(model_name="m", namespace="team-a", s3_uri="s3://b/m", region=REGION)
    b, _ = s3_weights_volume(model_name="m", namespace="team-b", s3_uri="s3://b/m", region=REGION)
    assert a["metadata"]["name"] != b["metadata"]["name"]
    assert a["spec"]["csi"]["volumeHandle"] != b["spec"]["csi"]["volumeHandle"]


def test_deployment_claim_matches_the_s3_volume(s3_tier: TierConfig) -> None:
    model = s3_tier.models[0]
    _, pvc = s3_weights_volume(
        model_name=model.name, namespace=s3_tier.serving.namespace, s3_uri=model.weights, region=REGION
    )
    deployment = deployment_of(s3_tier)
    [volume] = [v for v in pod_spec(deployment)["volumes"] if "persistentVolumeClaim" in v]
    assert volume["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    assert deployment["metadata"]["namespace"] == pvc["metadata"]["namespace"]


# --------------------------------------------------------------------------- TargetGroupBinding


TG_ARN = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/vllm/0123456789abcdef"


@pytest.mark.parametrize("api_version", [AUTO_MODE_TGB_API, LBC_TGB_API])
def test_target_group_binding(api_version: str) -> None:
    binding = target_group_binding(
        name="vllm-qwen3-8b",
        namespace="gpufarm",
        service_name="vllm-qwen3-8b",
        service_port=8000,
        target_group_arn=TG_ARN,
        api_version=api_version,
    )
    assert binding["apiVersion"] == api_version
    assert binding["kind"] == "TargetGroupBinding"
    assert binding["metadata"]["name"] == "vllm-qwen3-8b"
    assert binding["metadata"]["namespace"] == "gpufarm"
    assert binding["spec"] == {
        "serviceRef": {"name": "vllm-qwen3-8b", "port": 8000},
        "targetGroupARN": TG_ARN,
        "targetType": "ip",
    }


def test_target_group_binding_defaults_to_auto_mode() -> None:
    binding = target_group_binding(
        name="b", namespace="ns", service_name="s", service_port=80, target_group_arn=TG_ARN
    )
    assert binding["apiVersion"] == "eks.amazonaws.com/v1"


def test_target_group_binding_refers_to_the_service_port(poc: TierConfig) -> None:
    service = vllm_service(poc.models[0], poc.serving)
    binding = target_group_binding(
        name=service["metadata"]["name"],
        namespace=service["metadata"]["namespace"],
        service_name=service["metadata"]["name"],
        service_port=service["spec"]["ports"][0]["port"],
        target_group_arn=TG_ARN,
    )
    assert binding["spec"]["serviceRef"]["port"] in {p["port"] for p in service["spec"]["ports"]}


def test_target_group_binding_rejects_an_unknown_api() -> None:
    with pytest.raises(ValueError) as excinfo:
        target_group_binding(
            name="b",
            namespace="ns",
            service_name="s",
            service_port=80,
            target_group_arn=TG_ARN,
            api_version="elbv2.k8s.aws/v1",
        )
    assert str(excinfo.value) == (
        "'api_version' must be one of 'eks.amazonaws.com/v1', 'elbv2.k8s.aws/v1beta1', got 'elbv2.k8s.aws/v1'"
    )
    assert TGB_APIS == (AUTO_MODE_TGB_API, LBC_TGB_API)


def test_binding_to_the_agent_data_port_names_a_service_port(agent_model: ModelConfig) -> None:
    service = vllm_service(agent_model, OPTIMIZED_SERVING, target_optimizer=OPTIMIZER)
    binding = target_group_binding(
        name="vllm-qwen3-8b-8080-3000",
        namespace=service["metadata"]["namespace"],
        service_name=service["metadata"]["name"],
        service_port=OPTIMIZER.data_port,
        target_group_arn=TG_ARN,
        api_version=LBC_TGB_API,
    )
    assert binding["spec"]["serviceRef"]["port"] in {p["port"] for p in service["spec"]["ports"]}
    validate_crd(binding, "elbv2.k8s.aws_targetgroupbindings.yaml", "v1beta1")


def test_two_pools_two_nodepools() -> None:
    tier = make_tier(
        overrides({"node_pools": [{"name": "a", "gpu_limit": 4}, {"name": "b", "instance_families": ["p5"]}]})
    )
    names = [auto_mode_gpu_nodepool(p)["metadata"]["name"] for p in tier.node_pools]
    assert names == ["gpu-a", "gpu-b"]
