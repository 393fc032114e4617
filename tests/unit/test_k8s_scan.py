"""scan_acknowledge: checkov's skip annotation on the manifest's own metadata, with a specific reason."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.k8s.scan import acknowledgements, reason_problem, scan_acknowledge

NOT_A_CHECK = "'check_id' must be a checkov Kubernetes check ID (CKV_K8S_<n> or CKV2_K8S_<n>), got "
REASON = "the pod runs alone on a GPU node and a CPU quota would throttle its engine threads"


def _deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm-a", "namespace": "gpufarm", "annotations": {"other": "kept"}},
        "spec": {},
    }


def test_acknowledgement_is_checkovs_skip_annotation_on_the_object() -> None:
    manifest = _deployment()
    assert scan_acknowledge(manifest, "CKV_K8S_11", REASON) is manifest
    scan_acknowledge(manifest, "CKV2_K8S_6", REASON + " and more")
    # The form checkov reads (docs/2.Concepts/Suppressions.md): `checkov.io/skip<n>: <id>=<comment>`.
    assert manifest["metadata"]["annotations"] == {
        "other": "kept",
        "checkov.io/skip1": f"CKV_K8S_11={REASON}",
        "checkov.io/skip2": f"CKV2_K8S_6={REASON} and more",
    }
    assert acknowledgements(manifest) == {"CKV_K8S_11": REASON, "CKV2_K8S_6": REASON + " and more"}


def test_acknowledgement_takes_the_next_free_number_and_creates_the_annotations() -> None:
    manifest: dict[str, Any] = {"kind": "Pod", "metadata": {"name": "p"}}
    scan_acknowledge(manifest, "CKV_K8S_8", REASON)
    manifest["metadata"]["annotations"]["checkov.io/skip3"] = "CKV_K8S_9=" + REASON
    scan_acknowledge(manifest, "CKV_K8S_10", REASON)
    assert sorted(manifest["metadata"]["annotations"]) == [
        "checkov.io/skip1",
        "checkov.io/skip2",
        "checkov.io/skip3",
    ]
    assert acknowledgements(manifest)["CKV_K8S_10"] == REASON


def test_acknowledgements_read_a_value_without_reason_as_empty() -> None:
    manifest = {"metadata": {"annotations": {"checkov.io/skip1": "CKV_K8S_14", "a": "b"}}}
    assert acknowledgements(manifest) == {"CKV_K8S_14": ""}
    assert acknowledgements({"metadata": {"name": "x"}}) == {}


@pytest.mark.parametrize(
    ("check_id", "reason", "message"),
    [
        (
            "CKV_AWS_20",
            REASON,
            NOT_A_CHECK + "'CKV_AWS_20'",
        ),
        (
            "ckv_k8s_11",
            REASON,
            NOT_A_CHECK + "'ckv_k8s_11'",
        ),
        ("CKV_K8S_11", "  ", "the reason for CKV_K8S_11 is empty, got '  '"),
        (
            "CKV_K8S_11",
            "By design.",
            "the reason for CKV_K8S_11 is a blanket reason: say why this check does not fit this workload, "
            "got 'By design.'",
        ),
        (
            "CKV_K8S_11",
            "false   positive",
            "the reason for CKV_K8S_11 is a blanket reason: say why this check does not fit this workload, "
            "got 'false   positive'",
        ),
        (
            "CKV_K8S_11",
            "GPU pods need no CPU limit",
            "the reason for CKV_K8S_11 has 6 words, fewer than 8: name the workload and why this check "
            "does not fit it, got 'GPU pods need no CPU limit'",
        ),
        (
            "CKV_K8S_11",
            REASON + ", cpu=unbounded",
            "the reason for CKV_K8S_11 contains '=' (checkov splits the annotation value on it), "
            f"got '{REASON}, cpu=unbounded'",
        ),
        (
            "CKV_K8S_11",
            REASON + "\nsecond line",
            "the reason for CKV_K8S_11 spans several lines, got " + repr(REASON + "\nsecond line"),
        ),
    ],
)
def test_invalid_acknowledgement_is_refused(check_id: str, reason: str, message: str) -> None:
    manifest = _deployment()
    with pytest.raises(ValueError) as raised:
        scan_acknowledge(manifest, check_id, reason)
    assert str(raised.value) == message
    assert manifest["metadata"]["annotations"] == {"other": "kept"}


def test_a_check_is_acknowledged_once_per_object() -> None:
    manifest = scan_acknowledge(_deployment(), "CKV_K8S_11", REASON)
    with pytest.raises(ValueError) as raised:
        scan_acknowledge(manifest, "CKV_K8S_11", REASON + " again")
    assert str(raised.value) == f"CKV_K8S_11 is already acknowledged on Deployment/vllm-a: {REASON!r}"


def test_reason_problem_accepts_a_specific_reason() -> None:
    assert reason_problem(REASON) is None
