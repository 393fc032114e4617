"""KEDA manifests and Helm values: scale each vLLM Deployment on its metrics in Amazon Managed Prometheus.

The KEDA operator queries the workspace with SigV4, signing with its own IAM role (EKS Pod
Identity on the `keda-operator` service account): a TriggerAuthentication with
`podIdentity.provider: aws` hands that identity to every prometheus trigger that references it.

Each query reads the series of the model's engine (:mod:`gpufarm.core.engine_metrics`: vLLM's
`vllm:num_requests_waiting`, SGLang's `sglang:num_queue_reqs`, ...). A vLLM model's series are
selected by `model_name` (vLLM sets it to the served model name) and `namespace` (the Kubernetes
namespace the managed scraper records for each pod); other engines' by `model`, the pod's
`gpufarm.io/model` label the scraper copies onto every series, since not every engine names the
model itself (TensorRT-LLM 1.2.1 labels `model_name="undefined"`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from gpufarm import images
from gpufarm.config.model import Engine, ModelAutoscalingConfig, ModelConfig
from gpufarm.core.autoscaling import ScalingProblem, prefill_scaling_problems, scaling_problems
from gpufarm.core.engine_metrics import ROLE_TEXT as _ROLE_TEXT
from gpufarm.core.engine_metrics import Role, engine_metrics, metric_name, missing_for_scaling
from gpufarm.k8s import demand
from gpufarm.k8s.labels import MODEL_LABEL, common_labels, workload_name
from gpufarm.k8s.prefill_decode import prefill_name

KEDA_API = "keda.sh/v1alpha1"
KEDA_CHART = "keda"
KEDA_REPOSITORY = "https://kedacore.github.io/charts"
OPERATOR_SERVICE_ACCOUNT = "keda-operator"
"""Service account of the KEDA operator, the pod that runs the scalers (and signs AMP queries)."""
TRIGGER_AUTHENTICATION = "gpufarm-amp"
"""Name of the TriggerAuthentication the prometheus triggers reference."""

QUEUE_METRIC = metric_name(Engine.VLLM, Role.WAITING)
RUNNING_METRIC = metric_name(Engine.VLLM, Role.RUNNING)
KV_CACHE_METRIC = metric_name(Engine.VLLM, Role.KV_CACHE_USAGE)
"""vLLM's series (the default engine); other engines' come from :mod:`gpufarm.core.engine_metrics`."""

FALLBACK_FAILURE_THRESHOLD = 3
"""Consecutive failed queries after which KEDA holds the current replica count."""
SCALE_UP_PERIOD_SECONDS = 15
SCALE_UP_MAX_PODS = 4
SCALE_DOWN_PERIOD_SECONDS = 60


def trigger_authentication(namespace: str) -> dict[str, Any]:
    """The TriggerAuthentication that signs AMP queries with the KEDA operator's own IAM role.

    `provider: aws` is KEDA's provider for EKS Pod Identity and IRSA; `identityOwner: keda`
    (KEDA's default, written out) selects the operator's role rather than the scaled
    workload's. It lives in the namespace of the ScaledObjects that reference it.
    """
    return {
        "apiVersion": KEDA_API,
        "kind": "TriggerAuthentication",
        "metadata": {
            "name": TRIGGER_AUTHENTICATION,
            "namespace": namespace,
            "labels": common_labels("autoscaling"),
        },
        "spec": {"podIdentity": {"provider": "aws", "identityOwner": "keda"}},
    }


def model_autoscaling_issues(model: ModelConfig) -> list[str]:
    """What keeps a model from being scaled by KEDA, one message per problem (empty: none).

    The rules are :func:`gpufarm.core.autoscaling.scaling_problems`, which the tier validator
    reports with their config paths; constructs used on their own check again, since they
    accept any ModelConfig.
    """
    scaling = model.autoscaling
    where = f"model {model.name!r}"
    if scaling is None:
        return [f"{where}: 'autoscaling' must be set to scale it with KEDA, got None"]
    return [
        _issue(where, "autoscaling", problem)
        for problem in scaling_problems(scaling, critical=model.critical)
    ] + _engine_issues(model, scaling, capped=False)


def _engine_issues(model: ModelConfig, scaling: ModelAutoscalingConfig, *, capped: bool) -> list[str]:
    """The scaling features whose series the model's engine does not export (the config check's rule)."""
    missing = missing_for_scaling(
        model.engine,
        queue_target=scaling.queue_target is not None,
        kv_cache_target=scaling.kv_cache_target is not None,
        to_zero=scaling.min_replicas == 0,
        capped=capped,
    )
    label = engine_metrics(model.engine).label
    return [
        f"model {model.name!r}: {setting!r} needs the engine's {_ROLE_TEXT[role]} metric, "
        f"which {label} does not export"
        for setting, role in missing
    ]


def _issue(where: str, section: str, problem: ScalingProblem) -> str:
    """A problem of the scaling section at `section` of the model `where` names, as one line."""
    return f"{where}: {problem.path(section)!r} {problem.message}"


def scales_to_zero(model: ModelConfig) -> bool:
    """True when KEDA may remove every replica of the model (min_replicas 0)."""
    return demand.scales_to_zero(model)


PodRole = Literal["prefill", "decode"]
"""The pods of a prefill/decode model a query reads (the scraper copies their `llm-d.ai/role`)."""


def series_selector(model: ModelConfig, namespace: str, *, role: PodRole | None = None) -> str:
    """The PromQL label matchers of one model's engine series: `{namespace="..",model_name=".."}`.

    vLLM's series are selected by the served name vLLM labels them with (`model_name`); other
    engines' by the `model` label the scraper copies from the pod (`{namespace="..",model=".."}`).

    A prefill/decode model's prefill and decode pods report the same model name, so its series
    are narrowed to one `role`: `decode` by default (the model's own Deployment), `prefill` for
    its prefill pods.
    """
    if role is None and model.prefill_decode is not None:
        role = "decode"
    matcher = f",role={_promql_string(role)}" if role else ""
    if model.engine is Engine.VLLM:
        named = f"model_name={_promql_string(model.api_model_name)}"
    else:
        named = f"{MODEL_SERIES_LABEL}={_promql_string(model.name)}"
    return f"{{namespace={_promql_string(namespace)},{named}{matcher}}}"


MODEL_SERIES_LABEL = "model"
"""The label the managed scraper gives every engine series: the pod's `gpufarm.io/model`."""


def _metric(model: ModelConfig, role: Role) -> str:
    return metric_name(model.engine, role)


def queue_query(model: ModelConfig, namespace: str, *, role: PodRole | None = None) -> str:
    """Requests waiting for a slot, summed over the model's replicas (one element, or none).

    ValueError when the model's engine exports no waiting-requests series."""
    metric = _metric(model, Role.WAITING)
    return _one_element(f"sum({metric}{series_selector(model, namespace, role=role)})", model, role)


def kv_cache_query(model: ModelConfig, namespace: str, *, role: PodRole | None = None) -> str:
    """KV-cache usage (0-1 per replica), summed over the model's replicas."""
    metric = _metric(model, Role.KV_CACHE_USAGE)
    return _one_element(f"sum({metric}{series_selector(model, namespace, role=role)})", model, role)


def in_flight_query(model: ModelConfig, namespace: str) -> str:
    """Requests running plus waiting, summed over the model's replicas."""
    selector = series_selector(model, namespace)
    running, waiting = _metric(model, Role.RUNNING), _metric(model, Role.WAITING)
    return _one_element(f"(sum({running}{selector}) + sum({waiting}{selector}))", model, None)


DEFAULT_SCRAPE_INTERVAL_SECONDS = 30
"""The managed scraper's interval when none is given (`observability.prometheus.scrape_interval_seconds`)."""
WAKE_THRESHOLD = 1
"""The wake trigger's target: it reads at most 1, so on its own it never asks for a second replica."""


def wake_window_seconds(scaling: ModelAutoscalingConfig, scrape_interval_seconds: int) -> int:
    """The range of the wake query's `increase()`: twice the scrape interval plus the polling interval.

    A request is seen once a scrape after it has landed; the range must then still hold that
    sample and one before the request (two scrape intervals) for at least one KEDA poll (one
    polling interval), twice over so a slow scrape or poll does not miss it.
    """
    return 2 * (scrape_interval_seconds + scaling.polling_interval_seconds)


def wake_query(model: ModelConfig, namespace: str, *, window_seconds: int) -> str:
    """Requests the gateway received for the model over the last `window_seconds`, capped at 1.

    Reads the gateway's demand counter (:data:`gpufarm.k8s.demand.METRIC`, one series per
    gateway pod, selected by the client-facing name and the gateway's `namespace`). It exists at
    zero replicas, unlike vLLM's series: above 0 (the activation threshold) after any request in
    the window, 0 otherwise. Capped at 1 so that, against a target of 1, it holds one replica
    and leaves the scale-out to the vLLM triggers.
    """
    selector = (
        f"{{namespace={_promql_string(namespace)},"
        f"{demand.MODEL_LABEL}={_promql_string(model.api_model_name)}}}"
    )
    return f"clamp_max(sum(increase({demand.METRIC}{selector}[{window_seconds}s])), {WAKE_THRESHOLD})"


def prefill_autoscaling_issues(model: ModelConfig) -> list[str]:
    """What keeps a model's prefill pods from being scaled by KEDA, one message per problem.

    The rules are :func:`gpufarm.core.autoscaling.prefill_scaling_problems`.
    """
    pd = model.prefill_decode
    where = f"model {model.name!r}"
    section = "prefill_decode.prefill_autoscaling"
    if pd is None or pd.prefill_autoscaling is None:
        return [f"{where}: {section!r} must be set to scale its prefill pods, got None"]
    return [
        _issue(where, section, problem) for problem in prefill_scaling_problems(pd.prefill_autoscaling)
    ] + _engine_issues(model, pd.prefill_autoscaling, capped=False)


def prefill_scaled_object(
    model: ModelConfig, *, namespace: str, query_endpoint: str, region: str
) -> dict[str, Any]:
    """The ScaledObject that scales a prefill/decode model's prefill Deployment on its prefill pods.

    As :func:`scaled_object`, with `prefill_decode.prefill_autoscaling` for the bounds and targets
    and the queries narrowed to `role="prefill"`: waiting requests there are prompts the picker
    sent to be prefilled. Prefill pods never scale to zero (min_replicas is at least 1).
    """
    issues = prefill_autoscaling_issues(model)
    if issues:
        raise ValueError("; ".join(issues))
    pd = model.prefill_decode
    assert pd is not None and pd.prefill_autoscaling is not None
    return _scaled_object(
        model,
        pd.prefill_autoscaling,
        name=prefill_name(model.name),
        role="prefill",
        namespace=namespace,
        query_endpoint=query_endpoint,
        region=region,
        capped=False,
        scrape_interval_seconds=DEFAULT_SCRAPE_INTERVAL_SECONDS,
    )


CAPPED_IN_FLIGHT_SHARE = 0.8
"""Behind the Target Optimizer, scale out when replicas run at this share of their concurrency cap."""


def scaled_object(
    model: ModelConfig,
    *,
    namespace: str,
    query_endpoint: str,
    region: str,
    capped: bool = False,
    scrape_interval_seconds: int = DEFAULT_SCRAPE_INTERVAL_SECONDS,
) -> dict[str, Any]:
    """The ScaledObject that scales one model's vLLM Deployment between its min and max replicas.

    One `prometheus` trigger per configured target, each a sum over the model's replicas with
    `metricType: AverageValue`, so the HPA divides by the replica count: `queue` aims at
    `queue_target` waiting requests per replica, `kv-cache` at `kv_cache_target` KV-cache usage
    per replica. A model that scales to zero (min_replicas 0) also gets `in-flight` (running plus
    waiting requests, aiming at the replica's concurrency cap), whose activation keeps a replica
    up while it serves anything; at zero replicas vLLM exports nothing, so its queries fall back
    to `vector(0)`. Such a model also gets `wake` (:func:`wake_query`): the requests the gateway
    received for it, which exist at zero replicas, so the first request through the gateway
    wakes it (docs/decisions/0049-wake-scale-from-zero.md). The gateway must run in `namespace`
    and count the model (:func:`gpufarm.k8s.demand.demand_models`); `scrape_interval_seconds`
    (default 30, the managed scraper's) sizes the wake query's range.

    Models that keep at least one replica query without that fallback and with
    `ignoreNullValues: "false"`: a missing series is an error, and after
    FALLBACK_FAILURE_THRESHOLD errors KEDA holds the current replica count (`fallback` with
    `behavior: currentReplicas`) instead of scaling down on a scrape outage. `fallback.replicas`
    is min_replicas; its zero on scale-to-zero models keeps a failing query from waking a
    parked model. The HPA scales up at once (no stabilization; +100% or +4 pods per 15 s) and
    down only after `scale_down_stabilization_seconds`, one pod a minute.

    `capped`: the ALB Target Optimizer limits each replica to `model.max_concurrency` requests,
    so excess load waits at the load balancer (or gets a 503) and vLLM's own queue stays near
    empty. Such models also get `in-flight`, aiming at CAPPED_IN_FLIGHT_SHARE of the cap per
    replica, so they scale out before every replica is full.

    `query_endpoint` is the workspace URL KEDA appends `/api/v1/query` to:
    `https://aps-workspaces.<region>.amazonaws.com/workspaces/<workspace id>`.
    """
    issues = model_autoscaling_issues(model)
    if capped and model.autoscaling is not None:
        issues += [i for i in _engine_issues(model, model.autoscaling, capped=True) if i not in issues]
    if issues:
        raise ValueError("; ".join(issues))
    assert model.autoscaling is not None
    return _scaled_object(
        model,
        model.autoscaling,
        name=workload_name(model.name),
        role=None,
        namespace=namespace,
        query_endpoint=query_endpoint,
        region=region,
        capped=capped,
        scrape_interval_seconds=scrape_interval_seconds,
    )


def _scaled_object(
    model: ModelConfig,
    scaling: ModelAutoscalingConfig,
    *,
    name: str,
    role: PodRole | None,
    namespace: str,
    query_endpoint: str,
    region: str,
    capped: bool,
    scrape_interval_seconds: int,
) -> dict[str, Any]:
    to_zero = scaling.min_replicas == 0
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
        "minReplicaCount": scaling.min_replicas,
        "maxReplicaCount": scaling.max_replicas,
        "pollingInterval": scaling.polling_interval_seconds,
    }
    if to_zero:
        spec["cooldownPeriod"] = scaling.cooldown_seconds
    spec["fallback"] = {
        "failureThreshold": FALLBACK_FAILURE_THRESHOLD,
        "replicas": scaling.min_replicas,
        "behavior": "currentReplicas",
    }
    spec["advanced"] = {"horizontalPodAutoscalerConfig": {"behavior": hpa_behavior(scaling)}}
    spec["triggers"] = _triggers(
        model,
        scaling,
        role=role,
        namespace=namespace,
        query_endpoint=query_endpoint,
        region=region,
        capped=capped,
        scrape_interval_seconds=scrape_interval_seconds,
    )
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**common_labels("autoscaling"), MODEL_LABEL: model.name},
        },
        "spec": spec,
    }


