"""KV-cache-aware routing: a per-model endpoint picker with an Envoy sidecar in front of the model's pods.

The Gateway API Inference Extension's endpoint picker (EPP) in its standalone mode: one pod with
the EPP and an Envoy sidecar that calls it through ext-proc for every request, then forwards the
request to the model-server pod the EPP chose (Envoy's original-destination cluster, the pod
address taken from the `x-gateway-destination-endpoint` header the EPP sets). The EPP finds the
model's pods with a label selector (`--endpoint-selector`), so neither the InferencePool CRD nor
a Gateway API implementation is installed. The load balancer's target group binds the router's
Service instead of the model's. Images, flags, ports and the Envoy configuration follow the
project's standalone chart (`config/charts/standalone`) and `cmd/epp/runner/options.go` at
release v1.5.0; see docs/decisions/0025-kv-aware-routing-and-pd.md.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from gpufarm import images
from gpufarm.config.model import PrefillDecodeConfig
from gpufarm.core.endpoints import ENVOY_READY_PORT as ENVOY_READY_PORT  # re-exported
from gpufarm.core.endpoints import ROUTER_PORT as ROUTER_PORT  # re-exported
from gpufarm.k8s import disagg
from gpufarm.k8s.labels import MODEL_LABEL, common_labels, model_selector
from gpufarm.k8s.labels import router_name as router_name  # re-exported (see labels.py)
from gpufarm.k8s.lws import leader_selector
from gpufarm.k8s.scan import scan_acknowledge
from gpufarm.k8s.security import NONROOT_UID, container_security, pod_security

EPP_IMAGE = images.reference("gaie-epp")
"""The endpoint picker, Gateway API Inference Extension release v1.5.0, pinned by digest."""

ENVOY_IMAGE = images.reference("envoy")
"""The sidecar proxy: the image the standalone chart's Envoy preset runs, pinned by digest."""

ENVOY_ADMIN_PORT = 19000
"""Envoy's admin interface, bound to loopback only."""

EXT_PROC_PORT = 9002
"""The EPP's ext-proc gRPC port (its default `--grpc-port`)."""

GRPC_HEALTH_PORT = 9003
"""The EPP's gRPC health port (its default `--grpc-health-port`), probed by the kubelet."""

METRICS_PORT = 9090
"""The EPP's metrics port (its default `--metrics-port`)."""

DESTINATION_HEADER = "x-gateway-destination-endpoint"
"""Header in which the EPP names the chosen pod (`ip:port`) for Envoy's original-destination cluster."""

ROUTING_HEADERS = (DESTINATION_HEADER, disagg.PREFILLER_HEADER)
"""Headers only the picker may set; Envoy removes them from client requests before asking it."""

PLUGINS_FILE = "default-plugins.yaml"
CONFIG_MOUNT = "/config"
ENVOY_CONFIG_FILE = "envoy.yaml"
ENVOY_CONFIG_MOUNT = "/etc/envoy"
COMPONENT = "router"

CONFIG_HASH_ANNOTATION = "gpufarm.io/config-hash"
"""Pod annotation holding the hash of the router's two config files."""

TERMINATION_GRACE_SECONDS = 130
"""The standalone chart's grace period: long enough for in-flight requests through Envoy to finish."""

CPU_LIMIT_REASON = (
    "the router's Envoy and endpoint picker request CPU and set no CPU limit by design: both sit "
    "on the path of every request to the model, and a CFS quota would throttle them mid-burst "
    "and add latency to each request; memory is limited"
)
"""Why the router has no CPU limit (checkov CKV_K8S_11; see serving.GPU_POD_CPU_LIMIT_REASON)."""

