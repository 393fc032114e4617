"""`gpufarm review` on assemblies synthesized from poc configs that differ in known ways.

One base assembly and four variants, each synthesized once for the module:
replicas 1 -> 2 (no replacement), the Target Optimizer turned on (target group replaced),
the load balancer made internet-facing (exposure), FSx for Lustre as model store (a new IAM
wildcard: the CSI driver's fsx:DescribeFileSystems on "*").
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
CERTIFICATE = "arn:aws:acm:us-east-1:111122223333:certificate/00000000-0000-4000-8000-000000000000"

VARIANTS: dict[str, TierConfig] = {
    "base": make_tier(),
    "replicas": make_tier(model_override(replicas=2)),
    "optimizer": make_tier({"ingress": {"target_optimizer": {"enabled": True}}}),
    "public": make_tier(
        {
            "ingress": {
                "scheme": "internet-facing",
                "certificate_arn": CERTIFICATE,
                "allowed_cidrs": ["203.0.113.0/24"],
                "waf": {"enabled": True},
            }
        }
    ),
    "fsx": make_tier(
        {"model_store": {"kind": "fsx-lustre", "fsx": {"import_path": "s3://gpufarm-poc-models/"}}},
        model_override(weights="s3://gpufarm-poc-models/Qwen/Qwen3-8B/", weights_gib=16),
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


def review_json(assemblies: dict[str, Path], variant: str) -> dict[str, Any]:
    """The poc stack's section of `gpufarm review base <variant> --json`."""
    result = run(assemblies["base"], assemblies[variant], "--json")
    assert result.exit_code == 0, result.stderr
    stacks: list[dict[str, Any]] = json.loads(result.stdout)["stacks"]
    assert [s["name"] for s in stacks] == ["gpufarm-poc"]
    return stacks[0]


def markdown(assemblies: dict[str, Path], variant: str) -> str:
    result = run(assemblies["base"], assemblies[variant])
    assert result.exit_code == 0, result.stderr
    return result.stdout


def template(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "gpufarm-poc.template.json").read_text())
    return data


def logical_ids(folder: Path, resource_type: str, **properties: Any) -> list[str]:
    """Logical IDs of the resources of a type whose properties include `properties`."""
    return sorted(
        lid
        for lid, r in template(folder)["Resources"].items()
        if r["Type"] == resource_type and all(r["Properties"].get(k) == v for k, v in properties.items())
    )


# --------------------------------------------------------------------------- replica change


def test_a_replica_change_replaces_nothing(assemblies: dict[str, Path]) -> None:
    stack = review_json(assemblies, "replicas")
    assert (stack["replacements"], stack["exposure"], stack["iam"]["added"]) == (
        [],
        {"opened": [], "closed": []},
        [],
    )


def test_a_replica_change_modifies_only_the_model_manifest(assemblies: dict[str, Path]) -> None:
    changes = review_json(assemblies, "replicas")["resources"]["changes"]
    assert [(c["type"], c["change"], c["properties"]) for c in changes] == [
        ("Custom::AWSCDK-EKS-KubernetesResource", "modified", ["Manifest"])
    ]


def test_a_replica_change_adds_a_gpu_and_its_cost(assemblies: dict[str, Path]) -> None:
    stack = review_json(assemblies, "replicas")
    expected = monthly_cost(VARIANTS["replicas"]).total_usd - monthly_cost(VARIANTS["base"]).total_usd
    assert (stack["gpus"]["delta"], stack["monthly_cost"]["delta_usd"]) == (
        {"on-demand": 1, "reserved": 0, "spot": 0},
        pytest.approx(expected),
    )


def test_the_report_says_no_critical_resource_is_replaced(assemblies: dict[str, Path]) -> None:
    assert "No stateful or traffic-bearing resource is replaced." in markdown(assemblies, "replicas")


# --------------------------------------------------------------------------- target optimizer


def test_turning_the_target_optimizer_on_replaces_the_model_target_group(assemblies: dict[str, Path]) -> None:
    tg = "AWS::ElasticLoadBalancingV2::TargetGroup"
    [new_id] = logical_ids(assemblies["optimizer"], tg, TargetControlPort=3000)
    [old_id] = sorted(
        set(logical_ids(assemblies["base"], tg)) - set(logical_ids(assemblies["optimizer"], tg))
    )
    critical = [r for r in review_json(assemblies, "optimizer")["replacements"] if r["critical"]]
    assert [(r["logical_id"], r["new_logical_id"], r["type"]) for r in critical] == [(old_id, new_id, tg)]


def test_the_target_group_replacement_leads_the_report(assemblies: dict[str, Path]) -> None:
    report = markdown(assemblies, "optimizer")
    stack_section = report.split("### gpufarm-poc", 1)[1]
    assert stack_section.index("**1 stateful or traffic-bearing resource(s) replaced or deleted**") < (
        stack_section.index("#### Public exposure")
    )
    assert "| AWS::ElasticLoadBalancingV2::TargetGroup | logical ID changes to" in report


# --------------------------------------------------------------------------- internet-facing


