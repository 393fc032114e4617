"""The integration tests in snapshot mode: offline, each tier's test app against its snapshot.

`make integ` deploys the same apps (integ/run.py); here they are only synthesized, with AWS
credentials and endpoints out of reach, and compared with the committed templates.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # integ/ sits at the repository root, beside gpufarm/

from integ import run  # noqa: E402

CLEARED = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
)
OFFLINE_ENV = {
    # No credentials anywhere boto3 or the CDK would look, and no metadata service.
    "AWS_CONFIG_FILE": "/nonexistent",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    "AWS_EC2_METADATA_DISABLED": "true",
    # Any HTTP(S) call would go to a closed port and fail.
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
}


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each tier's test app synthesized once, offline: templates by tier, then by file name."""
    saved = {k: os.environ.get(k) for k in (*OFFLINE_ENV, *CLEARED)}
    for key in CLEARED:
        os.environ.pop(key, None)
    os.environ.update(OFFLINE_ENV)
    try:
        return {
            tier: run.synth(run.case_file(tier), tmp_path_factory.mktemp(f"integ-{tier}"))
            for tier in run.TIERS
        }
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.mark.parametrize("tier", run.TIERS)
def test_snapshot_matches(synthesized: dict[str, dict[str, Any]], tier: str) -> None:
    committed = run.read_snapshot(run.snapshot_dir(run.case_file(tier)))
    changes = run.differences(committed, synthesized[tier])
    assert changes == [], (
        f"the {tier} integration test changed; `make integ-update` after review:\n" + "\n".join(changes)
    )


@pytest.mark.parametrize("tier", run.TIERS)
def test_each_test_deploys_the_tier_a_probe_and_the_assertions(
    synthesized: dict[str, dict[str, Any]], tier: str
) -> None:
    stack = f"gpufarm-integ-{tier}"
    assert sorted(synthesized[tier]) == sorted(
        f"{name}.template.json" for name in (stack, f"{stack}-probe", f"{stack}-assert")
    )


