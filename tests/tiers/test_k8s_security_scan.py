"""The Kubernetes security gate: every manifest of every tier scanned by checkov, as cdk-nag is for AWS.

The three presets and the variants that exercise the other manifest builders (prefill/decode,
KV-cache routing, a gated Hugging Face model in a single-node and in a multi-node deployment) are
synthesized once per test run (shared with the tier tests that build the same ones:
tests/assemblies.py) and scanned by one checkov run (tests/k8s_scan.py). Each finding that is
there by design is acknowledged beside its manifest (gpufarm.k8s.scan.scan_acknowledge); any
other finding fails, and so does an acknowledgement that no longer matches a finding or whose
reason is empty or blanket. docs/operations.md, "The Kubernetes scan gate", says how to read and
acknowledge a finding.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.assemblies import shared_assembly
from tests.k8s_scan import (
    POD_TEMPLATES,
    ScanResult,
    bad_reasons,
    scan,
    scanned_objects,
    stale_acknowledgements,
    stale_pending,
    unacknowledged,
)
from tests.tiers.billing_walk import costing_gaps
from tests.tiers.conftest import variant
from tests.tiers.helpers import resolved_manifests

PENDING_OTHER_PARTS: dict[str, str] = {}
"""Check ID -> the change expected to remove its findings, for a finding that is neither fixed nor
acknowledged yet (empty: every finding is fixed or acknowledged beside its manifest). An entry
fails the gate once its check fails nowhere, so the list cannot go stale."""

WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod", *POD_TEMPLATES}
"""Kinds with pods: the gate fails if checkov evaluated none of its checks on one of these."""


def _model(document: dict[str, Any], index: int, **fields: Any) -> list[dict[str, Any]]:
    models = [dict(m) for m in document["models"]]
    models[index].update(fields)
    return models


def _template(outdir: Path, stack: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((outdir / f"{stack}.template.json").read_text())
    return data


@pytest.fixture(scope="module")
def variants(
    poc_document: dict[str, Any],
    production_document: dict[str, Any],
    enterprise_document: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, dict[str, Any]]:
    """Label -> template of each variant whose manifests the presets do not render."""
    no_agent = {"ingress": {"target_optimizer": {"enabled": False}}}
    configs = {
        # As tests/tiers/test_prefill_decode.py: decode pods behind the sidecar, prefill pods, llm-d's router.
        "production+prefill-decode": (
            variant(
                production_document,
                {
                    "models": _model(
                        production_document,
                        0,
                        prefill_decode={
                            "min_uncached_tokens": 1024,
                            "prefill_autoscaling": {"min_replicas": 1, "max_replicas": 2, "queue_target": 3},
                        },
                    ),
                    **no_agent,
                },
            ),
            "gpufarm-production",
        ),
        # As tests/tiers/test_kv_cache_routing.py: the endpoint picker and Envoy in front of the model.
        "production+kv-routing": (
            variant(
                production_document,
                {"models": _model(production_document, 0, kv_cache_routing=True), **no_agent},
            ),
            "gpufarm-production",
        ),
        # A gated Hugging Face model: the token init container and the Pod Identity service account.
        "poc+hf-token": (
            variant(poc_document, {"models": _model(poc_document, 0, hf_token_secret="gpufarm/hf-token")}),
            "gpufarm-poc",
        ),
        # The multi-node model reading gated Hugging Face weights: its service account, its token.
        "enterprise+hf-token": (
            variant(
                enterprise_document,
                {
                    "models": _model(
                        enterprise_document,
                        0,
                        weights="meta-llama/Llama-3.1-405B-Instruct-FP8",
                        hf_token_secret="gpufarm/hf-token",
                    )
                },
            ),
            "gpufarm-enterprise",
        ),
    }
    # Shared with the files named above, which build the same variants (tests/assemblies.py).
    return {
        label: _template(shared_assembly([config], tmp_path_factory), stack)
        for label, (config, stack) in configs.items()
    }


@pytest.fixture(scope="module")
def result(
    poc_template: dict[str, Any],
    production_template: dict[str, Any],
    enterprise_template: dict[str, Any],
    variants: dict[str, dict[str, Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> ScanResult:
    """One checkov run over the manifests of every tier and variant."""
    templates = {
        "poc": poc_template,
        "production": production_template,
        "enterprise": enterprise_template,
        **variants,
    }
    objects = [o for tier, t in templates.items() for o in scanned_objects(tier, resolved_manifests(t))]
    return scan(objects, tmp_path_factory.mktemp("k8s-scan"))


def _listing(problems: list[str]) -> str:
    return "\n".join(["", *problems])


def test_checkov_reads_every_manifest(result: ScanResult) -> None:
    assert result.parsing_errors == []
    assert result.tiers() == [
        "poc",
        "production",
        "enterprise",
        "production+prefill-decode",
        "production+kv-routing",
        "poc+hf-token",
        "enterprise+hf-token",
    ]
    workloads = [o for o in result.objects if o.ref.split("/")[0] in WORKLOAD_KINDS]
    assert [o.ref for o in workloads if not o.evaluated] == []
    # The multi-node model's pods are scanned too, though checkov does not know LeaderWorkerSet.
    assert any(o.ref.startswith("LeaderWorkerSet/") and o.evaluated for o in result.of("enterprise"))


def test_every_finding_is_acknowledged_beside_its_manifest(result: ScanResult) -> None:
    problems = unacknowledged(result, PENDING_OTHER_PARTS)
    assert problems == [], "unacknowledged findings (tier kind/namespace/name check):" + _listing(problems)


def test_every_acknowledgement_matches_a_finding(result: ScanResult) -> None:
    problems = stale_acknowledgements(result)
    assert problems == [], _listing(problems)


def test_every_acknowledgement_gives_a_specific_reason(result: ScanResult) -> None:
    problems = bad_reasons(result)
    assert problems == [], _listing(problems)
    # The gate is not vacuous: by-design findings are acknowledged in several tiers.
    assert {o.tier for o in result.objects if o.acknowledged} >= {"poc", "production", "enterprise"}


def test_every_pending_check_still_fails_somewhere(result: ScanResult) -> None:
    problems = stale_pending(result, PENDING_OTHER_PARTS)
    assert problems == [], _listing(problems)


def test_variants_bill_every_resource_type(variants: dict[str, dict[str, Any]]) -> None:
    # Prefill/decode, KV-cache routing, gated Hugging Face weights (tests/tiers/billing_walk.py).
    assert {label: costing_gaps(template) for label, template in variants.items()} == {
        label: [] for label in variants
    }
