"""Prefill/decode disaggregation: the pieces llm-d's router and vLLM's NixlConnector need.

A disaggregated model runs two kinds of vLLM pods. Decode pods are the model's own Deployment
(`vllm-<model>`, sized by `replicas` or KEDA); prefill pods are a second Deployment
(`vllm-<model>-prefill`, `prefill_decode.prefill_replicas`). Both start vLLM with the
NixlConnector (`kv_role: kv_both`) and the same KV block size, and carry the role label the
router's filters select on (:data:`ROLE_LABEL`).

The model's router is llm-d's endpoint picker (the same standalone layout as KV-cache-aware
routing: an Envoy sidecar calling the picker over ext-proc, no InferencePool, pods found by
label). For every request its decode profile picks a decode pod; when the part of the prompt
that pod has not cached is at least `min_uncached_tokens` long, its prefill profile also picks a
prefill pod and the picker names it in :data:`PREFILLER_HEADER`. Envoy sends the request to the
decode pod's routing sidecar (on the serving port), which posts the prompt to that prefill pod,
hands the returned KV-transfer parameters to its local vLLM (on :data:`DECODE_ENGINE_PORT`), and
vLLM pulls the KV blocks over NIXL before it decodes. Without the header the sidecar passes the
request to its vLLM unchanged.

Images, plugin names and sidecar flags are one release of llm-d's router (v0.9.0: the endpoint
picker and the disaggregation sidecar are released together from llm-d/llm-d-router); see
docs/decisions/0026-prefill-decode.md for the sources and what each setting is for.
"""

from __future__ import annotations

import json
from typing import Any

from gpufarm import images
from gpufarm.config.model import KvTransport, PrefillDecodeConfig, ServingConfig
from gpufarm.core.prefill_decode import DECODE_ENGINE_PORT, NIXL_SIDE_CHANNEL_PORT
from gpufarm.k8s.labels import workload_name
from gpufarm.k8s.security import NONROOT_UID, container_security

PREFILL_DECODE_EPP_IMAGE = images.reference("llm-d-epp")
"""llm-d's endpoint picker (the Gateway API Inference Extension picker plus llm-d's plugins)."""

PREFILL_DECODE_SIDECAR_IMAGE = images.reference("llm-d-disagg-sidecar")
"""llm-d's disaggregation sidecar, the decode pod's reverse proxy; same release as the picker."""

ROLE_LABEL = "llm-d.ai/role"
"""Pod label the picker's `prefill-filter` and `decode-filter` select on (`prefill` / `decode`)."""

PREFILL_DECODE_GROUP_LABEL = "gpufarm.io/pd-group"
"""Pod label shared by a model's prefill and decode pods: the picker's endpoint selector."""

PREFILL_OF_LABEL = "gpufarm.io/prefill-of"
"""Pod label of a model's prefill pods (their Deployment's selector: disjoint from the decode pods')."""

PREFILLER_HEADER = "x-prefiller-host-port"
"""Request header in which the picker names the prefill pod (`ip:port`) for the decode sidecar."""

SIDECAR_CONTAINER = "routing-sidecar"
SIDECAR_PORT_NAME = "pd"

PREFILL_KEEP_ALIVE_SECONDS = 120
"""vLLM's HTTP keep-alive on prefill pods: longer than the sidecar's 90 s idle connections, so a
reused connection is never reset by vLLM's 5 s default (intermittent 502s under load)."""

APPROX_PREFIX_MAX_BLOCKS = 256
APPROX_PREFIX_LRU_PER_SERVER = 31250


def prefill_name(model_name: str) -> str:
    """Name of a model's prefill Deployment."""
    return f"{workload_name(model_name)}-prefill"


def prefill_selector(model_name: str) -> dict[str, str]:
    """Selector of a model's prefill pods (stable across releases: never add to it)."""
    return {"app.kubernetes.io/name": "vllm", PREFILL_OF_LABEL: model_name}


def role_labels(model_name: str, role: str) -> dict[str, str]:
    """Pod-template labels of one role: the picker's role label and the shared group label."""
    if role not in ("prefill", "decode"):
        raise ValueError(f"'role' must be 'prefill' or 'decode', got {role!r}")
    return {ROLE_LABEL: role, PREFILL_DECODE_GROUP_LABEL: model_name}


def endpoint_selector(model_name: str) -> str:
    """The picker's `--endpoint-selector`: every prefill and decode pod of the model."""
    return f"{PREFILL_DECODE_GROUP_LABEL}={model_name}"


def kv_transfer_config(pd: PrefillDecodeConfig) -> str:
    """vLLM's `--kv-transfer-config`: the NixlConnector in both roles; libfabric over EFA if asked."""
    config: dict[str, Any] = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    if pd.kv_transport is KvTransport.EFA:
        config["kv_connector_extra_config"] = {"backends": ["LIBFABRIC"]}
    return json.dumps(config, separators=(",", ":"))