def test_snapshot_compare_fails_when_a_template_changes(
    synthesized: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    committed = run.read_snapshot(run.snapshot_dir(run.case_file("poc")))
    changed = copy.deepcopy(committed)
    template = changed["gpufarm-integ-poc.template.json"]
    alb = next(
        k
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::ElasticLoadBalancingV2::LoadBalancer"
    )
    template["Resources"][alb]["Properties"]["IdleTimeout"] = "changed"
    del template["Resources"][next(iter(template["Resources"]))]
    run.write_snapshot(changed, tmp_path / "integ_poc.py.snapshot")

    assert run.snapshot(["poc"], update=False, root=tmp_path) == run.EXIT_FAILED
    changes = run.differences(changed, synthesized["poc"])
    assert f"gpufarm-integ-poc.template.json: [~] Resources {alb}" in changes
    assert len(changes) == 2


def test_a_missing_snapshot_fails(synthesized: dict[str, dict[str, Any]]) -> None:
    assert run.differences({}, synthesized["poc"]) == [
        f"{name}: new template (no snapshot)" for name in sorted(synthesized["poc"])
    ]


def test_snapshots_hold_only_templates() -> None:
    for tier in run.TIERS:
        files = sorted(p.name for p in run.snapshot_dir(run.case_file(tier)).iterdir())
        assert files and all(name.endswith(".template.json") for name in files), files


def test_assertion_salt_does_not_reach_the_snapshot(synthesized: dict[str, dict[str, Any]]) -> None:
    assert_template = synthesized["poc"]["gpufarm-integ-poc-assert.template.json"]
    salts = [
        r["Properties"]["salt"]
        for r in assert_template["Resources"].values()
        if r["Type"].startswith("Custom::DeployAssert")
    ]
    assert salts == [run.SALT]


def test_the_assertion_waits_for_both_routes(synthesized: dict[str, dict[str, Any]]) -> None:
    template = synthesized["production"]["gpufarm-integ-production-assert.template.json"]
    call = next(
        r for r in template["Resources"].values() if r["Type"] == "Custom::DeployAssert@SdkCallLambdainvoke"
    )
    expected = json.loads(call["Properties"]["expected"])
    assert expected == {
        "$ObjectLike": {
            "Payload": {
                "$SerializedJson": {
                    "direct": {"status": 200, "content": True},
                    "gateway": {"status": 200, "content": True},
                }
            }
        }
    }


def test_nothing_is_retained_by_the_test_stacks(synthesized: dict[str, dict[str, Any]]) -> None:
    kept = [
        (name, logical_id)
        for templates in synthesized.values()
        for name, template in templates.items()
        for logical_id, resource in template["Resources"].items()
        if resource.get("DeletionPolicy", "Delete") != "Delete"
        or resource.get("UpdateReplacePolicy", "Delete") != "Delete"
    ]
    assert kept == []
    buckets = [
        name
        for templates in synthesized.values()
        for name, template in templates.items()
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::S3::Bucket"
    ]
    assert buckets == []


def test_no_termination_protection_and_no_reservation(synthesized: dict[str, dict[str, Any]]) -> None:
    for tier, templates in synthesized.items():
        tier_template = templates[f"gpufarm-integ-{tier}.template.json"]
        types = {r["Type"] for r in tier_template["Resources"].values()}
        assert "AWS::EC2::CapacityReservation" not in types
        assert "AWS::FSx::FileSystem" not in types
        for resource in tier_template["Resources"].values():
            if resource["Type"] == "AWS::ElasticLoadBalancingV2::LoadBalancer":
                attributes = {
                    a["Key"]: a["Value"] for a in resource["Properties"].get("LoadBalancerAttributes", [])
                }
                assert attributes.get("deletion_protection.enabled", "false") == "false"


def test_deploy_refuses_without_credentials(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED} | OFFLINE_ENV | {"HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "integ/run.py", "deploy", "poc"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == run.EXIT_BAD_INPUT
    assert "make integ deploys real stacks and needs AWS credentials; none were found" in done.stderr


def test_assertion_failures_reads_the_outputs() -> None:
    ok = {"s-assert": {"AssertionResultsLambdaInvokeabc": json.dumps({"status": "success"})}}
    bad = {
        "s-assert": {"AssertionResultsLambdaInvokeabc": json.dumps({"status": "fail", "message": "got 503"})}
    }
    assert run.assertion_failures(ok, "s-assert") == []
    assert run.assertion_failures(bad, "s-assert") == ["AssertionResultsLambdaInvokeabc: got 503"]
    assert run.assertion_failures({}, "s-assert") == ["s-assert: no assertion results in the stack outputs"]


def test_the_pinned_cdk_cli_reads_the_test_app(tmp_path: Path) -> None:
    # `make integ` deploys with this CLI: it must read the assembly aws-cdk-lib writes (the
    # integ-runner cannot; docs/decisions/0032-integration-tests.md), offline.
    env = {k: v for k, v in os.environ.items() if k not in CLEARED} | OFFLINE_ENV
    env["PATH"] = f"{REPO / '.venv' / 'bin'}:{env.get('PATH', '')}"
    done = subprocess.run(
        [str(run.CDK), "ls", "--app", f"{sys.executable} {run.case_file('poc')}", "-o", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["gpufarm-integ-poc", "gpufarm-integ-poc-probe", "gpufarm-integ-poc-assert"]


@pytest.mark.parametrize("tier", ["production", "enterprise"])
def test_full_runs_keep_the_presets_stateful_parts_and_retain_nothing(tier: str, tmp_path: Path) -> None:
    templates = run.synth(run.case_file(tier, full=True), tmp_path)
    tier_template = templates[f"gpufarm-integ-{tier}-full.template.json"]
    types = [r["Type"] for r in tier_template["Resources"].values()]
    assert "AWS::FSx::FileSystem" in types
    assert ("AWS::EC2::CapacityReservation" in types) is (tier == "enterprise")
    kept = [
        logical_id
        for template in templates.values()
        for logical_id, resource in template["Resources"].items()
        if resource.get("DeletionPolicy", "Delete") != "Delete"
    ]
    assert kept == []


def test_keys_are_deleted_after_the_shortest_waiting_period(synthesized: dict[str, dict[str, Any]]) -> None:
    windows = {
        resource["Properties"].get("PendingWindowInDays")
        for templates in synthesized.values()
        for template in templates.values()
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::KMS::Key"
    }
    assert windows == {7}


def test_the_probe_answers_before_the_invoking_function_gives_up(
    synthesized: dict[str, dict[str, Any]],
) -> None:
    probe = synthesized["poc"]["gpufarm-integ-poc-probe.template.json"]
    function = next(r for r in probe["Resources"].values() if r["Type"] == "AWS::Lambda::Function")
    invoker = [
        r["Properties"]["Timeout"]
        for r in synthesized["poc"]["gpufarm-integ-poc-assert.template.json"]["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    ]
    assert function["Properties"]["Timeout"] < min(invoker)
    assert function["Properties"]["VpcConfig"]["SubnetIds"]


def test_cfn_lint_finds_no_error_in_the_test_templates() -> None:
    # The snapshots equal the synthesized templates (test_snapshot_matches); lint them in one run.
    templates = sorted(str(p) for p in (REPO / "integ" / "cases").glob("*.snapshot/*.template.json"))
    done = subprocess.run(
        [str(REPO / ".venv" / "bin" / "cfn-lint"), "--format", "json", *templates],
        capture_output=True,
        text=True,
        check=False,
    )
    errors = [f for f in json.loads(done.stdout or "[]") if f["Level"] == "Error"]
    assert len(templates) == 9
    assert errors == []


def test_the_deploy_rules_gate_the_test_app(tmp_path: Path) -> None:
    # The probe's stack is scaffolding, but what AWS refuses there fails the run as well.
    from aws_cdk import aws_elasticloadbalancingv2 as elbv2

    from integ import harness

    app = harness.build("poc")
    probe = next(c for c in app.node.children if getattr(c, "stack_name", "") == "gpufarm-integ-poc-probe")
    elbv2.CfnTargetGroup(
        probe,
        "Broken",
        port=80,
        protocol="HTTP",
        target_type="ip",
        vpc_id="vpc-12345678",
        target_group_attributes=[
            elbv2.CfnTargetGroup.TargetGroupAttributeProperty(
                key="load_balancing.algorithm.type", value="least_outstanding_requests"
            ),
            elbv2.CfnTargetGroup.TargetGroupAttributeProperty(key="slow_start.duration_seconds", value="60"),
        ],
    )
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((Path(app.outdir) / "validation-report.json").read_text())
    rules = [v["ruleName"] for p in report["pluginReports"] for v in p["violations"]]
    assert "ELBV2-TG-LOR-SLOW-START" in rules
