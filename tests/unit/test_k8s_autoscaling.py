"""KEDA manifests: ScaledObjects per model config, the Pod Identity TriggerAuthentication, Helm values."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import ModelConfig, TierConfig, load_preset
from gpufarm.config.model import AutoscalingConfig, ModelAutoscalingConfig, PrefillDecodeConfig
from gpufarm.k8s.autoscaling import (
    FALLBACK_FAILURE_THRESHOLD,
    OPERATOR_SERVICE_ACCOUNT,
    TRIGGER_AUTHENTICATION,
    in_flight_query,
    keda_values,
    kv_cache_query,
    model_autoscaling_issues,
    prefill_scaled_object,
    queue_query,
    scaled_object,
    series_selector,
    trigger_authentication,
    wake_query,
)
from gpufarm.k8s.labels import MODEL_LABEL, workload_name
from tests.helm import chart_available, chart_defaults, helm_merge

from .k8s_schema import validate_crd

NS = "gpufarm"
KEDA_CHART = f"keda@{AutoscalingConfig().keda_chart_version}"
REGION = "us-east-1"
ENDPOINT = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef"
SCALED_OBJECTS = "keda.sh_scaledobjects.yaml"
TRIGGER_AUTHENTICATIONS = "keda.sh_triggerauthentications.yaml"

# A latency-critical model that keeps two replicas and scales on both metrics.
CRITICAL = ModelConfig(
    name="llama",
    weights="meta-llama/Llama-3.3-70B-Instruct",
    served_model_name="meta-llama/Llama-3.3-70B-Instruct",
    autoscaling=ModelAutoscalingConfig(
        min_replicas=2,
        max_replicas=6,
        queue_target=5,
        kv_cache_target=0.8,
        polling_interval_seconds=20,
        cooldown_seconds=900,
        scale_down_stabilization_seconds=420,
    ),
)
# A batch model that may sit at zero replicas, scaling on queue depth only.
PARKABLE = ModelConfig(
    name="qwen-batch",
    weights="Qwen/Qwen3-32B",
    critical=False,
    max_num_seqs=128,
    autoscaling=ModelAutoscalingConfig(
        min_replicas=0, max_replicas=4, queue_target=12.5, cooldown_seconds=1800
    ),
)
KV_ONLY = ModelConfig(
    name="kv-only",
    weights="Qwen/Qwen3-8B",
    autoscaling=ModelAutoscalingConfig(queue_target=None, kv_cache_target=0.75),
)


def render(model: ModelConfig) -> dict[str, Any]:
    return scaled_object(model, namespace=NS, query_endpoint=ENDPOINT, region=REGION)


def triggers(model: ModelConfig) -> dict[str, dict[str, Any]]:
    found = render(model)["spec"]["triggers"]
    by_name = {t["name"]: t for t in found}
    assert len(by_name) == len(found), "trigger names repeat"
    return by_name


@pytest.fixture(scope="module")
def production() -> TierConfig:
    return load_preset("production")


# --------------------------------------------------------------------------- schemas


@pytest.mark.parametrize("model", [CRITICAL, PARKABLE, KV_ONLY], ids=lambda m: m.name)
def test_scaled_object_matches_the_crd(model: ModelConfig) -> None:
    validate_crd(render(model), SCALED_OBJECTS, "v1alpha1")


def test_production_scaled_objects_match_the_crd(production: TierConfig) -> None:
    rendered = [render(m) for m in production.models if m.autoscaling]
    assert [so["metadata"]["name"] for so in rendered] == ["vllm-llama-3-3-70b", "vllm-qwen3-32b-batch"]
    for so in rendered:
        validate_crd(so, SCALED_OBJECTS, "v1alpha1")


def test_trigger_authentication_matches_the_crd() -> None:
    validate_crd(trigger_authentication(NS), TRIGGER_AUTHENTICATIONS, "v1alpha1")


# --------------------------------------------------------------------------- TriggerAuthentication


def test_trigger_authentication_uses_the_keda_operator_identity() -> None:
    auth = trigger_authentication("inference")
    assert (auth["apiVersion"], auth["kind"]) == ("keda.sh/v1alpha1", "TriggerAuthentication")
    assert (auth["metadata"]["name"], auth["metadata"]["namespace"]) == (TRIGGER_AUTHENTICATION, "inference")
    # No roleArn: KEDA signs with the role the operator's own Pod Identity association gives it.
    assert auth["spec"] == {"podIdentity": {"provider": "aws", "identityOwner": "keda"}}


# --------------------------------------------------------------------------- ScaledObject


def test_scaled_object_targets_the_model_deployment() -> None:
    so = render(CRITICAL)
    assert (so["apiVersion"], so["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    assert so["metadata"]["name"] == workload_name("llama")
    assert so["metadata"]["namespace"] == NS
    assert so["metadata"]["labels"][MODEL_LABEL] == "llama"
    assert so["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "vllm-llama",
    }


def test_replica_bounds_and_polling_follow_the_config() -> None:
    spec = render(CRITICAL)["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"], spec["pollingInterval"]) == (2, 6, 20)


def test_only_a_model_with_min_replicas_zero_scales_to_zero() -> None:
    parked = render(PARKABLE)["spec"]
    assert (parked["minReplicaCount"], parked["cooldownPeriod"]) == (0, 1800)
    kept = render(CRITICAL)["spec"]
    assert kept["minReplicaCount"] == 2
    # cooldownPeriod only governs the step to zero; a model that keeps replicas does not set it.
    assert "cooldownPeriod" not in kept


def test_hpa_scales_up_at_once_and_down_after_the_configured_window() -> None:
    behavior = render(CRITICAL)["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleUp"] == {
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Max",
        "policies": [
            {"type": "Percent", "value": 100, "periodSeconds": 15},
            {"type": "Pods", "value": 4, "periodSeconds": 15},
        ],
    }
    assert behavior["scaleDown"] == {
        "stabilizationWindowSeconds": 420,
        "selectPolicy": "Min",
        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
    }


def test_one_trigger_per_configured_target() -> None:
    assert list(triggers(CRITICAL)) == ["queue", "kv-cache"]
    assert list(triggers(KV_ONLY)) == ["kv-cache"]


def test_scale_to_zero_model_adds_the_in_flight_and_wake_triggers() -> None:
    assert list(triggers(PARKABLE)) == ["queue", "in-flight", "wake"]


def test_wake_trigger_reads_the_gateways_request_counter_capped_at_one() -> None:
    wake = triggers(PARKABLE)["wake"]
    assert wake["type"] == "prometheus"
    assert wake["metricType"] == "AverageValue"
    # Default scrape interval 30 s, default polling 15 s: a range of 2 x (30 + 15) = 90 s.
    assert wake["metadata"]["query"] == (
        'clamp_max(sum(increase(gpufarm_gateway_requests_total{namespace="gpufarm",model_name="qwen-batch"}'
        "[90s])), 1)"
    )
    # At most 1 against a target of 1: it holds one replica, never asks for a second.
    assert wake["metadata"]["threshold"] == "1"
    # Active (0 -> 1) on any request in the range: strictly above 0.
    assert wake["metadata"]["activationThreshold"] == "0"
    # The counter exists from the gateway's start: an empty answer means it is not scraped.
    assert wake["metadata"]["ignoreNullValues"] == "false"


def test_wake_range_follows_the_scrape_and_polling_intervals() -> None:
    model = PARKABLE.model_copy(
        update={"autoscaling": PARKABLE.autoscaling.model_copy(update={"polling_interval_seconds": 60})}
    )
    scaled = scaled_object(
        model, namespace=NS, query_endpoint=ENDPOINT, region=REGION, scrape_interval_seconds=120
    )
    (wake,) = [t for t in scaled["spec"]["triggers"] if t["name"] == "wake"]
    assert "[360s]" in wake["metadata"]["query"]  # 2 x (120 + 60)


def test_wake_query_selects_the_client_facing_name() -> None:
    served = PARKABLE.model_copy(update={"served_model_name": 'Qwen/Qwen3-32B "batch"'})
    assert wake_query(served, "serving", window_seconds=60) == (
        "clamp_max(sum(increase(gpufarm_gateway_requests_total"
        '{namespace="serving",model_name="Qwen/Qwen3-32B \\"batch\\""}[60s])), 1)'
    )


def test_only_scale_to_zero_models_get_the_wake_trigger() -> None:
    assert "wake" not in triggers(CRITICAL)
    assert "wake" not in triggers(KV_ONLY)


def test_queue_trigger_sums_waiting_requests_per_replica() -> None:
    queue = triggers(CRITICAL)["queue"]
    assert queue["type"] == "prometheus"
    # AverageValue: the HPA divides the sum by the replica count and aims at queue_target each.
    assert queue["metricType"] == "AverageValue"
    assert queue["metadata"]["query"] == (
        'sum(vllm:num_requests_waiting{namespace="gpufarm",model_name="meta-llama/Llama-3.3-70B-Instruct"})'
    )
    assert queue["metadata"]["threshold"] == "5"


def test_kv_cache_trigger_sums_usage_per_replica() -> None:
    kv = triggers(CRITICAL)["kv-cache"]
    assert kv["metricType"] == "AverageValue"
    assert kv["metadata"]["query"] == (
        'sum(vllm:kv_cache_usage_perc{namespace="gpufarm",model_name="meta-llama/Llama-3.3-70B-Instruct"})'
    )
    assert kv["metadata"]["threshold"] == "0.8"


def test_in_flight_trigger_aims_at_the_replica_concurrency_cap() -> None:
    in_flight = triggers(PARKABLE)["in-flight"]
    assert in_flight["metricType"] == "AverageValue"
    assert in_flight["metadata"]["query"] == (
        '(sum(vllm:num_requests_running{namespace="gpufarm",model_name="qwen-batch"})'
        ' + sum(vllm:num_requests_waiting{namespace="gpufarm",model_name="qwen-batch"})) or vector(0)'
    )
    assert in_flight["metadata"]["threshold"] == str(PARKABLE.max_concurrency) == "128"


def test_fractional_thresholds_keep_their_digits() -> None:
    assert triggers(PARKABLE)["queue"]["metadata"]["threshold"] == "12.5"
    assert triggers(KV_ONLY)["kv-cache"]["metadata"]["threshold"] == "0.75"


def test_every_trigger_queries_amp_with_sigv4_through_the_trigger_authentication() -> None:
    for model in (CRITICAL, PARKABLE, KV_ONLY):
        for trigger in triggers(model).values():
            assert trigger["metadata"]["serverAddress"] == ENDPOINT
            assert trigger["metadata"]["awsRegion"] == REGION
            assert trigger["metadata"]["activationThreshold"] == "0"
            assert trigger["authenticationRef"] == {
                "name": TRIGGER_AUTHENTICATION,
                "kind": "TriggerAuthentication",
            }
            # SigV4 comes from the pod identity; any authModes would replace it.
            assert "authModes" not in trigger["metadata"]


def test_a_model_that_keeps_replicas_treats_missing_series_as_an_error() -> None:
    for trigger in triggers(CRITICAL).values():
        assert trigger["metadata"]["ignoreNullValues"] == "false"
        assert "vector(0)" not in trigger["metadata"]["query"]


def test_a_model_at_zero_reads_missing_series_as_zero() -> None:
    for name, trigger in triggers(PARKABLE).items():
        if name == "wake":
            continue  # the gateway's counter, not vLLM's series (see above)
        assert trigger["metadata"]["ignoreNullValues"] == "true"
        assert trigger["metadata"]["query"].endswith(" or vector(0)")


def test_fallback_holds_the_current_replicas_on_query_errors() -> None:
    assert render(CRITICAL)["spec"]["fallback"] == {
        "failureThreshold": FALLBACK_FAILURE_THRESHOLD,
        "replicas": 2,
        "behavior": "currentReplicas",
    }
    # A zero here keeps a failing query from waking a parked model (KEDA skips fallback scaling).
    assert render(PARKABLE)["spec"]["fallback"]["replicas"] == 0


def test_queries_select_on_the_served_model_name_and_namespace() -> None:
    model = ModelConfig(name="local-name", weights="org/model", served_model_name="org/model")
    assert series_selector(model, "serving") == '{namespace="serving",model_name="org/model"}'


def test_label_values_are_escaped_for_promql() -> None:
    model = ModelConfig(name="odd", weights="org/model", served_model_name='we"ird\\name')
    assert series_selector(model, NS) == '{namespace="gpufarm",model_name="we\\"ird\\\\name"}'


def test_queries_return_a_single_element() -> None:
    # KEDA rejects a result with more than one element: every query aggregates with sum().
    for model in (CRITICAL, PARKABLE):
        for query in (queue_query(model, NS), kv_cache_query(model, NS), in_flight_query(model, NS)):
            assert query.startswith(("sum(", "(sum(")), query
            assert " by " not in query and " by(" not in query


def test_production_preset_models(production: TierConfig) -> None:
    llama, qwen = (render(m) for m in production.models)
    assert (llama["spec"]["minReplicaCount"], llama["spec"]["maxReplicaCount"]) == (2, 6)
    assert [t["name"] for t in llama["spec"]["triggers"]] == ["queue", "kv-cache"]
    assert (qwen["spec"]["minReplicaCount"], qwen["spec"]["cooldownPeriod"]) == (0, 1800)
    assert [t["name"] for t in qwen["spec"]["triggers"]] == ["queue", "in-flight", "wake"]


# --------------------------------------------------------------------------- invalid models


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            ModelConfig(name="fixed", weights="org/model"),
            "model 'fixed': 'autoscaling' must be set to scale it with KEDA, got None",
        ),
        (
            ModelConfig(
                name="inverted",
                weights="org/model",
                autoscaling=ModelAutoscalingConfig(min_replicas=5, max_replicas=2),
            ),
            "model 'inverted': 'autoscaling.min_replicas' must be at most max_replicas (2), got 5",
        ),
        (
            ModelConfig(
                name="vital", weights="org/model", autoscaling=ModelAutoscalingConfig(min_replicas=0)
            ),
            "model 'vital': 'autoscaling.min_replicas' must be at least 1 for a critical model "
            "(scale to zero needs critical: false), got 0",
        ),
        (
            ModelConfig(
                name="blind",
                weights="org/model",
                autoscaling=ModelAutoscalingConfig(queue_target=None, kv_cache_target=None),
            ),
            "model 'blind': 'autoscaling' must set queue_target and/or kv_cache_target "
            "(the metrics it scales on), got neither",
        ),
    ],
    ids=["no-autoscaling", "min-above-max", "critical-to-zero", "no-target"],
)
def test_a_model_keda_cannot_scale_is_rejected(model: ModelConfig, message: str) -> None:
    assert model_autoscaling_issues(model) == [message]
    with pytest.raises(ValueError) as excinfo:
        render(model)
    assert str(excinfo.value) == message


def test_every_problem_of_a_model_is_reported() -> None:
    model = ModelConfig(
        name="broken",
        weights="org/model",
        autoscaling=ModelAutoscalingConfig(min_replicas=0, max_replicas=1, queue_target=None),
    )
    assert model_autoscaling_issues(model) == [
        "model 'broken': 'autoscaling.min_replicas' must be at least 1 for a critical model "
        "(scale to zero needs critical: false), got 0",
        "model 'broken': 'autoscaling' must set queue_target and/or kv_cache_target "
        "(the metrics it scales on), got neither",
    ]


def test_a_valid_model_has_no_issues() -> None:
    assert model_autoscaling_issues(CRITICAL) == model_autoscaling_issues(PARKABLE) == []


# --------------------------------------------------------------------------- Helm values


def test_values_name_the_service_account_the_pod_identity_targets() -> None:
    assert keda_values()["serviceAccount"]["operator"] == {"create": True, "name": OPERATOR_SERVICE_ACCOUNT}
    assert OPERATOR_SERVICE_ACCOUNT == "keda-operator"


def test_values_keep_keda_off_gpu_nodes() -> None:
    values = keda_values()
    assert values["tolerations"] == []
    assert "nodeSelector" not in values


def test_values_pin_keda_to_selected_nodes() -> None:
    values = keda_values(node_selector={"eks.amazonaws.com/nodegroup": "system"})
    assert values["nodeSelector"] == {"eks.amazonaws.com/nodegroup": "system"}


def test_values_run_a_standby_operator_with_a_disruption_budget() -> None:
    values = keda_values()
    assert values["operator"] == {"replicaCount": 2}
    assert values["podDisruptionBudget"] == {"operator": {"maxUnavailable": 1}}
    assert values["topologySpreadConstraints"]["operator"][0]["labelSelector"] == {
        "matchLabels": {"app": "keda-operator"}
    }
    assert keda_values(operator_replicas=1)["operator"] == {"replicaCount": 1}


def test_values_request_resources_for_every_keda_pod() -> None:
    resources = keda_values()["resources"]
    assert set(resources) == {"operator", "metricServer", "webhooks"}
    for pod in resources.values():
        assert set(pod["requests"]) == {"cpu", "memory"}
        assert "memory" in pod["limits"]


@pytest.mark.skipif(not chart_available(KEDA_CHART), reason="../shared/upstream-ref is not beside the repo")
def test_rendered_keda_pods_have_memory_limits_only() -> None:
    # The chart's defaults limit every pod to 1 CPU; Helm merges our limits into them, so the
    # values must delete the key (null) or the pods keep the chart's CPU limit.
    defaults = chart_defaults(KEDA_CHART)["resources"]
    assert all(pod["limits"]["cpu"] == 1 for pod in defaults.values())
    rendered = helm_merge(chart_defaults(KEDA_CHART), keda_values())["resources"]
    assert rendered == {
        "operator": {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "metricServer": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "webhooks": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
    }


def test_values_restrict_secret_access() -> None:
    # Triggers authenticate through Pod Identity: KEDA needs no Secret outside its namespace.
    assert keda_values()["permissions"] == {
        "operator": {"restrict": {"secret": True}},
        "metricServer": {"restrict": {"secret": True}},
    }


def test_models_behind_the_target_optimizer_scale_on_in_flight_against_the_cap() -> None:
    # The agent caps each replica at max_concurrency, so vLLM's queue stays near empty: the
    # in-flight trigger makes the model scale out at 80% of the cap instead.
    model = ModelConfig(
        name="capped",
        weights="Qwen/Qwen3-8B",
        max_num_seqs=64,
        autoscaling=ModelAutoscalingConfig(min_replicas=1, max_replicas=4, queue_target=5),
    )
    capped = scaled_object(
        model, namespace="gpufarm", query_endpoint=ENDPOINT, region="us-east-1", capped=True
    )
    triggers = {t["name"]: t["metadata"] for t in capped["spec"]["triggers"]}
    assert set(triggers) == {"queue", "in-flight"}
    assert triggers["in-flight"]["threshold"] == "51"  # floor(64 x 0.8)
    plain = scaled_object(model, namespace="gpufarm", query_endpoint=ENDPOINT, region="us-east-1")
    assert [t["name"] for t in plain["spec"]["triggers"]] == ["queue"]


def test_disaggregated_model_scales_on_its_decode_pods_only() -> None:
    # Prefill pods report the same model name; their queue must not size the decode Deployment.
    split = CRITICAL.model_copy(update={"prefill_decode": PrefillDecodeConfig()})
    queue = triggers(split)["queue"]
    assert queue["metadata"]["query"] == (
        'sum(vllm:num_requests_waiting{namespace="gpufarm",'
        'model_name="meta-llama/Llama-3.3-70B-Instruct",role="decode"})'
    )
    assert render(split)["spec"]["scaleTargetRef"]["name"] == workload_name("llama")


PREFILL_SCALED = CRITICAL.model_copy(
    update={
        "prefill_decode": PrefillDecodeConfig(
            prefill_autoscaling=ModelAutoscalingConfig(min_replicas=1, max_replicas=5, queue_target=2)
        )
    }
)


def _prefill(model: ModelConfig) -> dict[str, Any]:
    return prefill_scaled_object(model, namespace="gpufarm", query_endpoint=ENDPOINT, region="us-east-1")


def test_prefill_pods_scale_on_their_own_queue() -> None:
    scaled = _prefill(PREFILL_SCALED)
    assert scaled["metadata"]["name"] == "vllm-llama-prefill"
    assert scaled["spec"]["scaleTargetRef"]["name"] == "vllm-llama-prefill"
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (1, 5)
    (queue,) = scaled["spec"]["triggers"]
    assert queue["metadata"]["query"] == (
        'sum(vllm:num_requests_waiting{namespace="gpufarm",'
        'model_name="meta-llama/Llama-3.3-70B-Instruct",role="prefill"})'
    )
    assert queue["metadata"]["threshold"] == "2"
    validate_crd(scaled, SCALED_OBJECTS, "v1alpha1")


def test_prefill_queries_never_fall_back_to_zero_when_decode_pods_may() -> None:
    # The decode pods of a non-critical model may park at zero; its prefill pods keep one.
    parkable = PREFILL_SCALED.model_copy(
        update={
            "critical": False,
            "autoscaling": ModelAutoscalingConfig(min_replicas=0, max_replicas=2, queue_target=5),
        }
    )
    (queue,) = _prefill(parkable)["spec"]["triggers"]
    assert "vector(0)" not in queue["metadata"]["query"]
    assert queue["metadata"]["ignoreNullValues"] == "false"
    assert "cooldownPeriod" not in _prefill(parkable)["spec"]


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            CRITICAL,
            "model 'llama': 'prefill_decode.prefill_autoscaling' must be set to scale its prefill "
            "pods, got None",
        ),
        (
            CRITICAL.model_copy(
                update={
                    "prefill_decode": PrefillDecodeConfig(
                        prefill_autoscaling=ModelAutoscalingConfig(min_replicas=0, max_replicas=2)
                    )
                }
            ),
            "model 'llama': 'prefill_decode.prefill_autoscaling.min_replicas' must be at least 1 (the "
            "picker sends a long prompt to a prefill pod whenever it disaggregates), got 0",
        ),
        (
            CRITICAL.model_copy(
                update={
                    "prefill_decode": PrefillDecodeConfig(
                        prefill_autoscaling=ModelAutoscalingConfig(min_replicas=3, max_replicas=2)
                    )
                }
            ),
            "model 'llama': 'prefill_decode.prefill_autoscaling.min_replicas' must be at most "
            "max_replicas (2), got 3",
        ),
        (
            CRITICAL.model_copy(
                update={
                    "prefill_decode": PrefillDecodeConfig(
                        prefill_autoscaling=ModelAutoscalingConfig(queue_target=None, kv_cache_target=None)
                    )
                }
            ),
            "model 'llama': 'prefill_decode.prefill_autoscaling' must set queue_target and/or "
            "kv_cache_target (the metrics it scales on), got neither",
        ),
    ],
    ids=["unset", "to-zero", "min-above-max", "no-target"],
)
def test_invalid_prefill_scaling_is_rejected(model: ModelConfig, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        _prefill(model)
    assert str(caught.value) == message