ENVOY_LIVENESS_REASON = (
    "Envoy has a readiness probe only, as in the standalone chart: its one health endpoint, /ready, "
    "answers 503 while Envoy drains, so a liveness probe on it would restart Envoy in the middle "
    "of a drain; a crashed Envoy exits and the kubelet restarts it (the picker has a liveness probe)"
)
"""Why the router's Envoy has no liveness probe (checkov CKV_K8S_8). The standalone chart of
gateway-api-inference-extension gives its Envoy a readiness probe on `/ready` only
(`config/charts/standalone/values.yaml` as read at commit 087c400b, a v1.4 release candidate; the
v1.5.0 file was not available to confirm it is unchanged). That path is Envoy's health check
filter in non-pass-through mode, which answers 200 or 503 from the server's draining state and
fails while `/healthcheck/fail` is set (https://www.envoyproxy.io/docs/envoy/v1.31.6/configuration/http/http_filters/health_check_filter;
the architecture overview's "HTTP health checking filter")."""
API_ACCESS_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where in-cluster Kubernetes clients (client-go) read their token, CA bundle and namespace."""

API_ACCESS_VOLUME: dict[str, Any] = {
    "name": "kube-api-access",
    "projected": {
        "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {
                "downwardAPI": {
                    "items": [
                        {
                            "path": "namespace",
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                        }
                    ]
                }
            },
        ]
    },
}
"""The API-access volume Kubernetes would add to every container, declared for the picker alone.

The same three sources as the volume the service account admission controller injects (a bound
token of the pod's service account, the `kube-root-ca.crt` CA bundle, the namespace; see
https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/), so the picker's
in-cluster client works unchanged, while Envoy, which never calls the API, gets no token.
"""


def router_selector(model_name: str) -> dict[str, str]:
    """Selector of a model's router pods (stable across releases: never add to it)."""
    return {"app.kubernetes.io/name": "vllm-router", MODEL_LABEL: model_name}


def endpoint_selector(model_name: str, *, leaders_only: bool = False) -> str:
    """The EPP's `--endpoint-selector`: the model's serving pods as comma-separated `key=value` pairs.

    `leaders_only` (multi-node models) adds the LeaderWorkerSet leader label, since workers have no
    HTTP port. The EPP accepts `key=value` pairs only, no set-based selectors.
    """
    labels = leader_selector(model_name) if leaders_only else model_selector(model_name)
    return ",".join(f"{key}={value}" for key, value in labels.items())


def plugins_config() -> str:
    """The EPP's scheduling configuration (`EndpointPickerConfig`), as the file it reads.

    One profile scoring every pod on queue depth (weight 2), KV-cache utilization (weight 2) and
    prefix-cache hits (weight 3), the highest total wins: the chart's default profile, which
    prefers reusing a cached prefix over spreading load evenly.
    """
    config = {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [
            {"type": "queue-scorer"},
            {"type": "kv-cache-utilization-scorer"},
            {"type": "prefix-cache-scorer"},
        ],
        "schedulingProfiles": [
            {
                "name": "default",
                "plugins": [
                    {"pluginRef": "queue-scorer", "weight": 2},
                    {"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
                    {"pluginRef": "prefix-cache-scorer", "weight": 3},
                ],
            }
        ],
    }
    # JSON is YAML: the file stays deterministic without a YAML dependency.
    return json.dumps(config, indent=2, sort_keys=False) + "\n"


def _typed(type_name: str, **fields: Any) -> dict[str, Any]:
    return {"@type": f"type.googleapis.com/{type_name}", **fields}


def _static_cluster(name: str, port: int, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "type": "STATIC",
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [
                {
                    "lb_endpoints": [
                        {
                            "endpoint": {
                                "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}}
                            }
                        }
                    ]
                }
            ],
        },
        **extra,
    }


