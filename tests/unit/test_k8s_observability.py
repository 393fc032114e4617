"""Managed-scraper configuration, scraper RBAC and DCGM exporter values: behaviour of what they return.

The scrape configuration is checked by running its relabelling rules, with Prometheus'
semantics, over the targets Kubernetes pod discovery would produce for the pods gpufarm renders.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml

from gpufarm.config import TierConfig
from gpufarm.config.model import PrefillDecodeConfig
from gpufarm.k8s import demand, gateway, vllm_deployment
from gpufarm.k8s.observability import (
    DCGM_JOB,
    GPU_MANUFACTURER_LABELS,
    SCRAPER_USER,
    VLLM_JOB,
    dcgm_exporter_values,
    scrape_configuration,
    scraper_rbac,
)

from .factories import make_production
from .k8s_schema import validate_core

SERVING_NS = "inference"
DCGM_NS = "dcgm-exporter"


def config(interval: int = 30) -> dict[str, Any]:
    text = scrape_configuration(
        scrape_interval_seconds=interval, serving_namespace=SERVING_NS, dcgm_namespace=DCGM_NS
    )
    parsed: dict[str, Any] = yaml.safe_load(text)
    return parsed


def job(name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [j for j in config()["scrape_configs"] if j["job_name"] == name]
    assert len(found) == 1, f"expected one job {name}, got {len(found)}"
    return found[0]


# ----------------------------------------------------------------------------- discovery + relabelling


def _sanitize(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def pod_targets(
    pod: dict[str, Any], *, phase: str = "Running", node: str = "ip-10-0-1-1"
) -> list[dict[str, str]]:
    """The targets Prometheus' `role: pod` discovery yields for a pod: one per container port."""
    meta = pod["metadata"]
    base = {
        "__meta_kubernetes_namespace": meta["namespace"],
        "__meta_kubernetes_pod_name": meta["name"],
        "__meta_kubernetes_pod_phase": phase,
        "__meta_kubernetes_pod_node_name": node,
        **{f"__meta_kubernetes_pod_label_{_sanitize(k)}": v for k, v in meta.get("labels", {}).items()},
    }
    targets = []
    for init, containers in (
        (False, pod["spec"]["containers"]),
        (True, pod["spec"].get("initContainers", [])),
    ):
        for container in containers:
            for port in container.get("ports", []):
                targets.append(
                    {
                        **base,
                        "__address__": f"10.0.1.5:{port['containerPort']}",
                        "__meta_kubernetes_pod_container_name": container["name"],
                        "__meta_kubernetes_pod_container_init": str(init).lower(),
                        "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
                        "__meta_kubernetes_pod_container_port_number": str(port["containerPort"]),
                    }
                )
    return targets


def relabel(labels: dict[str, str], rules: list[dict[str, Any]]) -> dict[str, str] | None:
    """Prometheus relabelling (keep, drop, replace); None when the target is dropped."""
    out = dict(labels)
    for rule in rules:
        value = rule.get("separator", ";").join(out.get(s, "") for s in rule.get("source_labels", []))
        match = re.fullmatch(rule.get("regex", "(.*)"), value)
        action = rule.get("action", "replace")
        if action == "keep" and not match:
            return None
        if action == "drop" and match:
            return None
        if action == "replace" and match:
            result = match.expand(rule.get("replacement", "$1").replace("$1", r"\1"))
            if result:
                out[rule["target_label"]] = result
            else:
                out.pop(rule["target_label"], None)
    return {k: v for k, v in out.items() if not k.startswith("__")}


def scraped(job_config: dict[str, Any], pods: list[dict[str, Any]], **kwargs: Any) -> list[dict[str, str]]:
    """Final target labels of the pods a job keeps (namespaces outside its discovery are not seen)."""
    [sd] = job_config["kubernetes_sd_configs"]
    namespaces = sd["namespaces"]["names"]
    return [
        kept
        for pod in pods
        if pod["metadata"]["namespace"] in namespaces
        for target in pod_targets(pod, **kwargs)
        if (kept := relabel(target, job_config["relabel_configs"])) is not None
    ]


@pytest.fixture(scope="module")
def vllm_pod(poc: TierConfig) -> dict[str, Any]:
    """A pod of the poc model's Deployment, as the cluster would run it in the serving namespace."""
    model = poc.models[0]
    deployment = vllm_deployment(
        model, poc.serving, pool_name=poc.pool_of(model).name, region=poc.environment.region
    )
    template = copy.deepcopy(deployment["spec"]["template"])
    return {
        "metadata": {**template["metadata"], "name": "vllm-model-abc12", "namespace": SERVING_NS},
        "spec": template["spec"],
    }


