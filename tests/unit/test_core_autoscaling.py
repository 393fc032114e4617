"""The rules of a KEDA scaling section (`gpufarm.core.autoscaling`), and their two readers."""

from __future__ import annotations

from gpufarm.config.model import ModelAutoscalingConfig
from gpufarm.config.validate import validate_tier
from gpufarm.core.autoscaling import ScalingProblem, prefill_scaling_problems, scaling_problems
from gpufarm.core.demand import counts_demand, demand_models, exports_metrics
from gpufarm.k8s.autoscaling import model_autoscaling_issues

from .factories import make_production, make_tier, production_model

AT_MOST_MAX = "must be at most max_replicas (2), got 3"
CRITICAL_AT_ZERO = "must be at least 1 for a critical model (scale to zero needs critical: false), got 0"
NO_TARGET = "must set queue_target and/or kv_cache_target (the metrics it scales on), got neither"
PREFILL_AT_ZERO = (
    "must be at least 1 (the picker sends a long prompt to a prefill pod whenever it disaggregates), got 0"
)


def test_a_problem_names_its_field_under_the_section_or_the_section_itself() -> None:
    assert ScalingProblem("min_replicas", AT_MOST_MAX).path("models[0].autoscaling") == (
        "models[0].autoscaling.min_replicas"
    )
    assert ScalingProblem("", NO_TARGET).path("models[0].autoscaling") == "models[0].autoscaling"


def test_every_broken_rule_of_a_section_is_reported_in_order() -> None:
    scaling = ModelAutoscalingConfig(min_replicas=3, max_replicas=2, queue_target=None)
    assert scaling_problems(scaling, critical=True) == [
        ScalingProblem("min_replicas", AT_MOST_MAX),
        ScalingProblem("", NO_TARGET),
    ]


def test_only_a_critical_model_must_keep_a_replica() -> None:
    parked = ModelAutoscalingConfig(min_replicas=0)
    assert scaling_problems(parked, critical=True) == [ScalingProblem("min_replicas", CRITICAL_AT_ZERO)]
    assert scaling_problems(parked, critical=False) == []
    assert scaling_problems(ModelAutoscalingConfig(), critical=True) == []


def test_prefill_pods_keep_one_pod_and_follow_the_rules_of_a_non_critical_model() -> None:
    parked = ModelAutoscalingConfig(min_replicas=0, queue_target=None)
    assert prefill_scaling_problems(parked) == [
        ScalingProblem("min_replicas", PREFILL_AT_ZERO),
        ScalingProblem("", NO_TARGET),
    ]
    inverted = ModelAutoscalingConfig(min_replicas=3, max_replicas=2)
    assert prefill_scaling_problems(inverted) == [ScalingProblem("min_replicas", AT_MOST_MAX)]


def test_the_validator_and_the_keda_manifests_report_the_same_rules_alike() -> None:
    tier = make_tier()
    model = tier.models[0].model_copy(
        update={
            "critical": True,
            "autoscaling": ModelAutoscalingConfig(min_replicas=0, max_replicas=2, queue_target=None),
        }
    )
    tier = tier.model_copy(update={"models": [model, *tier.models[1:]]})
    section = "models[0].autoscaling"
    from_validator = [
        (issue.path, issue.message)
        for issue in validate_tier(tier)
        if issue.path.startswith(section) and "prometheus" not in issue.message
    ]
    assert from_validator == [(f"{section}.min_replicas", CRITICAL_AT_ZERO), (section, NO_TARGET)]
    assert model_autoscaling_issues(model) == [
        f"model {model.name!r}: {path.removeprefix('models[0].')!r} {message}"
        for path, message in from_validator
    ]


def test_the_gateway_counts_demand_for_models_that_scale_to_zero_while_it_runs() -> None:
    production = make_production()
    assert [m.name for m in demand_models(production)] == ["qwen3-32b-batch"]
    assert counts_demand(production)
    assert not counts_demand(make_production(production_model(1, autoscaling={"min_replicas": 1})))
    assert not counts_demand(make_tier())  # poc: fixed replicas


def test_the_gateway_serves_its_metrics_while_prometheus_scrapes_it() -> None:
    assert exports_metrics(make_production())
    # No model parks at zero: the fallback rate is still exported for Prometheus.
    assert exports_metrics(make_production(production_model(1, autoscaling={"min_replicas": 1})))
    assert not exports_metrics(make_tier())  # poc: no Prometheus, no parked model
