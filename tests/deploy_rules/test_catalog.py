"""Every deploy rule fails on its bad template, passes its good one, and is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpufarm.deploy_rules import RULES, check_template
from gpufarm.deploy_rules.reference import REGENERATE, render_reference
from gpufarm.deploy_rules.rule import Rule, is_unresolved, key_values, literal_int, ref_target

DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy-rules.md"

DOC_HOSTS = ("https://docs.aws.amazon.com/", "https://kubernetes.io/", "https://helm.sh/")
"""Where a rule's source may live: the AWS documentation, or Kubernetes' and Helm's for what the
cluster's API server and Helm refuse."""


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_bad_template_breaks_the_rule(rule: Rule) -> None:
    found = check_template({"Resources": rule.bad})
    assert [v.rule.id for v in found if v.rule.id == rule.id], f"{rule.id}: its bad template passes"
    assert all(v.rule.resource_type == rule.resource_type for v in found if v.rule.id == rule.id)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_good_template_keeps_every_rule(rule: Rule) -> None:
    found = check_template({"Resources": rule.good})
    assert [v.render() for v in found] == []


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_examples_are_of_the_rules_type(rule: Rule) -> None:
    for example in (rule.bad, rule.good):
        assert rule.resource_type in {body["Type"] for body in example.values()}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_cites_its_source(rule: Rule) -> None:
    assert rule.doc_url.startswith(DOC_HOSTS), rule.doc_url
    assert re.fullmatch(r"[A-Z0-9]+(-[A-Z0-9]+)+", rule.id), rule.id
    assert rule.title and not rule.title.endswith(".")


def test_rule_ids_are_unique() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))


def test_reference_is_up_to_date() -> None:
    assert DOC.read_text(encoding="utf-8") == render_reference(), (
        f"docs/deploy-rules.md is stale; regenerate it with `{REGENERATE}`"
    )


def test_reference_lists_every_rule_with_its_link() -> None:
    text = DOC.read_text(encoding="utf-8")
    for rule in RULES:
        assert f"`{rule.id}`" in text and rule.doc_url in text


def test_violation_names_resource_rule_and_doc() -> None:
    (rule,) = (r for r in RULES if r.id == "ELBV2-TG-LOR-SLOW-START")
    (violation,) = check_template({"Resources": rule.bad})
    assert violation.render() == (
        "Tg (AWS::ElasticLoadBalancingV2::TargetGroup): [ELBV2-TG-LOR-SLOW-START] "
        "least_outstanding_requests with slow_start.duration_seconds=60: the ELB API refuses slow "
        "start together with least outstanding requests; set slow start to 0 or choose round_robin -- "
        "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/"
        "edit-target-group-attributes.html#slow-start-mode"
    )


def test_unresolved_values_are_skipped() -> None:
    # A value CloudFormation resolves at deploy is not judged at synth.
    (rule,) = (r for r in RULES if r.id == "ELBV2-TG-LOR-SLOW-START")
    tg = rule.bad["Tg"]
    attrs = [
        {"Key": "load_balancing.algorithm.type", "Value": "least_outstanding_requests"},
        {"Key": "slow_start.duration_seconds", "Value": {"Ref": "SlowStart"}},
    ]
    doc = {"Resources": {"Tg": {**tg, "Properties": {**tg["Properties"], "TargetGroupAttributes": attrs}}}}
    assert check_template(doc) == []


@pytest.mark.parametrize(
    ("value", "unresolved"),
    [
        ({"Ref": "X"}, True),
        ({"Fn::GetAtt": ["X", "Arn"]}, True),
        ({"Fn::Join": ["", ["a", "b"]]}, True),
        ({"Key": "a", "Value": "b"}, False),
        ("text", False),
        (3, False),
    ],
)
def test_is_unresolved(value: object, unresolved: bool) -> None:
    assert is_unresolved(value) is unresolved


def test_helpers() -> None:
    assert ref_target({"Ref": "Vpc"}) == "Vpc"
    assert ref_target({"Fn::GetAtt": ["Lb", "Arn"]}) == "Lb"
    assert ref_target({"Fn::GetAtt": "Lb.Arn"}) == "Lb"
    assert ref_target("vpc-1") is None
    assert literal_int("60") == 60 and literal_int({"Ref": "P"}) is None and literal_int("x") is None
    assert key_values([{"Key": "a", "Value": "1"}, {"Key": {"Ref": "K"}, "Value": "2"}]) == {"a": "1"}
