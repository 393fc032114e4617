"""The replacement rules as data (gpufarm/review/rules.py): every emitted type covered, each rule
matching the CloudFormation registry schema it was copied from; value diffs and gate parsing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufarm.estimate.resource_types import FREE_TYPES, PRICED_TYPES
from gpufarm.review import StackTemplate, render_markdown, review_assemblies
from gpufarm.review.gates import Gate, GateError, parse_gates
from gpufarm.review.rules import NO_RULES, REPLACEMENT_RULES, reference_url
from gpufarm.review.values import ValueChange, diff_values, manifest_changes, tier_changes

REPO = Path(__file__).resolve().parents[2]
# The tier stacks of the integration apps; their probe and assertion stacks are the tests' own.
INTEG_TEMPLATES = [
    p
    for p in sorted((REPO / "integ" / "cases").glob("*.snapshot/gpufarm-integ-*.template.json"))
    if not p.name.endswith(("-probe.template.json", "-assert.template.json"))
]

# Every type a tier emits is in the cost tables (tests/tiers/test_billed_types.py walks the
# presets and the integration apps against them), keyed `Type` or `Type/Value`.
EMITTED = sorted({key.split("/")[0] for key in [*PRICED_TYPES, *FREE_TYPES]})


@pytest.mark.parametrize("resource_type", EMITTED)
def test_every_emitted_type_has_rules_or_a_reason_for_none(resource_type: str) -> None:
    assert (resource_type in REPLACEMENT_RULES) != (resource_type in NO_RULES)


def test_the_integration_templates_hold_only_covered_types() -> None:
    assert INTEG_TEMPLATES, "the integration snapshots are part of the repository"
    found = {
        str(r["Type"]) for path in INTEG_TEMPLATES for r in json.loads(path.read_text())["Resources"].values()
    }
    assert sorted(t for t in found if t not in REPLACEMENT_RULES and t not in NO_RULES) == []


def test_no_rules_are_kept_for_types_gpufarm_does_not_emit() -> None:
    assert sorted(set(REPLACEMENT_RULES) | set(NO_RULES)) == EMITTED


@pytest.mark.parametrize("resource_type", sorted(REPLACEMENT_RULES))
def test_each_rule_matches_the_registry_schema(resource_type: str) -> None:
    schema = pytest.importorskip("cfnlint.schema", reason="cfn-lint (a dev extra) bundles the schemas")
    create_only = schema.PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", resource_type).schema.get(
        "createOnlyProperties", []
    )
    expected = [p.removeprefix("/properties/").replace("/", ".") for p in create_only]
    assert list(REPLACEMENT_RULES[resource_type].replacement) == expected


@pytest.mark.parametrize("resource_type", sorted(t for t, r in REPLACEMENT_RULES.items() if r.names))
def test_a_custom_name_is_a_property_that_replaces(resource_type: str) -> None:
    # A name that could change in place would not make a replacement fail.
    rules = REPLACEMENT_RULES[resource_type]
    assert rules.names[0] in rules.replacement


def test_a_rule_cites_its_reference_page() -> None:
    assert reference_url("AWS::ElasticLoadBalancingV2::TargetGroup") == (
        "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
        "aws-resource-elasticloadbalancingv2-targetgroup.html"
    )


# --------------------------------------------------------------------------- value diffs


def test_named_lists_are_compared_by_name() -> None:
    before = {"containers": [{"name": "vllm", "image": "a"}, {"name": "agent", "image": "b"}]}
    after = {"containers": [{"name": "agent", "image": "b"}, {"name": "vllm", "image": "c"}]}
    assert list(diff_values(before, after)) == [
        ValueChange(path="containers[vllm].image", before="a", after="c")
    ]


def test_an_intrinsic_is_one_value() -> None:
    assert list(diff_values({"Vpc": {"Ref": "A"}}, {"Vpc": {"Ref": "B"}})) == [
        ValueChange(path="Vpc", before="${A}", after="${B}")
    ]


def test_a_manifest_that_is_not_json_has_no_object_diff() -> None:
    assert manifest_changes('[{"kind": "ConfigMap"', "[]") is None


def test_objects_added_and_removed() -> None:
    before = json.dumps([{"kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"}}])
    after = json.dumps([{"kind": "Service", "metadata": {"name": "b"}}])
    changes = manifest_changes(before, after)
    assert [(c.label, c.change) for c in changes or ()] == [
        ("ConfigMap n/a", "removed"),
        ("Service b", "added"),
    ]


def test_the_tier_diff_names_list_positions() -> None:
    before = {"models": [{"name": "m", "replicas": 1}], "network": {"cidr": "10.0.0.0/16"}}
    after = {"models": [{"name": "m", "replicas": 2}], "network": {"cidr": "10.0.0.0/16"}}
    assert [c.text() for c in tier_changes(before, after)] == ["models[0].replicas: 1 → 2"]


def test_a_model_added_to_the_tier_is_one_row() -> None:
    before = {"models": [{"name": "a"}]}
    after = {"models": [{"name": "a"}, {"name": "b", "gpus": 2}]}
    assert [c.text() for c in tier_changes(before, after)] == ['models[1]: (absent) → {"gpus":2,"name":"b"}']


# --------------------------------------------------------------------------- gates


def test_gates_take_comma_lists_and_repeats_without_duplicates() -> None:
    assert parse_gates(["replacement,cost>500", "iam", "replacement", "cost > 99.5"]) == [
        Gate(kind="replacement"),
        Gate(kind="cost", limit_usd=500.0),
        Gate(kind="iam"),
        Gate(kind="cost", limit_usd=99.5),
    ]


def test_an_empty_gate_is_an_error() -> None:
    with pytest.raises(GateError) as raised:
        parse_gates(["replacement,"])
    assert str(raised.value) == (
        "--fail-on: '' is not a gate; allowed: replacement, exposure, iam, "
        "cost>N (N in USD a month, a number such as 500 or 99.5)"
    )


# --------------------------------------------------------------------------- names an orphan holds


def _stack(name: str, resources: dict[str, dict[str, object]]) -> StackTemplate:
    template = {"Metadata": {"gpufarm:tier": {"name": name}}, "Resources": resources}
    return StackTemplate(name=name, region="us-east-1", template=template)


def test_a_literal_name_the_orphan_still_holds_fails_the_new_stack() -> None:
    group = {"Type": "AWS::Logs::LogGroup", "Properties": {"LogGroupName": "/gpufarm/shared"}}
    review = review_assemblies(
        {"old": _stack("old", {"Logs": group})}, {"new": _stack("new", {"Logs": group})}
    )
    [failure] = next(s for s in review.stacks if s.name == "new").failures
    assert failure.reason == (
        "its custom name '/gpufarm/shared' is still held by Logs of old, which stays deployed, so "
        "creating it fails and this deploy rolls back"
    )


def test_a_name_scoped_by_the_stacks_own_resource_does_not_clash() -> None:
    # A rule namespace's name is unique within its workspace; each stack has its own workspace.
    rules = {
        "Type": "AWS::APS::RuleGroupsNamespace",
        "Properties": {"Name": "gpufarm-slo", "Workspace": {"Ref": "Workspace"}},
    }
    review = review_assemblies({"old": _stack("old", {"R": rules})}, {"new": _stack("new", {"R": rules})})
    assert [(s.name, s.status, s.failures) for s in review.stacks] == [
        ("new", "added", []),
        ("old", "orphaned", []),
    ]


def test_an_orphan_without_a_successor_says_how_to_remove_it() -> None:
    bucket = {"B": {"Type": "AWS::S3::Bucket", "Properties": {}}}
    old = StackTemplate(name="old", region="us-east-1", template={"Resources": bucket})
    report = " ".join(render_markdown(review_assemblies({"old": old}, {})).split())
    assert (
        "What to do: to remove it, run `cdk destroy old` from the base commit (or delete the "
        "CloudFormation stack); resources with a Retain policy stay in the account." in report
    )
    assert "keep the tier's old `name`" not in report
