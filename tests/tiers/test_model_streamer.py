"""The production tier with `model_store.kind: runai-streamer`, synthesized once through every gate.

No Mountpoint add-on and no FSx file system: each vLLM pod streams its weights from S3 as the
`vllm` service account, whose Pod Identity role reads the models' prefixes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpufarm.config import TierConfig
from gpufarm.k8s.labels import workload_name
from gpufarm.k8s.serving import SERVICE_ACCOUNT
from tests.conftest import cfn_lint_errors, nag_violations
from tests.tiers.billing_walk import costing_gaps
from tests.tiers.conftest import synthesize
from tests.tiers.helpers import manifest_of, resolved_manifests, resources
from tests.unit.factories import make_production, production_model
from tests.unit.k8s_schema import validate_core
from tests.unit.upstream_ref import vllm_arg_issues

STACK = "gpufarm-production"


@pytest.fixture(scope="module")
def tier() -> TierConfig:
    return make_production({"model_store": {"kind": "runai-streamer"}}, production_model(1, engine="vllm"))


@pytest.fixture(scope="module")
def outdir(tier: TierConfig, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("streamer")
    synthesize([tier], folder)
    return folder


@pytest.fixture(scope="module")
def template(outdir: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((outdir / f"{STACK}.template.json").read_text())
    return loaded


def test_compliance_deploy_rules_and_cfn_lint_pass(outdir: Path, template: dict[str, Any]) -> None:
    assert nag_violations(outdir) == {}
    assert cfn_lint_errors(outdir / f"{STACK}.template.json") == []


def test_every_billed_resource_is_priced(template: dict[str, Any]) -> None:
    assert costing_gaps(template) == []


def test_no_csi_driver_and_no_file_system(template: dict[str, Any]) -> None:
    addons = [a["Properties"]["AddonName"] for a in resources(template, "AWS::EKS::Addon").values()]
    assert "aws-mountpoint-s3-csi-driver" not in addons and "aws-fsx-csi-driver" not in addons
    assert resources(template, "AWS::FSx::FileSystem") == {}
    kinds = {m["kind"] for m in resolved_manifests(template)}
    assert "PersistentVolume" not in kinds and "PersistentVolumeClaim" not in kinds


def test_vllm_pods_stream_with_checked_flags(template: dict[str, Any], tier: TierConfig) -> None:
    for model in tier.models:
        deployment = manifest_of(template, "Deployment", workload_name(model.name))
        validate_core(deployment)
        pod = deployment["spec"]["template"]["spec"]
        (engine,) = pod["containers"]
        assert engine["args"][0] == model.weights
        assert "runai_streamer" in engine["args"]
        assert vllm_arg_issues(engine["args"], "0.31.0") == []
        assert pod["serviceAccountName"] == SERVICE_ACCOUNT


def test_the_pods_role_reads_exactly_the_model_prefixes(template: dict[str, Any], tier: TierConfig) -> None:
    (association,) = [
        a
        for a in resources(template, "AWS::EKS::PodIdentityAssociation").values()
        if a["Properties"]["ServiceAccount"] == SERVICE_ACCOUNT
    ]
    role_id = association["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    policies = [
        p
        for p in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    statements = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]
    actions = sorted(
        {s["Action"] if isinstance(s["Action"], str) else tuple(s["Action"]) for s in statements}
    )
    assert actions == ["s3:GetObject", "s3:ListBucket"]
    (listing,) = [s for s in statements if s["Action"] == "s3:ListBucket"]
    prefixes = sorted(m.weights.split("/", 3)[3] + "*" for m in tier.models)
    assert sorted(listing["Condition"]["StringLike"]["s3:prefix"]) == prefixes
