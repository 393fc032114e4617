"""Metrics collection: the managed scraper's configuration and RBAC, and the DCGM exporter's values.

The Amazon Managed Service for Prometheus (AMP) managed scraper runs outside the cluster: it
discovers pods through the Kubernetes API and scrapes their pod IPs from network interfaces in
the cluster's subnets. Two jobs are scraped, nothing else:

* ``vllm``: each vLLM pod's ``/metrics`` on its container port named ``http``, only the
  ``vllm:*`` series (queue depth, KV-cache use, token counters, latency histograms). Each series
  carries ``namespace``, ``pod`` and ``model`` (the pod's ``gpufarm.io/model`` label) next to
  ``model_name``, which vLLM sets itself, and ``role`` (the prefill or decode pods of a
  disaggregated model); KEDA's queries select on these.
* ``sglang`` and ``trtllm`` (when some model runs that engine,
  :mod:`gpufarm.core.engine_metrics`): the same for the pods of the models on that engine, at the
  engine's metrics path (TensorRT-LLM's is ``/prometheus/metrics``), keeping only the engine's
  own series; they get the same ``namespace``, ``pod``, ``model`` and ``role`` labels, so every
  query can group any engine's series by ``model`` and ``pod``. The ``vllm`` job then skips those
  models' pods.
* ``dcgm-exporter``: NVIDIA's DCGM exporter on every GPU node (port 9400). Its series already
  name the GPU's node (``Hostname``) and the pod using the GPU (``namespace``, ``pod``,
  ``container``); the job adds only ``node``, so those labels are not overwritten.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from gpufarm import images
from gpufarm.config.model import Engine
from gpufarm.config.names import is_dns_1123_label
from gpufarm.core.engine_metrics import engine_metrics
from gpufarm.k8s import demand
from gpufarm.k8s import gateway as gw
from gpufarm.k8s.labels import GPU_TAINT_KEY, MODEL_LABEL, POOL_LABEL, common_labels
from gpufarm.k8s.prefill_decode import ROLE_LABEL

MIN_SCRAPE_INTERVAL_SECONDS = 30
"""The managed scraper rejects a configuration that scrapes more often than every 30 s."""

MAX_SCRAPE_INTERVAL_SECONDS = 300

VLLM_JOB = "vllm"
DCGM_JOB = "dcgm-exporter"
DCGM_PORT = 9400
DCGM_APP_NAME = "dcgm-exporter"
"""`app.kubernetes.io/name` of the chart's pods (the chart name, as no `nameOverride` is set)."""

SCRAPER_USER = "aps-collector-user"
"""The Kubernetes user name AMP's documentation maps the scraper's role to."""

SCRAPER_CLUSTER_ROLE = "aps-collector-role"
SCRAPER_BINDING = "aps-collector-user-role-binding"

GPU_MANUFACTURER_LABELS = (
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "eks.amazonaws.com/instance-gpu-manufacturer",
)
"""Node labels naming the GPU maker: on self-managed Karpenter nodes, and on EKS Auto Mode nodes.

Managed node groups get neither (EKS labels their nodes with the node group, capacity type and
AMI, not the GPU), so the exporter also runs on every node carrying `gpufarm.io/pool`
(:data:`DCGM_NODE_LABEL`)."""

DCGM_NODE_LABEL = POOL_LABEL
"""Node label gpufarm puts on every node of its GPU pools and node groups, in every provisioning
mode: Auto Mode and Karpenter NodePools (:mod:`gpufarm.k8s.nodepool`, :mod:`gpufarm.k8s.karpenter`)
and reserved node groups (:func:`gpufarm.constructs.reserved_capacity.node_group_labels`). Every
GPU family gpufarm accepts (:data:`gpufarm.core.instances.GPU_FAMILIES`) is NVIDIA's, so such a
node always has a GPU for the exporter; the system nodes do not carry it."""


def _meta_label(label: str) -> str:
    """Prometheus' discovery label for a pod label: 'gpufarm.io/model' -> '..._gpufarm_io_model'."""
    return "__meta_kubernetes_pod_label_" + re.sub(r"[^A-Za-z0-9_]", "_", label)


def _check_namespace(field: str, value: str) -> None:
    if not is_dns_1123_label(value):
        raise ValueError(f"'{field}' must be a Kubernetes namespace name (a DNS label), got {value!r}")


def _keep(source: str, regex: str) -> dict[str, Any]:
    return {"source_labels": [source], "regex": regex, "action": "keep"}


def _copy(source: str, target: str) -> dict[str, Any]:
    return {"source_labels": [source], "target_label": target, "action": "replace"}