def dcgm_pod(namespace: str = DCGM_NS) -> dict[str, Any]:
    """A pod of the dcgm-exporter chart's DaemonSet (labels and port as the chart renders them)."""
    return {
        "metadata": {
            "name": "dcgm-exporter-x7k2p",
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/name": "dcgm-exporter",
                "app.kubernetes.io/instance": "dcgm-exporter",
            },
        },
        "spec": {"containers": [{"name": "exporter", "ports": [{"name": "metrics", "containerPort": 9400}]}]},
    }


# ----------------------------------------------------------------------------- scrape configuration


def test_configuration_is_yaml_with_the_vllm_and_dcgm_jobs() -> None:
    assert [j["job_name"] for j in config()["scrape_configs"]] == [VLLM_JOB, DCGM_JOB]


def test_global_scrape_interval_comes_from_the_argument() -> None:
    assert config(60)["global"] == {"scrape_interval": "60s"}


def test_every_job_discovers_pods_in_one_namespace_only() -> None:
    assert {j["job_name"]: j["kubernetes_sd_configs"] for j in config()["scrape_configs"]} == {
        VLLM_JOB: [{"role": "pod", "namespaces": {"names": [SERVING_NS]}}],
        DCGM_JOB: [{"role": "pod", "namespaces": {"names": [DCGM_NS]}}],
    }


def test_jobs_scrape_plain_http_metrics_paths() -> None:
    assert {(j["scheme"], j["metrics_path"]) for j in config()["scrape_configs"]} == {("http", "/metrics")}


def test_vllm_pod_is_scraped_once_on_its_http_port_with_the_labels_keda_uses(
    vllm_pod: dict[str, Any],
) -> None:
    targets = scraped(job(VLLM_JOB), [vllm_pod])
    model = vllm_pod["metadata"]["labels"]["gpufarm.io/model"]
    assert targets == [{"namespace": SERVING_NS, "pod": "vllm-model-abc12", "model": model}]


def test_vllm_job_keeps_only_the_engine_metrics() -> None:
    assert job(VLLM_JOB)["metric_relabel_configs"] == [
        {"source_labels": ["__name__"], "regex": "vllm:.+", "action": "keep"}
    ]


def test_vllm_job_skips_native_sidecars_even_with_an_http_port(vllm_pod: dict[str, Any]) -> None:
    pod = copy.deepcopy(vllm_pod)
    pod["spec"]["initContainers"] = [
        {
            "name": "target-control-agent",
            "restartPolicy": "Always",
            "ports": [{"name": "http", "containerPort": 80}],
        }
    ]
    assert [t["pod"] for t in scraped(job(VLLM_JOB), [pod])] == ["vllm-model-abc12"]


def test_vllm_job_skips_pods_that_are_not_running(vllm_pod: dict[str, Any]) -> None:
    assert scraped(job(VLLM_JOB), [vllm_pod], phase="Pending") == []


def test_vllm_job_skips_other_apps_in_the_serving_namespace(vllm_pod: dict[str, Any]) -> None:
    other = copy.deepcopy(vllm_pod)
    other["metadata"]["labels"]["app.kubernetes.io/name"] = "litellm"
    assert scraped(job(VLLM_JOB), [other]) == []


def test_dcgm_exporter_pods_are_scraped_on_9400_with_their_node() -> None:
    assert scraped(job(DCGM_JOB), [dcgm_pod()], node="ip-10-0-2-7") == [{"node": "ip-10-0-2-7"}]


def test_dcgm_job_leaves_namespace_and_pod_to_the_exporter() -> None:
    """DCGM series name the pod using the GPU; target labels of the same name would rename them."""
    targets = {r.get("target_label") for r in job(DCGM_JOB)["relabel_configs"]}
    assert targets & {"namespace", "pod", "container"} == set()


def test_dcgm_job_does_not_scrape_vllm_pods(vllm_pod: dict[str, Any]) -> None:
    in_dcgm_namespace = copy.deepcopy(vllm_pod)
    in_dcgm_namespace["metadata"]["namespace"] = DCGM_NS
    assert scraped(job(DCGM_JOB), [in_dcgm_namespace, vllm_pod]) == []


