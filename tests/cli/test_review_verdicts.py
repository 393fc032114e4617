"""Verdicts of `gpufarm review` on two real synths of poc variants, each one a verdict a reviewer
acts on: a renamed tier, a custom-named cluster to replace, a cluster moved to another VPC, a
Kubernetes change, an endpoint service opened to unapproved connections; and `--fail-on`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from gpufarm.cli.main import app
from gpufarm.config import TierConfig
from gpufarm.estimate import monthly_cost
from tests.assemblies import shared_assembly
from tests.unit.factories import make_tier, model_override

runner = CliRunner(env={"COLUMNS": "300"})
PRIVATE_LINK = {"enabled": True, "allowed_principals": ["arn:aws:iam::444455556666:root"]}

VARIANTS: dict[str, TierConfig] = {
    "base": make_tier(),
    "replicas": make_tier(model_override(replicas=2)),
    "optimizer": make_tier({"ingress": {"target_optimizer": {"enabled": True}}}),
    "renamed": make_tier({"name": "team-a"}),
    "karpenter": make_tier({"cluster": {"provisioning": "karpenter"}}),
    "unencrypted": make_tier({"cluster": {"secrets_encryption": False}}),
    "cidr": make_tier({"network": {"cidr": "10.1.0.0/16"}}),
    "private-link": make_tier({"ingress": {"private_link": PRIVATE_LINK}}),
    "private-link-open": make_tier(
        {"ingress": {"private_link": {**PRIVATE_LINK, "acceptance_required": False}}}
    ),
}


@pytest.fixture(scope="module")
def assemblies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Variant name -> its synthesized cloud assembly folder: one synth per config and test run,
    shared with the other files that synthesize it (`base` is the poc preset; `base`, `replicas`
    and `optimizer` are in both review test files; tests/assemblies.py)."""
    return {name: shared_assembly([tier], tmp_path_factory) for name, tier in VARIANTS.items()}


def run(*args: str | Path) -> Result:
    return runner.invoke(app, ["review", *map(str, args)])


def review(assemblies: dict[str, Path], base: str, head: str) -> dict[str, Any]:
    result = run(assemblies[base], assemblies[head], "--json")
    assert result.exit_code == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def stack(assemblies: dict[str, Path], head: str, base: str = "base") -> dict[str, Any]:
    [only] = review(assemblies, base, head)["stacks"]
    assert only["name"] == "gpufarm-poc"
    return only


def cluster_id(folder: Path, stack_name: str = "gpufarm-poc") -> str:
    resources = json.loads((folder / f"{stack_name}.template.json").read_text())["Resources"]
    [lid] = [k for k, v in resources.items() if v["Type"] == "AWS::EKS::Cluster"]
    return lid


def markdown(assemblies: dict[str, Path], head: str, base: str = "base") -> str:
    result = run(assemblies[base], assemblies[head])
    assert result.exit_code == 0, result.stderr
    return " ".join(result.stdout.split())


# --------------------------------------------------------------------------- a renamed tier


def test_a_renamed_tier_orphans_the_old_stack_instead_of_deleting_it(assemblies: dict[str, Path]) -> None:
    stacks = {s["name"]: s for s in review(assemblies, "base", "renamed")["stacks"]}
    old, new = stacks["gpufarm-poc"], stacks["gpufarm-team-a"]
    assert (old["status"], old["renamed_to"], new["status"], new["renamed_from"]) == (
        "orphaned",
        "gpufarm-team-a",
        "added",
        "gpufarm-poc",
    )
    # Nothing in the old stack is deleted: no removals, no replacements.
    assert (old["resources"]["changes"], old["replacements"]) == ([], [])


def test_a_renamed_tier_doubles_the_bill(assemblies: dict[str, Path]) -> None:
    document = review(assemblies, "base", "renamed")
    stacks = {s["name"]: s for s in document["stacks"]}
    old_bill, new_bill = (monthly_cost(VARIANTS[v]).total_usd for v in ("base", "renamed"))
    # The old stack keeps billing (no change), the new one comes on top: base + new in all.
    assert (
        stacks["gpufarm-poc"]["monthly_cost"]["delta_usd"],
        stacks["gpufarm-team-a"]["monthly_cost"]["delta_usd"],
        document["monthly_cost_delta_usd"],
    ) == (0.0, pytest.approx(new_bill), pytest.approx(new_bill))
    assert old_bill + document["monthly_cost_delta_usd"] == pytest.approx(2 * old_bill)


def test_a_renamed_tier_shows_the_tier_diff_and_what_to_do(assemblies: dict[str, Path]) -> None:
    stacks = {s["name"]: s for s in review(assemblies, "base", "renamed")["stacks"]}
    assert stacks["gpufarm-team-a"]["tier_changes"] == [{"path": "name", "before": "poc", "after": "team-a"}]
    report = markdown(assemblies, "renamed")
    assert "**The stack leaves the app, but nothing deletes it.**" in report
    assert "`gpufarm-poc` keeps running and billing" in report
    assert "`cdk destroy gpufarm-poc` from the base commit" in report
    assert "The stack is deleted" not in report