def scrape_configuration(
    *,
    scrape_interval_seconds: int,
    serving_namespace: str,
    dcgm_namespace: str,
    gateway_namespace: str | None = None,
    engine_models: Mapping[Engine, Sequence[str]] | None = None,
) -> str:
    """The Prometheus configuration (YAML) of the managed scraper: the engines' and DCGM's jobs.

    `scrape_interval_seconds` must be 30-300 (30 is the managed scraper's minimum). The text is
    what `AWS::APS::Scraper` `ScrapeConfiguration.ConfigurationBlob` takes in CloudFormation:
    the YAML itself (see docs/decisions/0016-managed-scraper.md). `gateway_namespace` adds the
    `gateway` job: the gateway pods' counters (the demand counter that wakes models parked at
    zero, answers by backend, Bedrock's tokens; :func:`gpufarm.k8s.demand.gateway_scrape_job`).
    Default: no gateway job. `engine_models` names the models (`gpufarm.io/model`) of each
    engine other than vLLM: each such engine gets its own job (:func:`engine_scrape_job`) and the
    `vllm` job leaves those pods out. Default: every model runs vLLM.
    """
    if not MIN_SCRAPE_INTERVAL_SECONDS <= scrape_interval_seconds <= MAX_SCRAPE_INTERVAL_SECONDS:
        raise ValueError(
            f"'scrape_interval_seconds' must be {MIN_SCRAPE_INTERVAL_SECONDS}-{MAX_SCRAPE_INTERVAL_SECONDS} "
            f"(the scraper's minimum is 30 s), got {scrape_interval_seconds}"
        )
    _check_namespace("serving_namespace", serving_namespace)
    _check_namespace("dcgm_namespace", dcgm_namespace)
    if gateway_namespace is not None:
        _check_namespace("gateway_namespace", gateway_namespace)
    others = {
        Engine(engine): sorted(names)
        for engine, names in (engine_models or {}).items()
        if Engine(engine) is not Engine.VLLM and names
    }
    vllm_job: dict[str, Any] = {
        "job_name": VLLM_JOB,
        "metrics_path": "/metrics",
        "scheme": "http",
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [serving_namespace]}}],
        "relabel_configs": [
            _keep(_meta_label("app.kubernetes.io/name"), "vllm"),
            _keep("__meta_kubernetes_pod_container_port_name", "http"),
            # Native sidecars (the target-control agent) are init containers: never scrape them.
            {"source_labels": ["__meta_kubernetes_pod_container_init"], "regex": "true", "action": "drop"},
            _keep("__meta_kubernetes_pod_phase", "Running"),
            *_common_labels(),
        ],
        # Only the engine's own series: Python runtime and HTTP-server series would multiply the
        # ingested samples (AMP bills per sample) without serving a dashboard or a scaler.
        "metric_relabel_configs": [_keep("__name__", engine_metrics(Engine.VLLM).name_pattern)],
    }
    if others:
        # Pods of the models on other engines have their own jobs (path and series differ).
        vllm_job["relabel_configs"].insert(
            0,
            {
                "source_labels": [_meta_label(MODEL_LABEL)],
                "regex": _names_regex([n for names in others.values() for n in names]),
                "action": "drop",
            },
        )
    engine_jobs = [
        engine_scrape_job(engine, names, serving_namespace=serving_namespace)
        for engine, names in sorted(others.items())
    ]
    dcgm_job = {
        "job_name": DCGM_JOB,
        "metrics_path": "/metrics",
        "scheme": "http",
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [dcgm_namespace]}}],
        "relabel_configs": [
            _keep(_meta_label("app.kubernetes.io/name"), DCGM_APP_NAME),
            _keep("__meta_kubernetes_pod_container_port_number", str(DCGM_PORT)),
            _keep("__meta_kubernetes_pod_phase", "Running"),
            _copy("__meta_kubernetes_pod_node_name", "node"),
        ],
    }
    config = {
        "global": {"scrape_interval": f"{scrape_interval_seconds}s"},
        "scrape_configs": [vllm_job, *engine_jobs, dcgm_job]
        + (
            [demand.gateway_scrape_job(gateway_namespace, gw.SELECTOR)]
            if gateway_namespace is not None
            else []
        ),
    }
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


def _common_labels() -> list[dict[str, Any]]:
    """The labels every engine's series carry, whatever the engine labels itself."""
    return [
        _copy("__meta_kubernetes_namespace", "namespace"),
        _copy("__meta_kubernetes_pod_name", "pod"),
        _copy(_meta_label(MODEL_LABEL), "model"),
        # Prefill and decode pods of a disaggregated model report the same model name.
        _copy(_meta_label(ROLE_LABEL), "role"),
    ]


def _names_regex(names: Sequence[str]) -> str:
    return "|".join(re.escape(n) for n in sorted(set(names)))


def engine_scrape_job(engine: Engine, models: Sequence[str], *, serving_namespace: str) -> dict[str, Any]:
    """The scrape job of the pods of `models` (their `gpufarm.io/model`), which run `engine`.

    The engine's metrics path (:attr:`~gpufarm.core.engine_metrics.EngineMetrics.path`) on the
    container port named `http`, only the engine's own series (`name_pattern`), and the labels
    every job gives (`namespace`, `pod`, `model`, `role`). An engine's own `model_name` label is
    kept as it is (SGLang sets the served name; TensorRT-LLM 1.2.1 "undefined").
    """
    if not models:
        raise ValueError(f"'models' must name at least one model running {engine.value}, got none")
    metrics = engine_metrics(engine)
    return {
        "job_name": engine.value,
        "metrics_path": metrics.path,
        "scheme": "http",
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [serving_namespace]}}],
        "relabel_configs": [
            _keep(_meta_label(MODEL_LABEL), _names_regex(models)),
            _keep("__meta_kubernetes_pod_container_port_name", "http"),
            {"source_labels": ["__meta_kubernetes_pod_container_init"], "regex": "true", "action": "drop"},
            _keep("__meta_kubernetes_pod_phase", "Running"),
            *_common_labels(),
        ],
        "metric_relabel_configs": [_keep("__name__", metrics.name_pattern)],
    }