def test_dcgm_job_ignores_exporters_outside_its_namespace() -> None:
    assert scraped(job(DCGM_JOB), [dcgm_pod("default")]) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"scrape_interval_seconds": 10},
            "'scrape_interval_seconds' must be 30-300 (the scraper's minimum is 30 s), got 10",
        ),
        (
            {"scrape_interval_seconds": 301},
            "'scrape_interval_seconds' must be 30-300 (the scraper's minimum is 30 s), got 301",
        ),
        (
            {"serving_namespace": "Inference"},
            "'serving_namespace' must be a Kubernetes namespace name (a DNS label), got 'Inference'",
        ),
        (
            {"dcgm_namespace": ""},
            "'dcgm_namespace' must be a Kubernetes namespace name (a DNS label), got ''",
        ),
        (  # `$` in the old pattern let a trailing newline through
            {"dcgm_namespace": "dcgm\n"},
            "'dcgm_namespace' must be a Kubernetes namespace name (a DNS label), got 'dcgm\\n'",
        ),
    ],
)
def test_invalid_scrape_configuration_arguments(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {
        "scrape_interval_seconds": 30,
        "serving_namespace": SERVING_NS,
        "dcgm_namespace": DCGM_NS,
        **kwargs,
    }
    with pytest.raises(ValueError) as error:
        scrape_configuration(**args)
    assert str(error.value) == message


# ----------------------------------------------------------------------------- RBAC


def test_scraper_rbac_is_a_valid_cluster_role_and_binding() -> None:
    manifests = scraper_rbac()
    assert [m["kind"] for m in manifests] == ["ClusterRole", "ClusterRoleBinding"]
    for manifest in manifests:
        validate_core(manifest)


def test_scraper_rbac_binds_the_role_to_the_scraper_user() -> None:
    role, binding = scraper_rbac()
    assert binding["subjects"] == [
        {"kind": "User", "name": SCRAPER_USER, "apiGroup": "rbac.authorization.k8s.io"}
    ]
    assert binding["roleRef"] == {
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
        "apiGroup": "rbac.authorization.k8s.io",
    }


def test_scraper_rbac_only_reads() -> None:
    role, _ = scraper_rbac()
    assert {verb for rule in role["rules"] for verb in rule["verbs"]} == {"get", "list", "watch"}


def test_scraper_rbac_may_discover_pods_and_read_metrics_urls() -> None:
    role, _ = scraper_rbac()
    core = next(r for r in role["rules"] if r.get("apiGroups") == [""])
    assert {"pods", "endpoints", "services", "nodes/metrics"} <= set(core["resources"])
    assert {"nonResourceURLs": ["/metrics"], "verbs": ["get"]} in role["rules"]


# ----------------------------------------------------------------------------- DCGM exporter values


def _pod_with(values: dict[str, Any]) -> dict[str, Any]:
    """A Pod carrying the chart's scheduling and resource values, for schema validation."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "dcgm-exporter"},
        "spec": {
            "affinity": values["affinity"],
            "tolerations": values["tolerations"],
            "containers": [{"name": "exporter", "image": "dcgm-exporter", "resources": values["resources"]}],
        },
    }


def test_dcgm_scheduling_and_resources_are_valid_pod_fields() -> None:
    validate_core(_pod_with(dcgm_exporter_values()))


def test_dcgm_runs_on_nvidia_nodes_of_karpenter_or_auto_mode() -> None:
    """Node selector terms are ORed: one term per provisioner's GPU-manufacturer label, and one
    for every gpufarm GPU node (managed node groups carry no manufacturer label)."""
    affinity = dcgm_exporter_values()["affinity"]["nodeAffinity"]
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": label, "operator": "In", "values": ["nvidia"]}]}
        for label in GPU_MANUFACTURER_LABELS
    ] + [{"matchExpressions": [{"key": "gpufarm.io/pool", "operator": "Exists"}]}]
    assert set(GPU_MANUFACTURER_LABELS) == {
        "karpenter.k8s.aws/instance-gpu-manufacturer",
        "eks.amazonaws.com/instance-gpu-manufacturer",
    }


def _selects(terms: list[dict[str, Any]], labels: dict[str, str]) -> bool:
    """Whether a node with `labels` satisfies ORed node selector terms, as the scheduler decides."""

    def holds(expr: dict[str, Any]) -> bool:
        key, op = expr["key"], expr["operator"]
        if op == "In":
            return key in labels and labels[key] in expr["values"]
        if op == "NotIn":
            return key not in labels or labels[key] not in expr["values"]
        if op == "Exists":
            return key in labels
        if op == "DoesNotExist":
            return key not in labels
        raise AssertionError(f"operator {op!r} not modelled")

    return any(all(holds(e) for e in term["matchExpressions"]) for term in terms)


def _gpu_node_labels() -> dict[str, dict[str, str]]:
    """The labels gpufarm gives the GPU nodes of every provisioning mode, from the code that
    creates the node groups and NodePools, for each preset's GPU capacity.

    Only gpufarm's own labels (and the NodePool name Karpenter adds): the provisioner adds more
    (instance type, zone, ...), but with only In/Exists terms a node that matches on a subset of
    its labels matches on all of them, so this is the case that must pass.
    """
    from gpufarm.config import load_preset
    from gpufarm.config.model import NodeGroupAmiType
    from gpufarm.constructs.reserved_capacity import node_group_labels
    from gpufarm.k8s.karpenter import karpenter_gpu_nodepool
    from gpufarm.k8s.nodepool import auto_mode_gpu_nodepool

    def template_labels(nodepool: dict[str, Any]) -> dict[str, str]:
        labels: dict[str, str] = nodepool["spec"]["template"]["metadata"]["labels"]
        return {**labels, "karpenter.sh/nodepool": nodepool["metadata"]["name"]}

    nodes: dict[str, dict[str, str]] = {}
    for pool in load_preset("poc").node_pools:
        nodes[f"auto mode {pool.name}"] = template_labels(auto_mode_gpu_nodepool(pool))
    for tier in ("production", "enterprise"):
        for pool in load_preset(tier).node_pools:
            nodes[f"karpenter {tier} {pool.name}"] = template_labels(karpenter_gpu_nodepool(pool))
    groups = load_preset("enterprise").node_groups
    assert {g.name for g in groups} >= {"h100-base", "h100-multinode"}
    for group in groups:
        nodes[f"node group {group.name}"] = node_group_labels(group)
        bottlerocket = group.model_copy(update={"ami_type": NodeGroupAmiType.BOTTLEROCKET_NVIDIA})
        nodes[f"node group {group.name} (bottlerocket)"] = node_group_labels(bottlerocket)
    return nodes


def test_dcgm_runs_on_every_gpu_node_of_every_provisioning_mode() -> None:
    terms = dcgm_exporter_values()["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    nodes = _gpu_node_labels()
    assert {k.split(" ")[0] for k in nodes} == {"auto", "karpenter", "node"}
    assert {name: _selects(terms, labels) for name, labels in nodes.items()} == dict.fromkeys(nodes, True)


def test_dcgm_stays_off_the_system_nodes() -> None:
    from gpufarm.constructs.cluster import SYSTEM_NODE_LABEL_KEY, SYSTEM_NODE_LABEL_VALUE

    terms = dcgm_exporter_values()["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert not _selects(terms, {SYSTEM_NODE_LABEL_KEY: SYSTEM_NODE_LABEL_VALUE})
    assert not _selects(terms, {"karpenter.k8s.aws/instance-gpu-manufacturer": "amd"})


def test_dcgm_tolerates_the_gpu_taint() -> None:
    assert dcgm_exporter_values()["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]


def test_dcgm_has_no_service_monitor() -> None:
    assert dcgm_exporter_values()["serviceMonitor"] == {"enabled": False}


def test_dcgm_service_listens_where_the_scraper_looks() -> None:
    assert dcgm_exporter_values()["service"]["port"] == 9400
    keep_port = next(
        r
        for r in job(DCGM_JOB)["relabel_configs"]
        if r["source_labels"] == ["__meta_kubernetes_pod_container_port_number"]
    )
    assert keep_port["regex"] == "9400"


def test_dcgm_requests_and_caps_memory() -> None:
    assert dcgm_exporter_values(memory_request_mib=512, memory_limit_mib=2048)["resources"] == {
        "requests": {"cpu": "100m", "memory": "512Mi"},
        "limits": {"memory": "2048Mi"},
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"memory_request_mib": 2048, "memory_limit_mib": 1024},
            "'memory_request_mib' must be positive and at most 'memory_limit_mib' (1024), got 2048",
        ),
        (
            {"memory_request_mib": 0},
            "'memory_request_mib' must be positive and at most 'memory_limit_mib' (1024), got 0",
        ),
        ({"cpu_request_millicores": 0}, "'cpu_request_millicores' must be positive, got 0"),
    ],
)
def test_invalid_dcgm_resources(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as error:
        dcgm_exporter_values(**kwargs)
    assert str(error.value) == message


def test_prefill_and_decode_pods_are_scraped_on_vllm_with_their_role(poc: TierConfig) -> None:
    model = poc.models[0].model_copy(update={"prefill_decode": PrefillDecodeConfig()})
    pods = []
    for role in ("decode", "prefill"):
        deployment = vllm_deployment(
            model,
            poc.serving,
            pool_name=poc.pool_of(model).name,
            region=poc.environment.region,
            prefill_decode_role=role,
        )
        template = copy.deepcopy(deployment["spec"]["template"])
        name = f"{deployment['metadata']['name']}-abc12"
        pods.append(
            {
                "metadata": {**template["metadata"], "name": name, "namespace": SERVING_NS},
                "spec": template["spec"],
            }
        )
    targets = scraped(job(VLLM_JOB), pods)
    # One target per pod (the decode pod's sidecar is not scraped), each tagged with its role.
    assert sorted((t["pod"], t["role"]) for t in targets) == [
        (f"vllm-{model.name}-abc12", "decode"),
        (f"vllm-{model.name}-prefill-abc12", "prefill"),
    ]


# ----------------------------------------------------------------------------- the gateway job


def gateway_pod(tier: TierConfig) -> dict[str, Any]:
    """A pod of the tier's gateway Deployment, as the cluster would run it in the serving namespace."""
    deployment = gateway.gateway_deployment(
        tier,
        config=gateway.litellm_config(tier),
        namespace=SERVING_NS,
        region=tier.environment.region,
        master_key_secret_arn=None,
    )
    template = copy.deepcopy(deployment["spec"]["template"])
    return {
        "metadata": {**template["metadata"], "name": "gateway-5d9f-x2", "namespace": SERVING_NS},
        "spec": template["spec"],
    }


def gateway_config() -> dict[str, Any]:
    text = scrape_configuration(
        scrape_interval_seconds=30,
        serving_namespace=SERVING_NS,
        dcgm_namespace=DCGM_NS,
        gateway_namespace=SERVING_NS,
    )
    parsed: dict[str, Any] = yaml.safe_load(text)
    return parsed


def test_the_gateway_job_is_added_only_when_asked() -> None:
    assert [j["job_name"] for j in config()["scrape_configs"]] == ["vllm", "dcgm-exporter"]
    assert [j["job_name"] for j in gateway_config()["scrape_configs"]] == ["vllm", "dcgm-exporter", "gateway"]


def test_gateway_pods_are_scraped_once_on_the_metrics_port_with_their_namespace(
    vllm_pod: dict[str, Any],
) -> None:
    production = make_production()
    (gateway_job,) = [j for j in gateway_config()["scrape_configs"] if j["job_name"] == "gateway"]
    pod = gateway_pod(production)
    assert scraped(gateway_job, [pod, vllm_pod]) == [{"namespace": SERVING_NS, "pod": "gateway-5d9f-x2"}]
    [target] = [t for t in pod_targets(pod) if relabel(t, gateway_job["relabel_configs"]) is not None]
    assert target["__address__"].endswith(f":{demand.METRICS_PORT}")
    assert scraped(gateway_job, [pod], phase="Pending") == []


def test_gateway_job_keeps_only_gpufarms_counters() -> None:
    (gateway_job,) = [j for j in gateway_config()["scrape_configs"] if j["job_name"] == "gateway"]
    (rule,) = gateway_job["metric_relabel_configs"]
    assert rule["action"] == "keep" and rule["source_labels"] == ["__name__"]
    for kept in (
        "gpufarm_gateway_requests_total",
        "gpufarm_gateway_responses_total",
        "gpufarm_gateway_bedrock_tokens_total",
    ):
        assert re.fullmatch(rule["regex"], kept)
    for other in (
        "gpufarm_gateway_requests_created",
        "gpufarm_gateway_responses_created",
        "gpufarm_gateway_bedrock_tokens_created",
        "litellm_proxy_total_requests_metric_total",
        "process_cpu_seconds_total",
    ):
        assert not re.fullmatch(rule["regex"], other)


def test_gateway_namespace_must_be_a_namespace_name() -> None:
    with pytest.raises(
        ValueError,
        match=r"^'gateway_namespace' must be a Kubernetes namespace name \(a DNS label\), got 'Serving'$",
    ):
        scrape_configuration(
            scrape_interval_seconds=30,
            serving_namespace=SERVING_NS,
            dcgm_namespace=DCGM_NS,
            gateway_namespace="Serving",
        )