def engine_args(pd: PrefillDecodeConfig) -> list[str]:
    """The vLLM flags both roles add: KV connector and the shared block size."""
    return ["--kv-transfer-config", kv_transfer_config(pd), "--block-size", str(pd.block_size)]


def nixl_env(*, prefill: bool) -> list[dict[str, Any]]:
    """Environment of a disaggregated vLLM container.

    The side channel must advertise the pod's own IP (the decode pod dials the address the
    prefill pod returns; vLLM's default is not routable from another pod). Prefill pods keep
    HTTP connections longer than the sidecar's idle timeout (:data:`PREFILL_KEEP_ALIVE_SECONDS`).
    """
    env: list[dict[str, Any]] = [
        {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_SIDE_CHANNEL_PORT)},
    ]
    if prefill:
        env.append({"name": "VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "value": str(PREFILL_KEEP_ALIVE_SECONDS)})
    return env


def routing_sidecar(serving: ServingConfig) -> dict[str, Any]:
    """The decode pod's disaggregation sidecar, as a native sidecar (an init container that keeps running).

    It listens on the serving port (plain HTTP: the router's Envoy and the pod share the VPC),
    forwards to vLLM on :data:`DECODE_ENGINE_PORT`, and speaks the `nixlv2` protocol with the
    prefill pod the picker names. As a native sidecar it starts before vLLM and stops after it,
    so in-flight requests drain through it. The flags are the release's own (`--vllm-port` and
    `--secure-proxy` are accepted by every release since, as deprecated aliases in newer ones).
    """
    return {
        "name": SIDECAR_CONTAINER,
        "image": PREFILL_DECODE_SIDECAR_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",
        "args": [
            f"--port={serving.port}",
            f"--vllm-port={DECODE_ENGINE_PORT}",
            "--kv-connector=nixlv2",
            "--secure-proxy=false",
        ],
        "ports": [{"name": SIDECAR_PORT_NAME, "containerPort": serving.port, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        # The image's own user (`USER 65532:65532` in llm-d/llm-d-router Dockerfile.sidecar).
        "securityContext": container_security(run_as_user=NONROOT_UID),
    }


def plugins_config(pd: PrefillDecodeConfig) -> str:
    """The picker's `EndpointPickerConfig` for prefill/decode, as the file it reads.

    Two scheduling profiles, each scoring its role's pods on prefix-cache hits (weight 2) and
    queue depth (weight 1). `disagg-profile-handler` always runs the decode profile, runs the
    prefill profile only when `prefix-based-pd-decider` finds at least `min_uncached_tokens`
    uncached prompt tokens, and writes the prefill pod into :data:`PREFILLER_HEADER` (in v0.9.0
    it implements PreRequest itself; the separate `disagg-headers-handler` is deprecated:
    llm-d/llm-d-router@v0.9.0 disagg_headers_handler.go, and upstream's P/D example
    deploy/config/pd-epp-config.yaml declares no headers handler). `approx-prefix-cache-producer`
    builds the prefix index both the scorer and the decider read; its block size must be the
    engines' (`autoTune` would leave it unset and the decider would never disaggregate).
    """
    scorers = [
        {"pluginRef": "max-score-picker"},
        {"pluginRef": "prefix-cache-scorer", "weight": 2},
        {"pluginRef": "queue-scorer", "weight": 1},
    ]
    config = {
        "apiVersion": "llm-d.ai/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [
            {
                "type": "approx-prefix-cache-producer",
                "parameters": {
                    "autoTune": False,
                    "blockSizeTokens": pd.block_size,
                    "maxPrefixBlocksToMatch": APPROX_PREFIX_MAX_BLOCKS,
                    "lruCapacityPerServer": APPROX_PREFIX_LRU_PER_SERVER,
                },
            },
            {"type": "prefix-cache-scorer"},
            {"type": "queue-scorer"},
            {"type": "prefill-filter"},
            {"type": "decode-filter"},
            {"type": "max-score-picker"},
            {"type": "prefix-based-pd-decider", "parameters": {"nonCachedTokens": pd.min_uncached_tokens}},
            {
                "type": "disagg-profile-handler",
                "parameters": {"deciders": {"prefill": "prefix-based-pd-decider"}},
            },
        ],
        "schedulingProfiles": [
            {"name": "prefill", "plugins": [{"pluginRef": "prefill-filter"}, *scorers]},
            {"name": "decode", "plugins": [{"pluginRef": "decode-filter"}, *scorers]},
        ],
    }
    # JSON is YAML: the file stays deterministic without a YAML dependency.
    return json.dumps(config, indent=2) + "\n"


def epp_args(model_name: str, target_port: int, config_path: str) -> list[str]:
    """The llm-d picker's command line: endpoints from labels (no InferencePool), its plugins file."""
    return [
        "--endpoint-selector",
        endpoint_selector(model_name),
        "--endpoint-target-ports",
        str(target_port),
        "--config-file",
        config_path,
        "--tracing=false",
    ]