# --------------------------------------------------------------------------- custom-named cluster


@pytest.mark.parametrize(
    ("variant", "property_name"),
    [("karpenter", "BootstrapSelfManagedAddons"), ("unencrypted", "EncryptionConfig")],
)
def test_replacing_the_custom_named_cluster_fails_the_deploy(
    assemblies: dict[str, Path], variant: str, property_name: str
) -> None:
    cluster = cluster_id(assemblies["base"])
    failures = stack(assemblies, variant)["deploy_failures"]
    assert [(f["logical_id"], f["type"]) for f in failures] == [(cluster, "AWS::EKS::Cluster")]
    assert failures[0]["reason"].startswith(f"create-only {property_name} changes, so CloudFormation")
    assert "keeps its custom name (Name) 'gpufarm-poc'" in failures[0]["reason"]
    assert "this deploy will fail" in failures[0]["reason"]
    # The cluster's name is the tier's: the way out is a new tier beside the old one.
    assert failures[0]["fix"].startswith("revert the change; to make it, deploy it as a new tier")


def test_the_failing_deploy_leads_the_report(assemblies: dict[str, Path]) -> None:
    report = markdown(assemblies, "unencrypted")
    section = report.split("### gpufarm-poc", 1)[1]
    assert section.index("#### This deploy will fail") < section.index("#### Replacements")
    assert "| gpufarm-poc | changed (**deploy fails: 1**) |" in report


def test_replacing_a_resource_without_a_custom_name_does_not_fail(assemblies: dict[str, Path]) -> None:
    # The Target Optimizer replaces the model's target group; it has no `Name`, so CloudFormation
    # gives the new one a name of its own and the replacement goes through.
    document = stack(assemblies, "optimizer")
    assert (
        [r["type"] for r in document["replacements"] if r["critical"]],
        document["deploy_failures"],
    ) == (["AWS::ElasticLoadBalancingV2::TargetGroup"], [])
    # Each replacement cites the type's page in the CloudFormation template reference.
    assert {r["reference"] for r in document["replacements"] if r["critical"]} == {
        "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
        "aws-resource-elasticloadbalancingv2-targetgroup.html"
    }


# --------------------------------------------------------------------------- another VPC


def test_a_new_network_cidr_cannot_move_the_cluster(assemblies: dict[str, Path]) -> None:
    document = stack(assemblies, "cidr")
    cluster = cluster_id(assemblies["base"])
    [failure] = document["deploy_failures"]
    assert (failure["logical_id"], failure["type"]) == (cluster, "AWS::EKS::Cluster")
    assert "of the replaced VPC" in failure["reason"] and "this deploy will fail" in failure["reason"]
    # The cluster itself is updated in place (its subnets are not create-only): the review must
    # not call it "modified" and stop there.
    [change] = [c for c in document["resources"]["changes"] if c["logical_id"] == cluster]
    subnets = [v for v in change["values"] if v["path"].startswith("ResourcesVpcConfig.SubnetIds[")]
    assert (change["change"], change["properties"], len(subnets)) == ("modified", ["ResourcesVpcConfig"], 2)
    assert all(v["after"].startswith("new value (") and v["after"].endswith(" is replaced)") for v in subnets)


def test_the_cidr_change_shows_before_and_after(assemblies: dict[str, Path]) -> None:
    document = stack(assemblies, "cidr")
    vpc = next(c for c in document["resources"]["changes"] if c["type"] == "AWS::EC2::VPC")
    assert vpc["values"] == [{"path": "CidrBlock", "before": "10.0.0.0/16", "after": "10.1.0.0/16"}]
    assert {"path": "network.cidr", "before": "10.0.0.0/16", "after": "10.1.0.0/16"} in document[
        "tier_changes"
    ]


# --------------------------------------------------------------------------- Kubernetes values


def test_a_replica_bump_is_a_semantic_manifest_diff(assemblies: dict[str, Path]) -> None:
    [change] = stack(assemblies, "replicas")["resources"]["changes"]
    assert change["kubernetes"] == [
        {
            "kind": "Deployment",
            "namespace": "gpufarm",
            "name": "vllm-qwen3-8b",
            "change": "modified",
            "fields": [{"path": "spec.replicas", "before": "1", "after": "2"}],
        }
    ]


def test_the_report_shows_the_manifest_and_tier_values(assemblies: dict[str, Path]) -> None:
    report = markdown(assemblies, "replicas")
    assert "| `Deployment gpufarm/vllm-qwen3-8b` | modified | `spec.replicas` | `1` | `2` |" in report
    assert "| `models[0].replicas` | `1` | `2` |" in report