def _application_load_balancer(assembly: Path) -> str:
    """The ALB's logical ID. An internet-facing tier also has the gateway's internal NLB (ADR 0050),
    which is not an exposure: the review must report the ALB only."""
    resources = template(assembly)["Resources"]
    [lb] = [
        lid
        for lid in logical_ids(assembly, "AWS::ElasticLoadBalancingV2::LoadBalancer")
        if resources[lid]["Properties"].get("Type", "application") == "application"
    ]
    return lb


def test_an_internet_facing_switch_opens_the_load_balancer_and_client_cidrs(
    assemblies: dict[str, Path],
) -> None:
    lb = _application_load_balancer(assemblies["public"])
    [sg] = [
        lid
        for lid in logical_ids(assemblies["public"], "AWS::EC2::SecurityGroup")
        if "SecurityGroupIngress" in template(assemblies["public"])["Resources"][lid]["Properties"]
        and any(
            rule.get("CidrIp") == "203.0.113.0/24"
            for rule in template(assemblies["public"])["Resources"][lid]["Properties"]["SecurityGroupIngress"]
        )
    ]
    exposure = review_json(assemblies, "public")["exposure"]
    assert (sorted((e["logical_id"], e["description"]) for e in exposure["opened"]), exposure["closed"]) == (
        sorted(
            [
                (lb, "internet-facing application load balancer"),
                (sg, "ingress from 203.0.113.0/24 on tcp 443"),
            ]
        ),
        [],
    )


def test_an_internet_facing_switch_replaces_the_load_balancer(assemblies: dict[str, Path]) -> None:
    lb = _application_load_balancer(assemblies["public"])
    replacements = review_json(assemblies, "public")["replacements"]
    assert {"logical_id": lb, "reason": "create-only Scheme changes"}.items() <= next(
        r for r in replacements if r["logical_id"] == lb
    ).items()


def test_the_report_shows_the_opened_exposure(assemblies: dict[str, Path]) -> None:
    assert (
        "| **opened** | `{}` | AWS::ElasticLoadBalancingV2::LoadBalancer | internet-facing application load "
        "balancer |".format(_application_load_balancer(assemblies["public"]))
        in markdown(assemblies, "public")
    )


# --------------------------------------------------------------------------- IAM wildcard


def test_a_new_iam_wildcard_is_flagged(assemblies: dict[str, Path]) -> None:
    wildcards = review_json(assemblies, "fsx")["iam"]["new_wildcards"]
    assert [(w["action"], w["resource"], w["kind"]) for w in wildcards] == [
        ("fsx:DescribeFileSystems", "*", "permission")
    ]


def test_the_report_counts_the_new_wildcard(assemblies: dict[str, Path]) -> None:
    report = markdown(assemblies, "fsx")
    assert "**1 new wildcard grant(s)**" in report
    assert "| `fsx:DescribeFileSystems` | `*` | **yes** |" in report


# --------------------------------------------------------------------------- one assembly, output, errors


def test_one_assembly_is_summarized(assemblies: dict[str, Path]) -> None:
    result = run(assemblies["public"], "--json")
    [stack] = json.loads(result.stdout)["stacks"]
    assert (result.exit_code, stack["status"], stack["tier"]["gpus"]) == (
        0,
        "summary",
        {"on-demand": 1, "reserved": 0, "spot": 0},
    )
    assert "internet-facing application load balancer" in [e["description"] for e in stack["exposure"]]


def test_the_summary_is_markdown(assemblies: dict[str, Path]) -> None:
    result = run(assemblies["base"])
    assert (result.exit_code, result.stdout.splitlines()[:3]) == (
        0,
        ["## gpufarm review", "", f"Summary of `{assemblies['base']}`."],
    )


def test_output_writes_the_report_to_a_file(assemblies: dict[str, Path], tmp_path: Path) -> None:
    target = tmp_path / "review.md"
    result = run(assemblies["base"], assemblies["replicas"], "--output", target)
    assert (result.exit_code, result.stdout) == (0, "")
    assert target.read_text().startswith("## gpufarm review\n")


def test_identical_assemblies_report_no_changes(assemblies: dict[str, Path]) -> None:
    result = run(assemblies["base"], assemblies["base"], "--json")
    assert [s["status"] for s in json.loads(result.stdout)["stacks"]] == ["unchanged"]


def said(text: str) -> str:
    return " ".join(text.split())


def test_a_folder_that_is_not_an_assembly_exits_2(tmp_path: Path) -> None:
    result = run(tmp_path)
    assert (result.exit_code, said(result.stderr)) == (
        2,
        f"gpufarm review: '{tmp_path}' is not a cloud assembly (no manifest.json); give the folder "
        "`cdk synth` or `gpufarm synth` wrote (cdk.out)",
    )


def test_a_missing_folder_exits_2(tmp_path: Path) -> None:
    result = run(tmp_path / "nope", tmp_path)
    assert (result.exit_code, said(result.stderr)) == (
        2,
        f"gpufarm review: '{tmp_path}/nope' is not a folder",
    )


def test_three_folders_are_a_usage_error(tmp_path: Path) -> None:
    assert run(tmp_path, tmp_path, tmp_path).exit_code == 2