def envoy_config(*, request_timeout_seconds: int = 86400) -> dict[str, Any]:
    """The Envoy sidecar's bootstrap: the standalone chart's Envoy preset, minus its trace logging.

    A listener on :data:`ROUTER_PORT` runs every request through ext-proc to the EPP on
    localhost (:data:`EXT_PROC_PORT`, TLS with the EPP's self-signed certificate, bodies streamed
    both ways), then routes it to the pod named in :data:`DESTINATION_HEADER`. A second listener
    on :data:`ENVOY_READY_PORT` answers `/ready` and serves Envoy's statistics.
    `request_timeout_seconds` bounds a request and its idle time (default: one day, as the chart:
    streamed completions may run long; the load balancer's idle timeout applies in front).
    """
    http_manager = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
    router_filter = {
        "name": "envoy.filters.http.router",
        "typed_config": _typed("envoy.extensions.filters.http.router.v3.Router", suppress_envoy_headers=True),
    }
    ready_listener = {
        "name": "ready",
        "address": {"socket_address": {"address": "0.0.0.0", "port_value": ENVOY_READY_PORT}},
        "filter_chains": [
            {
                "filters": [
                    {
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": _typed(
                            http_manager,
                            stat_prefix="ready",
                            route_config={
                                "name": "local",
                                "virtual_hosts": [
                                    {
                                        "name": "stats",
                                        "domains": ["*"],
                                        "routes": [
                                            {
                                                "match": {"prefix": "/stats/prometheus"},
                                                "route": {"cluster": "prometheus_stats"},
                                            }
                                        ],
                                    }
                                ],
                            },
                            http_filters=[
                                {
                                    "name": "envoy.filters.http.health_check",
                                    "typed_config": _typed(
                                        "envoy.extensions.filters.http.health_check.v3.HealthCheck",
                                        pass_through_mode=False,
                                        headers=[{"name": ":path", "string_match": {"exact": "/ready"}}],
                                    ),
                                },
                                router_filter,
                            ],
                        ),
                    }
                ]
            }
        ],
    }
    timeout = f"{request_timeout_seconds}s"
    model_listener = {
        "name": "vllm",
        "address": {"socket_address": {"address": "0.0.0.0", "port_value": ROUTER_PORT}},
        "per_connection_buffer_limit_bytes": 32768,
        "filter_chains": [
            {
                "name": "vllm",
                "filters": [
                    {
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": _typed(
                            http_manager,
                            stat_prefix=f"http-{ROUTER_PORT}",
                            route_config={
                                "name": "vllm",
                                "virtual_hosts": [
                                    {
                                        "name": "vllm-default",
                                        "domains": ["*"],
                                        "routes": [
                                            {
                                                "match": {"prefix": "/"},
                                                "route": {
                                                    "cluster": "original_destination_cluster",
                                                    "timeout": timeout,
                                                    "idle_timeout": timeout,
                                                },
                                            }
                                        ],
                                    }
                                ],
                            },
                            http_filters=[
                                # A client must not choose the pod (or the prefill pod) itself:
                                # only the picker's answer may set these headers.
                                {
                                    "name": "envoy.filters.http.header_mutation",
                                    "typed_config": _typed(
                                        "envoy.extensions.filters.http.header_mutation.v3.HeaderMutation",
                                        mutations={
                                            "request_mutations": [
                                                {"remove": header} for header in ROUTING_HEADERS
                                            ]
                                        },
                                    ),
                                },
                                {
                                    "name": "envoy.filters.http.ext_proc",
                                    "typed_config": _typed(
                                        "envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
                                        grpc_service={
                                            "envoy_grpc": {
                                                "cluster_name": "ext_proc",
                                                "authority": f"localhost:{EXT_PROC_PORT}",
                                            },
                                            "timeout": "10s",
                                        },
                                        processing_mode={
                                            "request_header_mode": "SEND",
                                            "response_header_mode": "SEND",
                                            "request_body_mode": "FULL_DUPLEX_STREAMED",
                                            "response_body_mode": "FULL_DUPLEX_STREAMED",
                                            "request_trailer_mode": "SEND",
                                            "response_trailer_mode": "SEND",
                                        },
                                        message_timeout="1000s",
                                    ),
                                },
                                router_filter,
                            ],
                            # The load balancer is the client: its address is in X-Forwarded-For.
                            use_remote_address=True,
                            normalize_path=True,
                            merge_slashes=True,
                            common_http_protocol_options={
                                "headers_with_underscores_action": "REJECT_REQUEST"
                            },
                            path_with_escaped_slashes_action="UNESCAPE_AND_REDIRECT",
                        ),
                    }
                ],
            }
        ],
    }
    limits = {"max_connections": 40000, "max_pending_requests": 40000, "max_requests": 40000}
    clusters = [
        _static_cluster("prometheus_stats", ENVOY_ADMIN_PORT, connect_timeout="0.250s"),
        {
            "name": "original_destination_cluster",
            "type": "ORIGINAL_DST",
            "connect_timeout": "1000s",
            "lb_policy": "CLUSTER_PROVIDED",
            "circuit_breakers": {"thresholds": [limits]},
            "original_dst_lb_config": {"use_http_header": True, "http_header_name": DESTINATION_HEADER},
        },
        _static_cluster(
            "ext_proc",
            EXT_PROC_PORT,
            connect_timeout="86400s",
            lb_policy="LEAST_REQUEST",
            circuit_breakers={"thresholds": [{**limits, "max_retries": 1024}]},
            health_checks=[
                {
                    "timeout": "2s",
                    "interval": "10s",
                    "unhealthy_threshold": 3,
                    "healthy_threshold": 2,
                    "reuse_connection": True,
                    "grpc_health_check": {"service_name": "envoy.service.ext_proc.v3.ExternalProcessor"},
                    "tls_options": {"alpn_protocols": ["h2"]},
                }
            ],
            # The EPP serves ext-proc over TLS with a self-signed certificate (its default
            # --secure-serving); the connection never leaves the pod, so it is not verified.
            transport_socket={
                "name": "envoy.transport_sockets.tls",
                "typed_config": _typed(
                    "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                    common_tls_context={"validation_context": {}},
                ),
            },
            typed_extension_protocol_options={
                "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": _typed(
                    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                    explicit_http_config={
                        "http2_protocol_options": {
                            "initial_stream_window_size": 65536,
                            "initial_connection_window_size": 1048576,
                        }
                    },
                )
            },
        ),
    ]
    return {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": ENVOY_ADMIN_PORT}}},
        "static_resources": {"listeners": [ready_listener, model_listener], "clusters": clusters},
    }