# --------------------------------------------------------------------------- PrivateLink acceptance


def test_accepting_endpoint_connections_without_approval_is_exposure(assemblies: dict[str, Path]) -> None:
    document = stack(assemblies, "private-link-open", base="private-link")
    assert [(e["type"], e["description"]) for e in document["exposure"]["opened"]] == [
        (
            "AWS::EC2::VPCEndpointService",
            "endpoint service accepts connections without approval (AcceptanceRequired false)",
        )
    ]
    [change] = document["resources"]["changes"]
    assert change["values"] == [{"path": "AcceptanceRequired", "before": "true", "after": "false"}]


# --------------------------------------------------------------------------- --fail-on


def said(text: str) -> str:
    return " ".join(text.split())


def test_fail_on_replacement_passes_a_replica_bump(assemblies: dict[str, Path]) -> None:
    result = run(assemblies["base"], assemblies["replicas"], "--fail-on", "replacement,exposure")
    assert (result.exit_code, result.stderr) == (0, "")


def test_fail_on_replacement_stops_a_failing_deploy(assemblies: dict[str, Path]) -> None:
    cluster = cluster_id(assemblies["base"])
    result = run(assemblies["base"], assemblies["karpenter"], "--fail-on", "replacement", "-o", "/dev/null")
    assert (result.exit_code, said(result.stderr)) == (
        1,
        "gpufarm review: --fail-on replacement: 1 change(s) make the deploy fail "
        f"(gpufarm-poc/{cluster}); 1 stateful or traffic-bearing resource(s) replaced "
        f"(gpufarm-poc/{cluster})",
    )


def test_fail_on_replacement_stops_an_orphaned_stack(assemblies: dict[str, Path]) -> None:
    result = run(assemblies["base"], assemblies["renamed"], "--fail-on=replacement", "-o", "/dev/null")
    assert (result.exit_code, said(result.stderr)) == (
        1,
        "gpufarm review: --fail-on replacement: 1 stack(s) leave the app and stay deployed (gpufarm-poc)",
    )


def test_fail_on_exposure(assemblies: dict[str, Path]) -> None:
    result = run(
        assemblies["private-link"],
        assemblies["private-link-open"],
        "--fail-on",
        "exposure",
        "-o",
        "/dev/null",
    )
    assert (result.exit_code, said(result.stderr)) == (
        1,
        "gpufarm review: --fail-on exposure: 1 exposure(s) opened (gpufarm-poc/PrivateLinkE5A825BA)",
    )


def test_fail_on_cost_compares_the_floor_rise_with_its_limit(assemblies: dict[str, Path]) -> None:
    rise = monthly_cost(VARIANTS["replicas"]).total_usd - monthly_cost(VARIANTS["base"]).total_usd
    below, above = int(rise) - 1, int(rise) + 1
    tripped = run(assemblies["base"], assemblies["replicas"], "--fail-on", f"cost>{below}", "-o", "/dev/null")
    passed = run(assemblies["base"], assemblies["replicas"], "--fail-on", f"cost>{above}", "-o", "/dev/null")
    assert (tripped.exit_code, said(tripped.stderr), passed.exit_code) == (
        1,
        f"gpufarm review: --fail-on cost>{below}: the monthly bill rises by ${rise:,.2f} at the floor, "
        f"above ${below:,.2f}",
        0,
    )


def test_gates_repeat_and_combine(assemblies: dict[str, Path]) -> None:
    result = run(
        assemblies["base"],
        assemblies["renamed"],
        "--fail-on",
        "iam",
        "--fail-on",
        "exposure,iam",
        "-o",
        "/dev/null",
    )
    lines = result.stderr.splitlines()
    assert (result.exit_code, [line.split(":")[1] for line in lines]) == (
        1,
        [" --fail-on iam", " --fail-on exposure"],
    )


@pytest.mark.parametrize("value", ["nope", "cost", "cost>", "cost>-5", "cost>abc", "replacements"])
def test_a_bad_gate_exits_2_naming_the_forms(assemblies: dict[str, Path], value: str) -> None:
    result = run(assemblies["base"], assemblies["replicas"], "--fail-on", value)
    assert (result.exit_code, said(result.stderr)) == (
        2,
        f"gpufarm review: --fail-on: {value!r} is not a gate; allowed: replacement, exposure, iam, "
        "cost>N (N in USD a month, a number such as 500 or 99.5)",
    )


def test_a_gate_needs_two_assemblies(assemblies: dict[str, Path]) -> None:
    result = run(assemblies["base"], "--fail-on", "replacement")
    assert (result.exit_code, said(result.stderr)) == (
        2,
        "gpufarm review: --fail-on compares two assemblies; give BASE and HEAD "
        f"(got only '{assemblies['base']}')",
    )