def scraper_rbac() -> list[dict[str, Any]]:
    """ClusterRole + ClusterRoleBinding that let the managed scraper discover and scrape targets.

    Needed only on clusters that authenticate through the `aws-auth` ConfigMap, where the
    scraper's role is mapped to the user `aps-collector-user`. With EKS access entries (the
    `API` authentication modes), AMP creates the scraper's access entry itself, with an access
    policy granting the same rules. The rules are those of the AMP user guide ("Configuring
    your Amazon EKS cluster"), without its `describe` verb, which Kubernetes does not have.
    """
    read = ["get", "list", "watch"]
    labels = common_labels("metrics")
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": SCRAPER_CLUSTER_ROLE, "labels": labels},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": [
                        "nodes",
                        "nodes/proxy",
                        "nodes/metrics",
                        "services",
                        "endpoints",
                        "pods",
                        "ingresses",
                        "configmaps",
                    ],
                    "verbs": read,
                },
                {
                    "apiGroups": ["extensions", "networking.k8s.io"],
                    "resources": ["ingresses/status", "ingresses"],
                    "verbs": read,
                },
                {
                    "apiGroups": ["metrics.eks.amazonaws.com"],
                    "resources": ["kcm/metrics", "ksh/metrics"],
                    "verbs": ["get"],
                },
                {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": SCRAPER_BINDING, "labels": labels},
            "subjects": [{"kind": "User", "name": SCRAPER_USER, "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {
                "kind": "ClusterRole",
                "name": SCRAPER_CLUSTER_ROLE,
                "apiGroup": "rbac.authorization.k8s.io",
            },
        },
    ]


def dcgm_exporter_values(
    *,
    cpu_request_millicores: int = 100,
    memory_request_mib: int = 256,
    memory_limit_mib: int = 1024,
) -> dict[str, Any]:
    """Helm values for NVIDIA's `dcgm-exporter` chart: a DaemonSet on NVIDIA GPU nodes only.

    Defaults: scheduled on every gpufarm GPU node (label `gpufarm.io/pool`: Auto Mode and
    Karpenter pools, and the reserved managed node groups, which carry no GPU-manufacturer
    label), and on any other node whose `karpenter.k8s.aws/instance-gpu-manufacturer` (Karpenter)
    or `eks.amazonaws.com/instance-gpu-manufacturer` (Auto Mode) is `nvidia`; tolerates the
    `nvidia.com/gpu:NoSchedule` taint of GPU pools; requests 100m CPU and 256 MiB, memory capped
    at 1 GiB; ClusterIP Service on 9400; no ServiceMonitor (there is no Prometheus operator: the
    managed scraper finds the pods itself); no pod-label enrichment (it would need cluster-wide
    pod reads and multiply series). The image is the table's `dcgm-exporter`, pinned by digest in
    the `tag` value: the chart builds `repository:tag` (NVIDIA/dcgm-exporter
    deployment/templates/daemonset.yaml).
    """
    if not 0 < memory_request_mib <= memory_limit_mib:
        raise ValueError(
            f"'memory_request_mib' must be positive and at most 'memory_limit_mib' ({memory_limit_mib}), "
            f"got {memory_request_mib}"
        )
    if cpu_request_millicores <= 0:
        raise ValueError(f"'cpu_request_millicores' must be positive, got {cpu_request_millicores}")
    exporter = images.image("dcgm-exporter")
    return {
        "image": {"repository": exporter.repository, "tag": exporter.helm_tag()},
        "serviceMonitor": {"enabled": False},
        "service": {"enable": True, "type": "ClusterIP", "port": DCGM_PORT},
        "kubernetes": {"enablePodLabels": False},
        "affinity": {
            "nodeAffinity": {
                # Terms are ORed: a gpufarm GPU node of any provisioning mode, or an NVIDIA
                # node that Karpenter or Auto Mode launched for someone else's NodePool.
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": label, "operator": "In", "values": ["nvidia"]}]}
                        for label in GPU_MANUFACTURER_LABELS
                    ]
                    + [{"matchExpressions": [{"key": DCGM_NODE_LABEL, "operator": "Exists"}]}]
                }
            }
        },
        "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
        "resources": {
            "requests": {"cpu": f"{cpu_request_millicores}m", "memory": f"{memory_request_mib}Mi"},
            "limits": {"memory": f"{memory_limit_mib}Mi"},
        },
    }