def epp_args(model_name: str, target_port: int, *, leaders_only: bool = False) -> list[str]:
    """The EPP's command line: endpoints from labels (no InferencePool), the plugins file, JSON logs."""
    return [
        "--endpoint-selector",
        endpoint_selector(model_name, leaders_only=leaders_only),
        "--endpoint-target-ports",
        str(target_port),
        "--config-file",
        f"{CONFIG_MOUNT}/{PLUGINS_FILE}",
        "--zap-encoder",
        "json",
        "--tracing=false",
    ]


def router_manifests(
    *,
    model_name: str,
    namespace: str,
    target_port: int,
    leaders_only: bool = False,
    node_selector: dict[str, str] | None = None,
    epp_cpu: str = "500m",
    epp_memory: str = "1Gi",
    disaggregation: PrefillDecodeConfig | None = None,
) -> list[dict[str, Any]]:
    """Everything one model's router needs, in apply order.

    A service account allowed to read pods in `namespace` (the EPP watches the model's pods), the
    EPP's plugins config and the Envoy bootstrap as config maps, a single-replica Deployment (the
    EPP keeps its prefix-cache index in memory: the project recommends one active replica, and
    `Recreate` so that a new one takes over at once), and a ClusterIP Service whose port `http`
    (:data:`ROUTER_PORT`) the load balancer's TargetGroupBinding names. `target_port` is the
    model server's port; `leaders_only` for LeaderWorkerSet models; `node_selector` places the
    router (default: anywhere). `epp_cpu`/`epp_memory` are the EPP's requests (memory also its
    limit). The Envoy sidecar requests 100m CPU and 512 MiB, as the chart.

    `disaggregation` (a prefill/decode model) swaps the picker for llm-d's
    (:data:`gpufarm.k8s.disagg.PD_EPP_IMAGE`) with the prefill/decode profiles of
    :func:`gpufarm.k8s.disagg.plugins_config`, over the model's prefill and decode pods. Default:
    the KV-cache-aware picker.
    """
    if not 1 <= target_port <= 65535:
        raise ValueError(f"'target_port' must be between 1 and 65535, got {target_port}")
    if disaggregation is not None and leaders_only:
        raise ValueError(
            "'leaders_only' must be false with 'disaggregation' (prefill/decode pods are single-node)"
        )
    plugins_file = f"{CONFIG_MOUNT}/{PLUGINS_FILE}"
    if disaggregation is None:
        epp_image, plugins_text = EPP_IMAGE, plugins_config()
        picker_args = epp_args(model_name, target_port, leaders_only=leaders_only)
    else:
        epp_image, plugins_text = disagg.PD_EPP_IMAGE, disagg.plugins_config(disaggregation)
        picker_args = disagg.epp_args(model_name, target_port, plugins_file)
    name = router_name(model_name)
    labels = {**common_labels(COMPONENT), **router_selector(model_name)}
    meta = {"name": name, "namespace": namespace, "labels": labels}
    envoy_meta = {**meta, "name": f"{name}-envoy"}
    service_account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta,
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta,
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
    }
    plugins = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "data": {PLUGINS_FILE: plugins_text},
    }
    envoy_text = json.dumps(envoy_config(), indent=2) + "\n"
    envoy = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": envoy_meta,
        "data": {ENVOY_CONFIG_FILE: envoy_text},
    }
    config_hash = hashlib.sha256((plugins_text + envoy_text).encode()).hexdigest()
    envoy_container = {
        "name": "envoy",
        "image": ENVOY_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["envoy"],
        "args": [
            "--service-node",
            name,
            "--log-level",
            "info",
            "--cpuset-threads",
            "--drain-strategy",
            "immediate",
            "--drain-time-s",
            "60",
            "-c",
            f"{ENVOY_CONFIG_MOUNT}/{ENVOY_CONFIG_FILE}",
        ],
        "ports": [
            {"name": "http", "containerPort": ROUTER_PORT, "protocol": "TCP"},
            {"name": "envoy-metrics", "containerPort": ENVOY_READY_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": {
            "httpGet": {"path": "/ready", "port": ENVOY_READY_PORT, "scheme": "HTTP"},
            "periodSeconds": 5,
            "failureThreshold": 1,
            "timeoutSeconds": 1,
        },
        "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": container_security(),
        "volumeMounts": [{"name": "envoy-config", "mountPath": ENVOY_CONFIG_MOUNT, "readOnly": True}],
    }
    epp_container = {
        "name": "epp",
        "image": epp_image,
        "imagePullPolicy": "IfNotPresent",
        "args": picker_args,
        "ports": [
            {"name": "grpc", "containerPort": EXT_PROC_PORT, "protocol": "TCP"},
            {"name": "grpc-health", "containerPort": GRPC_HEALTH_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        "livenessProbe": {
            "grpc": {"port": GRPC_HEALTH_PORT, "service": "inference-extension"},
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
        },
        "readinessProbe": {
            "grpc": {"port": GRPC_HEALTH_PORT, "service": "inference-extension"},
            "periodSeconds": 2,
        },
        "env": [
            {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "resources": {"requests": {"cpu": epp_cpu, "memory": epp_memory}, "limits": {"memory": epp_memory}},
        "securityContext": container_security(),
        "volumeMounts": [
            {"name": "plugins-config", "mountPath": CONFIG_MOUNT, "readOnly": True},
            {"name": API_ACCESS_VOLUME["name"], "mountPath": API_ACCESS_MOUNT, "readOnly": True},
        ],
    }
    pod_spec: dict[str, Any] = {
        "serviceAccountName": name,
        # Only the picker watches pods: it mounts API_ACCESS_VOLUME, Envoy gets no token.
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        # Both images run as distroless `nonroot` (security.NONROOT_UID) and write no files: the
        # picker keeps its index and its self-signed ext-proc certificate in memory
        # (gateway-api-inference-extension `pkg/common/tls`, tls.X509KeyPair of in-memory PEM).
        "securityContext": pod_security(NONROOT_UID),
        "containers": [envoy_container, epp_container],
        "volumes": [
            {"name": "plugins-config", "configMap": {"name": name}},
            {"name": "envoy-config", "configMap": {"name": envoy_meta["name"]}},
            API_ACCESS_VOLUME,
        ],
    }
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": dict(meta),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": router_selector(model_name)},
            # The picker and Envoy read their files once: a changed file must roll the pod.
            "template": {
                "metadata": {"labels": labels, "annotations": {CONFIG_HASH_ANNOTATION: config_hash}},
                "spec": pod_spec,
            },
        },
    }
    scan_acknowledge(deployment, "CKV_K8S_11", CPU_LIMIT_REASON)
    scan_acknowledge(deployment, "CKV_K8S_8", ENVOY_LIVENESS_REASON)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "ClusterIP",
            "selector": router_selector(model_name),
            "ports": [
                {"name": "http", "port": ROUTER_PORT, "targetPort": ROUTER_PORT, "protocol": "TCP"},
                {
                    "name": "grpc-ext-proc",
                    "port": EXT_PROC_PORT,
                    "targetPort": EXT_PROC_PORT,
                    "protocol": "TCP",
                },
                {"name": "http-metrics", "port": METRICS_PORT, "targetPort": METRICS_PORT, "protocol": "TCP"},
            ],
        },
    }
    return [service_account, role, binding, plugins, envoy, deployment, service]