def hpa_behavior(scaling: ModelAutoscalingConfig) -> dict[str, Any]:
    """HPA behavior: scale up without delay, scale down one pod a minute after the stabilization window."""
    return {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Percent", "value": 100, "periodSeconds": SCALE_UP_PERIOD_SECONDS},
                {"type": "Pods", "value": SCALE_UP_MAX_PODS, "periodSeconds": SCALE_UP_PERIOD_SECONDS},
            ],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": scaling.scale_down_stabilization_seconds,
            "selectPolicy": "Min",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": SCALE_DOWN_PERIOD_SECONDS}],
        },
    }


def _keda_image(name: str, digests: Mapping[str, str] | None) -> dict[str, str]:
    """The chart's `image.<component>` keys for table image `name`: registry, repository, tag."""
    registry, repository = images.image(name).repository.split("/", 1)
    return {"registry": registry, "repository": repository, "tag": images.helm_tag(name, digests)}


def keda_values(
    *,
    operator_replicas: int = 2,
    node_selector: dict[str, str] | None = None,
    digests: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Helm values for the `keda` chart.

    Defaults: two operator replicas (one leads; the other takes over within the lease) spread
    over nodes, with a disruption budget of one; one metrics server and one webhook (KEDA
    supports a single active metrics server). No GPU toleration, so every KEDA pod stays off
    the tainted GPU nodes; `node_selector` pins them further (e.g. to the system node group).
    The operator's service account is named OPERATOR_SERVICE_ACCOUNT, which the Pod Identity
    association targets. Secret access is restricted to KEDA's own namespace: the triggers
    authenticate with Pod Identity, not secrets.

    Limits are memory only: no CPU limit, so a busy operator is not throttled while it has a
    CPU request to stand on. The chart's defaults carry `limits.cpu: 1` for each pod
    (kedacore/charts@v2.18.1 keda/values.yaml) and Helm merges maps key by key, so the CPU
    limit is set to None (null): "If you need to delete a key from the default values, you may
    override the value of the key to be null, in which case Helm will remove the key from the
    overridden values merge" (https://helm.sh/docs/chart_template_guide/values_files/#deleting-a-default-key).

    Images: the table's `keda-operator`, `keda-metrics-apiserver` and `keda-admission-webhooks`,
    each digest from `digests` (the tier's `images.digests`) in the `tag` value: the chart
    builds `registry/repository:tag` (kedacore/charts keda/templates/manager/deployment.yaml).
    """
    small = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": None, "memory": "512Mi"}}
    operator = {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"cpu": None, "memory": "1Gi"}}
    values: dict[str, Any] = {
        "image": {
            key: _keda_image(name, digests)
            for key, name in (
                ("keda", "keda-operator"),
                ("metricsApiServer", "keda-metrics-apiserver"),
                ("webhooks", "keda-admission-webhooks"),
            )
        },
        "operator": {"replicaCount": operator_replicas},
        "metricsServer": {"replicaCount": 1},
        "webhooks": {"replicaCount": 1},
        "serviceAccount": {"operator": {"create": True, "name": OPERATOR_SERVICE_ACCOUNT}},
        "resources": {"operator": operator, "metricServer": small, "webhooks": small},
        "podDisruptionBudget": {"operator": {"maxUnavailable": 1}},
        "topologySpreadConstraints": {
            "operator": [
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": {"app": "keda-operator"}},
                }
            ]
        },
        "permissions": {
            "operator": {"restrict": {"secret": True}},
            "metricServer": {"restrict": {"secret": True}},
        },
        "tolerations": [],
    }
    if node_selector:
        values["nodeSelector"] = dict(node_selector)
    return values


# --------------------------------------------------------------------------- internals


def _triggers(
    model: ModelConfig,
    scaling: ModelAutoscalingConfig,
    *,
    role: PodRole | None,
    namespace: str,
    query_endpoint: str,
    region: str,
    capped: bool,
    scrape_interval_seconds: int,
) -> list[dict[str, Any]]:
    wanted: list[tuple[str, str, float]] = []
    if scaling.queue_target is not None:
        wanted.append(("queue", queue_query(model, namespace, role=role), scaling.queue_target))
    if scaling.kv_cache_target is not None:
        wanted.append(("kv-cache", kv_cache_query(model, namespace, role=role), scaling.kv_cache_target))
    to_zero = scaling.min_replicas == 0
    if capped:
        share = max(1, math.floor(model.max_concurrency * CAPPED_IN_FLIGHT_SHARE))
        wanted.append(("in-flight", in_flight_query(model, namespace), share))
    elif to_zero:
        wanted.append(("in-flight", in_flight_query(model, namespace), model.max_concurrency))
    triggers = [
        _prometheus_trigger(
            trigger_name,
            query,
            threshold,
            query_endpoint=query_endpoint,
            region=region,
            ignore_null_values=to_zero,
        )
        for trigger_name, query, threshold in wanted
    ]
    if to_zero and role != "prefill":
        # The gateway's counter exists at zero replicas: the one trigger that can wake the model.
        # An empty answer means the gateway is not scraped: an error, not a silent 0.
        window = wake_window_seconds(scaling, scrape_interval_seconds)
        triggers.append(
            _prometheus_trigger(
                "wake",
                wake_query(model, namespace, window_seconds=window),
                WAKE_THRESHOLD,
                query_endpoint=query_endpoint,
                region=region,
                ignore_null_values=False,
            )
        )
    return triggers


def _prometheus_trigger(
    name: str, query: str, threshold: float, *, query_endpoint: str, region: str, ignore_null_values: bool
) -> dict[str, Any]:
    """One `prometheus` trigger on AMP, signed by the operator's role; active above 0.

    KEDA activates a scaler when its value is strictly greater than `activationThreshold`
    (kedacore/keda pkg/scalers/prometheus_scaler.go `GetMetricsAndActivity`: `val >
    ActivationThreshold`), and activation alone decides 0 <-> 1 (keda-docs
    content/docs/2.18/concepts/scaling-deployments.md, "Activating and Scaling thresholds").
    `ignoreNullValues: "true"` reads an empty answer as 0; `"false"` makes it an error.
    """
    return {
        "type": "prometheus",
        "name": name,
        "metricType": "AverageValue",
        "metadata": {
            "serverAddress": query_endpoint,
            "awsRegion": region,
            "query": query,
            "threshold": _number(threshold),
            "activationThreshold": "0",
            "ignoreNullValues": "true" if ignore_null_values else "false",
        },
        "authenticationRef": {"name": TRIGGER_AUTHENTICATION, "kind": "TriggerAuthentication"},
    }


def _one_element(expression: str, model: ModelConfig, role: PodRole | None) -> str:
    """A model that can sit at zero replicas has no series then: answer 0 instead of nothing.

    Prefill pods never scale to zero, whatever the model's own decode pods do.
    """
    return f"{expression} or vector(0)" if role != "prefill" and scales_to_zero(model) else expression


def _promql_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _number(value: float) -> str:
    """A threshold as KEDA reads it (a decimal string): 5.0 -> '5', 0.8 -> '0.8'."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))
