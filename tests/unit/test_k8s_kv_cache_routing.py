"""The KV-cache-aware router: picker flags, scheduling profile, Envoy bootstrap, Kubernetes objects."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpufarm.images import image, split_reference
from gpufarm.k8s import kv_cache_routing
from gpufarm.k8s.labels import model_selector
from gpufarm.k8s.lws import leader_selector

from .k8s_schema import validate_core

NS = "inference"


def _docs(**kwargs: Any) -> dict[str, dict[str, Any]]:
    arguments: dict[str, Any] = {"model_name": "llama-70b", "namespace": NS, "target_port": 8000, **kwargs}
    return {d["kind"]: d for d in kv_cache_routing.router_manifests(**arguments)}


def _containers(docs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod["containers"]}


def _matches(selector: str, labels: dict[str, str]) -> bool:
    pairs = dict(pair.split("=", 1) for pair in selector.split(","))
    return all(labels.get(k) == v for k, v in pairs.items())


def _flag(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


# --------------------------------------------------------------------------- picker


def test_endpoint_selector_matches_the_model_pods_labels() -> None:
    assert _matches(kv_cache_routing.endpoint_selector("qwen"), model_selector("qwen"))


def test_endpoint_selector_does_not_match_another_models_pods() -> None:
    assert not _matches(kv_cache_routing.endpoint_selector("qwen"), model_selector("llama"))


def test_endpoint_selector_for_multi_node_models_matches_leaders_only() -> None:
    selector = kv_cache_routing.endpoint_selector("big", leaders_only=True)
    worker = {**model_selector("big"), "leaderworkerset.sigs.k8s.io/worker-index": "1"}
    assert (_matches(selector, leader_selector("big")), _matches(selector, worker)) == (True, False)


def test_endpoint_selector_has_no_whitespace() -> None:
    assert " " not in kv_cache_routing.endpoint_selector("big", leaders_only=True)


def test_picker_discovers_pods_by_label_not_by_inference_pool() -> None:
    args = kv_cache_routing.epp_args("qwen", 8000)
    assert (_flag(args, "--endpoint-selector"), "--pool-name" in args) == (
        kv_cache_routing.endpoint_selector("qwen"),
        False,
    )


def test_picker_targets_the_model_server_port() -> None:
    assert _flag(kv_cache_routing.epp_args("qwen", 8123), "--endpoint-target-ports") == "8123"


def test_picker_reads_the_mounted_plugins_file() -> None:
    args = kv_cache_routing.epp_args("qwen", 8000)
    assert _flag(args, "--config-file") == f"{kv_cache_routing.CONFIG_MOUNT}/{kv_cache_routing.PLUGINS_FILE}"


def test_picker_image_is_pinned_to_release_v1_5_0_by_digest() -> None:
    repository, tag, digest = split_reference(kv_cache_routing.EPP_IMAGE)
    assert (repository, tag) == ("registry.k8s.io/gateway-api-inference-extension/epp", "v1.5.0")
    assert digest == image("gaie-epp").digest


def test_scheduling_profile_weights_prefix_cache_above_load() -> None:
    config = json.loads(kv_cache_routing.plugins_config())
    weights = {p["pluginRef"]: p["weight"] for p in config["schedulingProfiles"][0]["plugins"]}
    assert weights == {"queue-scorer": 2, "kv-cache-utilization-scorer": 2, "prefix-cache-scorer": 3}


def test_scheduling_profile_references_only_declared_plugins() -> None:
    config = json.loads(kv_cache_routing.plugins_config())
    declared = {p["type"] for p in config["plugins"]}
    assert {p["pluginRef"] for p in config["schedulingProfiles"][0]["plugins"]} <= declared


def test_scheduling_config_is_an_endpoint_picker_config() -> None:
    config = json.loads(kv_cache_routing.plugins_config())
    assert (config["apiVersion"], config["kind"]) == (
        "inference.networking.x-k8s.io/v1alpha1",
        "EndpointPickerConfig",
    )


# --------------------------------------------------------------------------- envoy


def _listener(name: str) -> dict[str, Any]:
    listeners = kv_cache_routing.envoy_config()["static_resources"]["listeners"]
    return next(item for item in listeners if item["name"] == name)


def _cluster(name: str) -> dict[str, Any]:
    clusters = kv_cache_routing.envoy_config()["static_resources"]["clusters"]
    return next(item for item in clusters if item["name"] == name)


def _endpoint_port(cluster: dict[str, Any]) -> int:
    endpoint = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
    port: int = endpoint["address"]["socket_address"]["port_value"]
    return port


def _http_manager(listener: dict[str, Any]) -> dict[str, Any]:
    manager: dict[str, Any] = listener["filter_chains"][0]["filters"][0]["typed_config"]
    return manager


def test_envoy_listens_on_the_router_port() -> None:
    assert _listener("vllm")["address"]["socket_address"]["port_value"] == kv_cache_routing.ROUTER_PORT


def test_envoy_strips_routing_headers_then_runs_ext_proc_before_routing() -> None:
    filters = [f["name"] for f in _http_manager(_listener("vllm"))["http_filters"]]
    assert filters == [
        "envoy.filters.http.header_mutation",
        "envoy.filters.http.ext_proc",
        "envoy.filters.http.router",
    ]


def test_envoy_removes_client_supplied_routing_headers_before_asking_the_picker() -> None:
    mutation = _http_manager(_listener("vllm"))["http_filters"][0]["typed_config"]
    removed = [m["remove"] for m in mutation["mutations"]["request_mutations"]]
    # A client naming the pod or the prefill pod itself would bypass the picker (and could point
    # the decode sidecar at any address).
    assert sorted(removed) == sorted([kv_cache_routing.DESTINATION_HEADER, "x-prefiller-host-port"])


def test_envoy_ext_proc_cluster_is_the_picker_on_localhost() -> None:
    cluster = _cluster("ext_proc")
    address = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
    assert (address["socket_address"]["address"], _endpoint_port(cluster)) == (
        "127.0.0.1",
        kv_cache_routing.EXT_PROC_PORT,
    )


def test_envoy_streams_bodies_to_the_picker_both_ways() -> None:
    ext_proc = _http_manager(_listener("vllm"))["http_filters"][1]["typed_config"]
    modes = ext_proc["processing_mode"]
    assert (modes["request_body_mode"], modes["response_body_mode"]) == (
        "FULL_DUPLEX_STREAMED",
        "FULL_DUPLEX_STREAMED",
    )


def test_envoy_forwards_to_the_pod_the_picker_names() -> None:
    cluster = _cluster("original_destination_cluster")
    assert (cluster["type"], cluster["original_dst_lb_config"]["http_header_name"]) == (
        "ORIGINAL_DST",
        kv_cache_routing.DESTINATION_HEADER,
    )


def test_envoy_routes_every_path_to_the_picked_pod() -> None:
    route = _http_manager(_listener("vllm"))["route_config"]["virtual_hosts"][0]["routes"][0]
    assert (route["match"], route["route"]["cluster"]) == ({"prefix": "/"}, "original_destination_cluster")


def test_envoy_request_timeout_is_configurable() -> None:
    manager = _http_manager(
        kv_cache_routing.envoy_config(request_timeout_seconds=600)["static_resources"]["listeners"][1]
    )
    assert manager["route_config"]["virtual_hosts"][0]["routes"][0]["route"]["timeout"] == "600s"


def test_envoy_ready_listener_answers_ready() -> None:
    health = _http_manager(_listener("ready"))["http_filters"][0]["typed_config"]
    assert health["headers"] == [{"name": ":path", "string_match": {"exact": "/ready"}}]


def test_envoy_admin_binds_loopback_only() -> None:
    admin = kv_cache_routing.envoy_config()["admin"]["address"]["socket_address"]
    assert admin == {"address": "127.0.0.1", "port_value": kv_cache_routing.ENVOY_ADMIN_PORT}


def test_envoy_statistics_cluster_reaches_the_admin_port() -> None:
    assert _endpoint_port(_cluster("prometheus_stats")) == kv_cache_routing.ENVOY_ADMIN_PORT


def test_envoy_config_map_holds_the_bootstrap_as_parsable_text() -> None:
    docs = kv_cache_routing.router_manifests(model_name="m", namespace=NS, target_port=8000)
    envoy = next(d for d in docs if d["metadata"]["name"] == "vllm-m-router-envoy")
    assert json.loads(envoy["data"][kv_cache_routing.ENVOY_CONFIG_FILE]) == kv_cache_routing.envoy_config()


# --------------------------------------------------------------------------- kubernetes objects


def test_every_object_is_valid_for_kubernetes_1_34() -> None:
    for doc in kv_cache_routing.router_manifests(
        model_name="m", namespace=NS, target_port=8000, node_selector={"a": "b"}
    ):
        validate_core(doc)


def test_objects_are_in_apply_order() -> None:
    kinds = [
        d["kind"] for d in kv_cache_routing.router_manifests(model_name="m", namespace=NS, target_port=8000)
    ]
    assert kinds == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "ConfigMap",
        "Deployment",
        "Service",
    ]


def test_objects_are_named_after_the_model() -> None:
    names = {
        d["metadata"]["name"]
        for d in kv_cache_routing.router_manifests(model_name="m", namespace=NS, target_port=8000)
    }
    assert names == {"vllm-m-router", "vllm-m-router-envoy"}


def test_role_reads_pods_only() -> None:
    assert _docs()["Role"]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list"]}
    ]


def test_role_binding_grants_the_role_to_the_router_service_account() -> None:
    binding = _docs()["RoleBinding"]
    assert (binding["subjects"][0]["name"], binding["roleRef"]["name"]) == ("vllm-llama-70b-router",) * 2


def test_deployment_runs_the_router_as_its_service_account() -> None:
    assert _docs()["Deployment"]["spec"]["template"]["spec"]["serviceAccountName"] == "vllm-llama-70b-router"


def test_deployment_runs_one_picker_replaced_by_recreate() -> None:
    spec = _docs()["Deployment"]["spec"]
    assert (spec["replicas"], spec["strategy"]) == (1, {"type": "Recreate"})


def test_deployment_pods_match_its_selector() -> None:
    spec = _docs()["Deployment"]["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()


def test_router_pods_are_not_selected_as_model_servers() -> None:
    labels = _docs()["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert not _matches(kv_cache_routing.endpoint_selector("llama-70b"), labels)


def test_pod_runs_envoy_and_the_picker() -> None:
    containers = _containers(_docs())
    assert {name: c["image"] for name, c in containers.items()} == {
        "envoy": kv_cache_routing.ENVOY_IMAGE,
        "epp": kv_cache_routing.EPP_IMAGE,
    }


def test_picker_args_follow_the_model() -> None:
    args = _containers(_docs(target_port=9000, leaders_only=True))["epp"]["args"]
    assert args == kv_cache_routing.epp_args("llama-70b", 9000, leaders_only=True)


def test_picker_probes_use_its_grpc_health_service() -> None:
    epp = _containers(_docs())["epp"]
    expected = {"port": kv_cache_routing.GRPC_HEALTH_PORT, "service": "inference-extension"}
    assert (epp["livenessProbe"]["grpc"], epp["readinessProbe"]["grpc"]) == (expected, expected)


def test_picker_mounts_its_plugins_config_map() -> None:
    docs = _docs()
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    mount = _containers(docs)["epp"]["volumeMounts"][0]
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    plugins_map = kv_cache_routing.router_manifests(model_name="llama-70b", namespace=NS, target_port=8000)[3]
    assert (
        mount["mountPath"],
        volume["configMap"]["name"],
        kv_cache_routing.PLUGINS_FILE in plugins_map["data"],
    ) == (
        kv_cache_routing.CONFIG_MOUNT,
        plugins_map["metadata"]["name"],
        True,
    )


def test_envoy_mounts_its_bootstrap_config_map() -> None:
    docs = _docs()
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    envoy = _containers(docs)["envoy"]
    volume = next(v for v in pod["volumes"] if v["name"] == envoy["volumeMounts"][0]["name"])
    assert (_flag(envoy["args"], "-c"), volume["configMap"]["name"]) == (
        f"{kv_cache_routing.ENVOY_CONFIG_MOUNT}/{kv_cache_routing.ENVOY_CONFIG_FILE}",
        "vllm-llama-70b-router-envoy",
    )


def test_envoy_is_ready_only_when_its_ready_listener_answers() -> None:
    probe = _containers(_docs())["envoy"]["readinessProbe"]["httpGet"]
    assert (probe["path"], probe["port"]) == ("/ready", kv_cache_routing.ENVOY_READY_PORT)


def test_containers_cannot_escalate_privileges() -> None:
    contexts = [c["securityContext"] for c in _containers(_docs()).values()]
    assert (
        contexts
        == [
            {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "readOnlyRootFilesystem": True,
                "runAsNonRoot": True,
                "seccompProfile": {"type": "RuntimeDefault"},
            }
        ]
        * 2
    )


def test_picker_resources_are_configurable() -> None:
    resources = _containers(_docs(epp_cpu="2", epp_memory="4Gi"))["epp"]["resources"]
    assert resources == {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "4Gi"}}


def test_node_selector_is_set_only_when_given() -> None:
    with_selector = _docs(node_selector={"role": "system"})["Deployment"]["spec"]["template"]["spec"]
    without = _docs()["Deployment"]["spec"]["template"]["spec"]
    assert (with_selector["nodeSelector"], "nodeSelector" in without) == ({"role": "system"}, False)


def test_service_http_port_reaches_envoy() -> None:
    service = _docs()["Service"]
    http = next(p for p in service["spec"]["ports"] if p["name"] == "http")
    envoy_port = next(p for p in _containers(_docs())["envoy"]["ports"] if p["name"] == "http")
    assert (http["port"], http["targetPort"]) == (kv_cache_routing.ROUTER_PORT, envoy_port["containerPort"])


def test_service_selects_the_router_pods() -> None:
    docs = _docs()
    labels = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert (
        docs["Service"]["spec"]["type"],
        docs["Service"]["spec"]["selector"].items() <= labels.items(),
    ) == (
        "ClusterIP",
        True,
    )


@pytest.mark.parametrize("port", [0, 65536])
def test_target_port_out_of_range_is_refused(port: int) -> None:
    with pytest.raises(ValueError) as raised:
        kv_cache_routing.router_manifests(model_name="m", namespace=NS, target_port=port)
    assert str(raised.value) == f"'target_port' must be between 1 and 65535, got {port}"
