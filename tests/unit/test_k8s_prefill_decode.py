"""Prefill/decode manifests: the two vLLM roles, the decode sidecar, and llm-d's picker in the router."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpufarm.config.model import ModelConfig, PrefillDecodeConfig, ServingConfig
from gpufarm.core.prefill_decode import DECODE_ENGINE_PORT, NIXL_SIDE_CHANNEL_PORT
from gpufarm.k8s import kv_cache_routing, prefill_decode
from gpufarm.k8s.labels import EFA_RESOURCE, GPU_RESOURCE, model_selector, workload_name
from gpufarm.k8s.serving import vllm_deployment
from tests.conftest import REPO

from .k8s_schema import validate_core

SERVING = ServingConfig()
UPSTREAM_EPP = REPO.parent / "shared" / "upstream-ref" / "epp-llm-d@v0.9.0.json"
EFA_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-efa:v0.31.0@sha256:" + "e" * 64


def model(**pd: Any) -> ModelConfig:
    return ModelConfig(
        name="llama-70b",
        weights="meta-llama/Llama-3.3-70B-Instruct",
        gpus=4,
        replicas=3,
        prefill_decode=PrefillDecodeConfig(**{"prefill_replicas": 2, **pd}),
    )


def deployment(role: str, m: ModelConfig | None = None, **kwargs: Any) -> dict[str, Any]:
    return vllm_deployment(
        m or model(), SERVING, pool_name="h100", region="us-east-1", prefill_decode_role=role, **kwargs
    )  # type: ignore[arg-type]


def pod(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def vllm(doc: dict[str, Any]) -> dict[str, Any]:
    (container,) = [c for c in pod(doc)["containers"] if c["name"] == "vllm"]
    return container


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


# --------------------------------------------------------------------------- vLLM flags


def test_both_roles_start_the_nixl_connector_with_one_block_size() -> None:
    for role in ("prefill", "decode"):
        args = vllm(deployment(role))["args"]
        assert json.loads(flag(args, "--kv-transfer-config")) == {
            "kv_connector": "NixlConnector",
            "kv_role": "kv_both",
        }
        assert flag(args, "--block-size") == "128"


def test_efa_transport_selects_nixls_libfabric_backend() -> None:
    config = json.loads(
        prefill_decode.kv_transfer_config(PrefillDecodeConfig(kv_transport="efa", efa_image=EFA_IMAGE))
    )
    assert config["kv_connector_extra_config"] == {"backends": ["LIBFABRIC"]}


def test_side_channel_advertises_the_pod_ip() -> None:
    for role in ("prefill", "decode"):
        values = env(vllm(deployment(role)))
        # The other role dials this address: the pod's own IP, never vLLM's default.
        assert values["VLLM_NIXL_SIDE_CHANNEL_HOST"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        assert values["VLLM_NIXL_SIDE_CHANNEL_PORT"] == str(NIXL_SIDE_CHANNEL_PORT)


def test_prefill_keeps_connections_open_longer_than_the_sidecar() -> None:
    assert env(vllm(deployment("prefill")))["VLLM_HTTP_TIMEOUT_KEEP_ALIVE"] == "120"
    assert "VLLM_HTTP_TIMEOUT_KEEP_ALIVE" not in env(vllm(deployment("decode")))


# --------------------------------------------------------------------------- decode pods


def test_decode_vllm_moves_behind_the_sidecar_on_the_serving_port() -> None:
    doc = deployment("decode")
    container = vllm(doc)
    assert flag(container["args"], "--port") == str(DECODE_ENGINE_PORT)
    # Probes and the metrics scrape name the port `http`: vLLM's own, not the sidecar's.
    assert container["ports"] == [{"name": "http", "containerPort": DECODE_ENGINE_PORT, "protocol": "TCP"}]
    (sidecar,) = [c for c in pod(doc)["initContainers"] if c["name"] == prefill_decode.SIDECAR_CONTAINER]
    assert sidecar["restartPolicy"] == "Always"  # a native sidecar: up before vLLM, down after it
    assert sidecar["image"] == prefill_decode.PREFILL_DECODE_SIDECAR_IMAGE
    assert sidecar["args"] == [
        f"--port={SERVING.port}",
        f"--vllm-port={DECODE_ENGINE_PORT}",
        "--kv-connector=nixlv2",
        "--secure-proxy=false",
    ]
    assert sidecar["ports"][0]["containerPort"] == SERVING.port


def test_decode_pods_keep_the_models_deployment_and_selector() -> None:
    doc = deployment("decode")
    assert doc["metadata"]["name"] == workload_name("llama-70b")
    assert doc["spec"]["selector"]["matchLabels"] == model_selector("llama-70b")
    assert doc["spec"]["replicas"] == 3
    labels = doc["spec"]["template"]["metadata"]["labels"]
    assert labels[prefill_decode.ROLE_LABEL] == "decode"
    assert labels[prefill_decode.PREFILL_DECODE_GROUP_LABEL] == "llama-70b"
    assert GPU_RESOURCE in vllm(doc)["resources"]["limits"]


def test_autoscaled_decode_pods_leave_replicas_to_keda() -> None:
    m = ModelConfig.model_validate(
        {**model().model_dump(), "autoscaling": {"min_replicas": 1, "max_replicas": 4}}
    )
    assert "replicas" not in deployment("decode", m)["spec"]


# --------------------------------------------------------------------------- prefill pods


def test_prefill_pods_are_their_own_fixed_size_deployment() -> None:
    doc = deployment("prefill", model(prefill_gpus=2))
    assert doc["metadata"]["name"] == "vllm-llama-70b-prefill"
    assert doc["spec"]["replicas"] == 2
    container = vllm(doc)
    assert flag(container["args"], "--tensor-parallel-size") == "2"
    assert container["resources"]["limits"][GPU_RESOURCE] == "2"
    assert flag(container["args"], "--port") == str(SERVING.port)
    assert "initContainers" not in pod(doc)  # no sidecar: the decode pod's sidecar calls it


def test_prefill_and_decode_deployments_never_select_each_others_pods() -> None:
    prefill, decode = deployment("prefill"), deployment("decode")
    prefill_labels = prefill["spec"]["template"]["metadata"]["labels"]
    decode_labels = decode["spec"]["template"]["metadata"]["labels"]
    assert not matches(decode["spec"]["selector"]["matchLabels"], prefill_labels)
    assert not matches(prefill["spec"]["selector"]["matchLabels"], decode_labels)
    assert prefill_labels[prefill_decode.ROLE_LABEL] == "prefill"
    # The picker finds both roles with one selector.
    key, value = prefill_decode.endpoint_selector("llama-70b").split("=")
    assert prefill_labels[key] == decode_labels[key] == value


def test_both_roles_prefer_one_zone_instead_of_spreading() -> None:
    for role in ("prefill", "decode"):
        spec = pod(deployment(role))
        assert "topologySpreadConstraints" not in spec
        (term,) = spec["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert term["podAffinityTerm"]["topologyKey"] == "topology.kubernetes.io/zone"
        assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == {
            prefill_decode.PREFILL_DECODE_GROUP_LABEL: "llama-70b"
        }


def test_efa_pods_run_the_efa_image_with_interfaces_and_locked_memory() -> None:
    m = model(kv_transport="efa", efa_image=EFA_IMAGE)
    for role, devices in (("decode", 16), ("prefill", 8)):
        doc = deployment(role, m, efa_devices=devices)
        container = vllm(doc)
        assert container["image"] == EFA_IMAGE
        assert container["resources"]["requests"][EFA_RESOURCE] == str(devices)
        assert container["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        assert {"key": EFA_RESOURCE, "operator": "Exists", "effect": "NoSchedule"} in pod(doc)["tolerations"]


def test_tcp_pods_run_the_stock_image_without_efa() -> None:
    container = vllm(deployment("decode"))
    assert container["image"] == SERVING.vllm_image
    assert EFA_RESOURCE not in container["resources"]["requests"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "runAsUser" not in container["securityContext"]


def test_both_roles_are_valid_deployments() -> None:
    validate_core(deployment("prefill"))
    validate_core(deployment("decode"))
    validate_core(deployment("decode", model(kv_transport="efa", efa_image=EFA_IMAGE), efa_devices=4))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"prefill_decode_role": "decode", "m": ModelConfig(name="plain", weights="Qwen/Qwen3-8B")},
            "'prefill_decode_role' needs a model with prefill_decode, got 'decode' for 'plain'",
        ),
        (
            {"prefill_decode_role": "decode", "efa_devices": 4},
            "'efa_devices' needs a prefill/decode model with kv_transport 'efa', got 4",
        ),
    ],
)
def test_invalid_role_arguments_are_rejected(kwargs: dict[str, Any], message: str) -> None:
    role = kwargs.pop("prefill_decode_role")
    with pytest.raises(ValueError) as caught:
        deployment(role, **kwargs)
    assert str(caught.value) == message


def test_unknown_role_label_is_rejected() -> None:
    with pytest.raises(ValueError) as caught:
        prefill_decode.role_labels("llama-70b", "encode")
    assert str(caught.value) == "'role' must be 'prefill' or 'decode', got 'encode'"


# --------------------------------------------------------------------------- the picker


def _router(**pd: Any) -> dict[str, dict[str, Any]]:
    docs = kv_cache_routing.router_manifests(
        model_name="llama-70b",
        namespace="gpufarm",
        target_port=SERVING.port,
        prefill_decode=PrefillDecodeConfig(**pd),
    )
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in docs}


def _plugins(**pd: Any) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(
        _router(**pd)["ConfigMap/vllm-llama-70b-router"]["data"][kv_cache_routing.PLUGINS_FILE]
    )
    return config


def test_router_runs_llm_ds_picker_over_both_roles() -> None:
    deployment_doc = _router()["Deployment/vllm-llama-70b-router"]
    containers = {c["name"]: c for c in pod(deployment_doc)["containers"]}
    assert containers["epp"]["image"] == prefill_decode.PREFILL_DECODE_EPP_IMAGE
    args = containers["epp"]["args"]
    assert flag(args, "--endpoint-selector") == f"{prefill_decode.PREFILL_DECODE_GROUP_LABEL}=llama-70b"
    # Decode pods take requests through their sidecar, prefill pods in vLLM: both on the serving port.
    assert flag(args, "--endpoint-target-ports") == str(SERVING.port)
    assert flag(args, "--config-file") == f"{kv_cache_routing.CONFIG_MOUNT}/{kv_cache_routing.PLUGINS_FILE}"


def test_picker_disaggregates_only_long_uncached_prompts() -> None:
    config = _plugins(min_uncached_tokens=2048, block_size=64)
    plugins = {p["type"]: p.get("parameters", {}) for p in config["plugins"]}
    assert plugins["prefix-based-pd-decider"] == {"nonCachedTokens": 2048}
    assert plugins["disagg-profile-handler"] == {"deciders": {"prefill": "prefix-based-pd-decider"}}
    # The prefix index must chunk prompts as the engines do, or the decider never fires.
    assert plugins["approx-prefix-cache-producer"]["blockSizeTokens"] == 64
    assert plugins["approx-prefix-cache-producer"]["autoTune"] is False


def test_picker_follows_upstreams_v0_9_0_pd_example() -> None:
    # llm-d-router v0.9.0 deprecates `disagg-headers-handler`: `disagg-profile-handler` writes the
    # prefill header itself (deploy/config/pd-epp-config.yaml declares these plugins, no other).
    assert [p["type"] for p in _plugins()["plugins"]] == [
        "approx-prefix-cache-producer",
        "prefix-cache-scorer",
        "queue-scorer",
        "prefill-filter",
        "decode-filter",
        "max-score-picker",
        "prefix-based-pd-decider",
        "disagg-profile-handler",
    ]


@pytest.mark.skipif(not UPSTREAM_EPP.exists(), reason="../shared/upstream-ref is not beside the repo")
def test_picker_uses_no_plugin_upstream_deprecates() -> None:
    upstream = json.loads(UPSTREAM_EPP.read_text())
    types = {p["type"] for p in _plugins()["plugins"]}
    assert types <= set(upstream["plugins"])
    assert not types & set(upstream["deprecated_plugins"])


def test_picker_profiles_filter_by_role_and_use_declared_plugins() -> None:
    config = _plugins()
    declared = {p["type"] for p in config["plugins"]}
    profiles = {p["name"]: [ref["pluginRef"] for ref in p["plugins"]] for p in config["schedulingProfiles"]}
    assert profiles["prefill"][0] == "prefill-filter"
    assert profiles["decode"][0] == "decode-filter"
    assert all(ref in declared for refs in profiles.values() for ref in refs)
    assert config["apiVersion"] == "llm-d.ai/v1alpha1"


def test_a_changed_picker_config_rolls_the_router() -> None:
    def config_hash(**pd: Any) -> str:
        template = _router(**pd)["Deployment/vllm-llama-70b-router"]["spec"]["template"]
        value: str = template["metadata"]["annotations"][kv_cache_routing.CONFIG_HASH_ANNOTATION]
        return value

    assert config_hash(min_uncached_tokens=512) == config_hash(min_uncached_tokens=512)
    assert config_hash(min_uncached_tokens=512) != config_hash(min_uncached_tokens=1024)


def test_prefill_decode_router_cannot_target_leaders() -> None:
    with pytest.raises(ValueError) as caught:
        kv_cache_routing.router_manifests(
            model_name="llama-70b",
            namespace="gpufarm",
            target_port=8000,
            leaders_only=True,
            prefill_decode=PrefillDecodeConfig(),
        )
    assert (
        str(caught.value)
        == "'leaders_only' must be false with 'prefill_decode' (prefill/decode pods are single-node)"
    )


def test_the_old_disaggregation_keyword_still_works_with_a_deprecation_warning() -> None:
    arguments: dict[str, Any] = {"model_name": "llama-70b", "namespace": "gpufarm", "target_port": 8000}
    with pytest.warns(DeprecationWarning) as warned:
        old = kv_cache_routing.router_manifests(**arguments, disaggregation=PrefillDecodeConfig())
    assert [str(w.message) for w in warned] == [
        "router_manifests(disaggregation=...) is deprecated: pass prefill_decode=..."
    ]
    assert old == kv_cache_routing.router_manifests(**arguments, prefill_decode=PrefillDecodeConfig())
    assert old != kv_cache_routing.router_manifests(**arguments)


def test_the_old_and_new_prefill_decode_keywords_together_are_refused() -> None:
    with pytest.raises(TypeError) as caught:
        kv_cache_routing.router_manifests(
            model_name="llama-70b",
            namespace="gpufarm",
            target_port=8000,
            prefill_decode=PrefillDecodeConfig(),
            disaggregation=PrefillDecodeConfig(),
        )
    assert str(caught.value) == "pass 'prefill_decode' only: 'disaggregation' is its deprecated name"


def test_router_objects_are_valid() -> None:
    for doc in _router().values():
        validate_core(doc)


def test_autoscaled_prefill_pods_leave_replicas_to_keda() -> None:
    m = ModelConfig.model_validate(
        {**model().model_dump(), "prefill_decode": {"prefill_autoscaling": {"max_replicas": 4}}}
    )
    assert "replicas" not in deployment("prefill", m)["spec"]
    assert deployment("decode", m)["spec"]["replicas"] == 3  # the decode pods keep theirs
