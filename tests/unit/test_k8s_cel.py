"""The CRDs' CEL validation rules (`x-kubernetes-validations`), evaluated as the API server does on
create: every custom object gpufarm's pure functions build passes them, and a mutated object that
breaks a rule is reported with the rule's message, for every CRD that has rules."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import NodePoolConfig, TierConfig, load_preset
from gpufarm.config.model import Provisioning
from gpufarm.k8s import (
    LBC_TGB_API,
    auto_mode_gpu_nodepool,
    ec2_nodeclass,
    karpenter_gpu_nodepool,
    scaled_object,
    target_group_binding,
    trigger_authentication,
)
from gpufarm.k8s.autoscaling import prefill_scaled_object

from .factories import make_production, production_model
from .k8s_schema import (
    cel_errors,
    cel_rules,
    crd_index,
    crd_of,
    custom_object_errors,
    schema_cel_errors,
    with_defaults,
)

NODEPOOLS = ("karpenter.sh_nodepools.yaml", "v1")
NODECLASSES = ("karpenter.k8s.aws_ec2nodeclasses.yaml", "v1")
SCALED_OBJECTS = ("keda.sh_scaledobjects.yaml", "v1alpha1")
INGRESS_CLASS_PARAMS = ("elbv2.k8s.aws_ingressclassparams.yaml", "v1beta1")
AMP = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-01234567-89ab-cdef-0123-456789abcdef"
SG = "sg-0123456789abcdef0"
TG_ARN = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/vllm/0123456789abcdef"


def _presets() -> list[TierConfig]:
    return [load_preset(name) for name in ("poc", "production", "enterprise")]


def _karpenter_pools() -> list[NodePoolConfig]:
    return [
        pool
        for tier in _presets()
        for pool in tier.node_pools
        if tier.cluster.provisioning == Provisioning.KARPENTER
    ]


def _nodeclass(pool: NodePoolConfig) -> dict[str, Any]:
    return ec2_nodeclass(
        pool, node_role_name="gpufarm-node-role", discovery_value="gpufarm", security_group_ids=[SG]
    )


# --------------------------------------------------------------------------- the rules are there


def test_rule_counts_per_crd() -> None:
    """Which CRDs carry CEL rules, and how many are transition rules (skipped on create).

    A CRD update that adds rules to a kind without any changes this table, and then needs a
    mutation test below.
    """
    counts = {
        (file_name, version): (
            len(cel_rules(file_name, version)),
            sum(r.program is None for r in cel_rules(file_name, version)),
        )
        for file_name, version in sorted(set(crd_index().values()))
    }
    assert counts == {
        ("elbv2.k8s.aws_albtargetcontrolconfigs.yaml", "v1beta1"): (0, 0),
        ("elbv2.k8s.aws_ingressclassparams.yaml", "v1beta1"): (1, 0),
        ("elbv2.k8s.aws_targetgroupbindings.yaml", "v1alpha1"): (0, 0),
        ("elbv2.k8s.aws_targetgroupbindings.yaml", "v1beta1"): (0, 0),
        ("karpenter.k8s.aws_ec2nodeclasses.yaml", "v1"): (44, 0),
        ("karpenter.sh_nodepools.yaml", "v1"): (20, 3),
        ("keda.sh_scaledobjects.yaml", "v1alpha1"): (1, 0),
        ("keda.sh_triggerauthentications.yaml", "v1alpha1"): (0, 0),
        ("leaderworkerset.x-k8s.io_leaderworkersets.yaml", "v1"): (0, 0),
    }


def test_transition_rules_are_the_ones_reading_old_self() -> None:
    transition = [r.rule for r in cel_rules(*NODEPOOLS) if r.program is None]
    assert transition == [
        "has(self.replicas) == has(oldSelf.replicas)",
        "self.group == oldSelf.group",
        "self.kind == oldSelf.kind",
    ]


# --------------------------------------------------------------------------- gpufarm's objects pass


@pytest.mark.parametrize("pool", _karpenter_pools(), ids=lambda p: p.name)
def test_karpenter_objects_pass(pool: NodePoolConfig) -> None:
    assert custom_object_errors(karpenter_gpu_nodepool(pool)) == []
    assert custom_object_errors(_nodeclass(pool)) == []


def test_auto_mode_nodepools_pass() -> None:
    pools = [pool for tier in _presets() for pool in tier.node_pools]
    for pool in pools:
        assert custom_object_errors(auto_mode_gpu_nodepool(pool)) == [], pool.name


def test_keda_objects_pass() -> None:
    checked = 0
    for tier in _presets():
        for model in tier.models:
            if model.autoscaling is None:
                continue
            so = scaled_object(
                model, namespace=tier.serving.namespace, query_endpoint=AMP, region="us-east-1"
            )
            assert custom_object_errors(so) == [], model.name
            checked += 1
    assert checked >= 2
    assert custom_object_errors(trigger_authentication("gpufarm")) == []


def test_prefill_scaled_object_passes() -> None:
    tier = make_production(
        production_model(
            0,
            prefill_decode={
                "min_uncached_tokens": 1024,
                "prefill_autoscaling": {"min_replicas": 1, "max_replicas": 2, "queue_target": 3},
            },
        ),
        {"ingress": {"target_optimizer": {"enabled": False}}},
    )
    model = tier.models[0]
    so = prefill_scaled_object(
        model, namespace=tier.serving.namespace, query_endpoint=AMP, region="us-east-1"
    )
    assert custom_object_errors(so) == []


def test_target_group_binding_passes() -> None:
    binding = target_group_binding(
        name="vllm-x",
        namespace="gpufarm",
        service_name="vllm-x",
        service_port=8000,
        target_group_arn=TG_ARN,
        api_version=LBC_TGB_API,
    )
    assert crd_of(binding) == ("elbv2.k8s.aws_targetgroupbindings.yaml", "v1beta1")
    assert custom_object_errors(binding) == []


# --------------------------------------------------------------------------- mutations break rules


def _production_pool() -> NodePoolConfig:
    return load_preset("production").node_pools[0]


def test_nodepool_restricted_label_is_reported() -> None:
    nodepool = karpenter_gpu_nodepool(_production_pool())
    nodepool["spec"]["template"]["metadata"]["labels"]["karpenter.sh/nodepool"] = "other"
    assert cel_errors(nodepool, *NODEPOOLS) == [
        'spec.template.metadata.labels: label "karpenter.sh/nodepool" is restricted '
        '(rule: self.all(x, x != "karpenter.sh/nodepool"))'
    ]


def test_nodepool_requirement_without_values_is_reported() -> None:
    nodepool = karpenter_gpu_nodepool(_production_pool())
    nodepool["spec"]["template"]["spec"]["requirements"][0] = {
        "key": "karpenter.k8s.aws/instance-family",
        "operator": "In",
        "values": [],
    }
    assert cel_errors(nodepool, *NODEPOOLS) == [
        "spec.template.spec.requirements: requirements with operator 'In' must have a value defined "
        "(rule: self.all(x, x.operator == 'In' ? x.values.size() != 0 : true))"
    ]


def test_nodepool_rule_on_each_array_item_names_the_item() -> None:
    nodepool = karpenter_gpu_nodepool(_production_pool())
    nodepool["spec"]["template"]["spec"]["requirements"].append(
        {"key": "kubernetes.io/hostname", "operator": "Exists"}
    )
    index = len(nodepool["spec"]["template"]["spec"]["requirements"]) - 1
    assert cel_errors(nodepool, *NODEPOOLS) == [
        f'spec.template.spec.requirements.{index}.key: label "kubernetes.io/hostname" is restricted '
        '(rule: self != "kubernetes.io/hostname")'
    ]


def test_nodepool_budget_schedule_without_duration_is_reported() -> None:
    nodepool = karpenter_gpu_nodepool(_production_pool())
    nodepool["spec"]["disruption"]["budgets"] = [{"nodes": "10%", "schedule": "@daily"}]
    assert cel_errors(nodepool, *NODEPOOLS) == [
        "spec.disruption.budgets: 'schedule' must be set with 'duration' "
        "(rule: self.all(x, has(x.schedule) == has(x.duration)))"
    ]


def test_static_nodepool_rule_runs_but_transition_rules_do_not() -> None:
    nodepool = karpenter_gpu_nodepool(_production_pool())
    nodepool["spec"]["replicas"] = 2  # `has(self.replicas) == has(oldSelf.replicas)` is skipped on create
    assert "weight" in nodepool["spec"]
    assert cel_errors(nodepool, *NODEPOOLS)[-1] == (
        "spec: 'weight' is not supported on static NodePools (rule: !has(self.replicas) || !has(self.weight))"
    )


def test_nodeclass_role_and_instance_profile_is_reported() -> None:
    nodeclass = _nodeclass(_production_pool())
    nodeclass["spec"]["instanceProfile"] = "gpufarm-nodes"
    assert cel_errors(nodeclass, *NODECLASSES) == [
        "spec: must specify exactly one of ['role', 'instanceProfile'] "
        "(rule: (has(self.role) && !has(self.instanceProfile)) || "
        "(!has(self.role) && has(self.instanceProfile)))"
    ]


def test_nodeclass_restricted_tag_is_reported() -> None:
    nodeclass = _nodeclass(_production_pool())
    nodeclass["spec"].setdefault("tags", {})["karpenter.sh/nodepool"] = "x"
    assert cel_errors(nodeclass, *NODECLASSES) == [
        "spec.tags: tag contains a restricted tag matching karpenter.sh/nodepool "
        "(rule: self.all(k, k != 'karpenter.sh/nodepool'))"
    ]


def test_nodeclass_alias_family_uses_the_kubernetes_split_and_find() -> None:
    nodeclass = _nodeclass(_production_pool())
    nodeclass["spec"]["amiSelectorTerms"] = [{"alias": "ubuntu@latest"}]
    nodeclass["spec"]["amiFamily"] = "AL2023"
    assert cel_errors(nodeclass, *NODECLASSES) == [
        "spec.amiSelectorTerms.0.alias: family is not supported, must be one of the following: "
        "'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025' "
        "(rule: self.split('@')[0] in "
        "['al2','al2023','bottlerocket','windows2019','windows2022','windows2025'])"
    ]
    nodeclass["spec"]["amiSelectorTerms"] = [{"alias": "bottlerocket@latest"}]
    assert [e.partition(" (rule")[0] for e in cel_errors(nodeclass, *NODECLASSES)] == [
        "spec: if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias"
    ]


def test_scaled_object_min_above_max_is_reported() -> None:
    tier = load_preset("production")
    model = next(m for m in tier.models if m.autoscaling is not None)
    so = scaled_object(model, namespace="gpufarm", query_endpoint=AMP, region="us-east-1")
    so["spec"]["minReplicaCount"] = so["spec"]["maxReplicaCount"] + 1
    assert cel_errors(so, *SCALED_OBJECTS) == [
        "spec: minReplicaCount must be less than or equal to maxReplicaCount "
        "(rule: !has(self.minReplicaCount) || "
        "self.minReplicaCount <= (has(self.maxReplicaCount) ? self.maxReplicaCount : 100))"
    ]


def test_ingress_class_params_rule_is_reported() -> None:
    # gpufarm creates no IngressClassParams (no Ingress makes load balancers); its one rule still
    # has to be evaluable, so a minimal object checks both sides of it.
    params = {
        "apiVersion": "elbv2.k8s.aws/v1beta1",
        "kind": "IngressClassParams",
        "metadata": {"name": "x"},
        "spec": {"prefixListsIDs": ["pl-1"]},
    }
    assert custom_object_errors(params) == []
    params["spec"]["PrefixListsIDs"] = ["pl-2"]
    assert cel_errors(params, *INGRESS_CLASS_PARAMS) == [
        "spec: cannot specify both 'prefixListsIDs' and 'PrefixListsIDs' fields "
        "(rule: !(has(self.prefixListsIDs) && has(self.PrefixListsIDs)))"
    ]


# --------------------------------------------------------------------------- evaluator semantics


def _schema(rule: str, **node: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"spec": {"x-kubernetes-validations": [{"rule": rule, "message": "broken"}], **node}},
    }


def test_map_values_are_each_evaluated() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "additionalProperties": {
                    "type": "string",
                    "x-kubernetes-validations": [{"rule": "self != ''", "message": "empty"}],
                },
            }
        },
    }
    assert schema_cel_errors(schema, {"spec": {"a": "x", "b": "", "c": ""}}) == [
        "spec.b: empty (rule: self != '')",
        "spec.c: empty (rule: self != '')",
    ]


def test_an_absent_field_is_not_evaluated() -> None:
    assert schema_cel_errors(_schema("false", type="object"), {"other": 1}) == []


def test_a_rule_that_errors_is_a_violation() -> None:
    errors = schema_cel_errors(_schema("self.missing == 1", type="object"), {"spec": {}})
    assert len(errors) == 1
    assert errors[0].startswith("spec: rule errored: ")


def test_an_unregistered_library_function_is_a_violation_not_a_pass() -> None:
    errors = schema_cel_errors(_schema("self.s.lowerAscii() == 'a'", type="object"), {"spec": {"s": "A"}})
    assert len(errors) == 1
    assert errors[0].startswith("spec: rule errored: ")


def test_defaults_apply_before_rules() -> None:
    schema = _schema(
        "self.mode == 'fast'",
        type="object",
        properties={"mode": {"type": "string", "default": "fast"}},
    )
    assert with_defaults(schema, {"spec": {}}) == {"spec": {"mode": "fast"}}
    assert schema_cel_errors(schema, {"spec": {}}) == []
    assert schema_cel_errors(schema, {"spec": {"mode": "slow"}}) == [
        "spec: broken (rule: self.mode == 'fast')"
    ]
