"""The Kubernetes scan gate itself (tests/k8s_scan.py), on small manifests and one real checkov run.

Each case is a namespace of its own, scanned with the others in a single run: a pod that passes
every checkov Kubernetes check (with a NetworkPolicy selecting it), then the same pod without a
CPU limit, unacknowledged, acknowledged, acknowledged with a blanket reason, and a stale
acknowledgement on the pod that has one.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from gpufarm.k8s.scan import scan_acknowledge
from tests.k8s_scan import (
    ScannedObject,
    ScanResult,
    gate_problems,
    object_ref,
    scan,
    scanned_objects,
)

REASON = "the test pod runs alone on its node and a CPU quota would throttle its only process"
CPU_LIMITS = "CKV_K8S_11"
IMAGE = "registry.example.com/web@sha256:" + "0" * 64


def _pod(namespace: str, *, cpu_limit: bool = True) -> dict[str, Any]:
    """A pod that passes every checkov Kubernetes check (but CKV_K8S_11 without `cpu_limit`)."""
    limits = {"cpu": "200m", "memory": "64Mi"} if cpu_limit else {"memory": "64Mi"}
    context = {"runAsNonRoot": True, "runAsUser": 10001, "seccompProfile": {"type": "RuntimeDefault"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": namespace, "labels": {"app": "web"}},
        "spec": {
            "automountServiceAccountToken": False,
            "securityContext": {**context, "runAsGroup": 10001},
            "containers": [_container(limits, context)],
        },
    }


def _container(limits: dict[str, str], context: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "web",
        "image": IMAGE,
        "imagePullPolicy": "Always",
        "ports": [{"containerPort": 8080}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": limits},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
        "livenessProbe": {"httpGet": {"path": "/live", "port": 8080}},
        "securityContext": {
            **context,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def _deny_all(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "default-deny", "namespace": namespace},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
    }


def _leader_worker_set(namespace: str) -> dict[str, Any]:
    """A LeaderWorkerSet whose worker template has no CPU limit; its leader's has."""
    leader, worker = _pod(namespace)["spec"], _pod(namespace, cpu_limit=False)["spec"]
    labels = {"app": "web"}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "group", "namespace": namespace},
        "spec": {
            "leaderWorkerTemplate": {
                "size": 2,
                "leaderTemplate": {"metadata": {"labels": labels}, "spec": leader},
                "workerTemplate": {"metadata": {"labels": labels}, "spec": worker},
            }
        },
    }


def _cases() -> dict[str, list[dict[str, Any]]]:
    blanket = _pod("blanket", cpu_limit=False)
    blanket["metadata"]["annotations"] = {"checkov.io/skip1": f"{CPU_LIMITS}=by design"}
    return {
        "clean": [_pod("clean")],
        "unacknowledged": [_pod("unacknowledged", cpu_limit=False)],
        "acknowledged": [scan_acknowledge(_pod("acknowledged", cpu_limit=False), CPU_LIMITS, REASON)],
        "stale": [scan_acknowledge(_pod("stale"), CPU_LIMITS, REASON)],
        "blanket": [blanket],
        "lws": [_leader_worker_set("lws")],
        "lws-acknowledged": [scan_acknowledge(_leader_worker_set("lws-acknowledged"), CPU_LIMITS, REASON)],
    }


NATIVE = "native"
"""The acknowledged pod with its annotation left on, to see checkov itself honour it."""


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> ScanResult:
    objects = []
    for case, manifests in _cases().items():
        objects += scanned_objects(case, [*manifests, _deny_all(case)])
    native = scan_acknowledge(_pod(NATIVE, cpu_limit=False), CPU_LIMITS, REASON)
    objects += [
        ScannedObject(NATIVE, object_ref(native), {}, [copy.deepcopy(native)]),
        *scanned_objects(NATIVE, [_deny_all(NATIVE)]),
    ]
    return scan(objects, tmp_path_factory.mktemp("scan-gate"))


def test_a_clean_pod_passes(result: ScanResult) -> None:
    assert result.parsing_errors == []
    (pod, _) = result.of("clean")
    assert pod.evaluated and pod.findings == []
    assert gate_problems(result.only("clean"), {}) == []


def test_an_unacknowledged_finding_fails(result: ScanResult) -> None:
    assert gate_problems(result.only("unacknowledged"), {}) == [
        "unacknowledged Pod/unacknowledged/web CKV_K8S_11 CPU limits should be set"
    ]


def test_an_acknowledged_finding_passes(result: ScanResult) -> None:
    (pod, _) = result.of("acknowledged")
    assert pod.acknowledged == {CPU_LIMITS: REASON}
    # The gate scans without the annotation: the finding is there, and acknowledged.
    assert [f.check_id for f in pod.findings] == [CPU_LIMITS]
    assert "checkov.io/skip1" not in str(pod.documents)
    assert gate_problems(result.only("acknowledged"), {}) == []


def test_checkov_honours_the_acknowledgement_annotation(result: ScanResult) -> None:
    (pod, _) = result.of(NATIVE)
    assert pod.skipped == {CPU_LIMITS: REASON}
    assert pod.findings == []


def test_a_stale_acknowledgement_fails(result: ScanResult) -> None:
    assert gate_problems(result.only("stale"), {}) == [
        f"stale Pod/stale/web acknowledges CKV_K8S_11, which does not fail there: "
        f"remove the acknowledgement ({REASON!r})"
    ]


def test_a_blanket_reason_fails(result: ScanResult) -> None:
    assert gate_problems(result.only("blanket"), {}) == [
        "blanket Pod/blanket/web CKV_K8S_11: the reason is a blanket reason: "
        "say why this check does not fit this workload, got 'by design'"
    ]


def test_a_leader_worker_sets_pod_templates_are_scanned(result: ScanResult) -> None:
    # checkov does not read LeaderWorkerSet: its templates are scanned as pods, findings land on it.
    assert gate_problems(result.only("lws"), {}) == [
        "lws LeaderWorkerSet/lws/group CKV_K8S_11 CPU limits should be set"
    ]
    assert gate_problems(result.only("lws-acknowledged"), {}) == []


def test_pending_check_ids_pass_until_they_fail_nowhere(result: ScanResult) -> None:
    assert gate_problems(result.only("unacknowledged"), {CPU_LIMITS: "podsec"}) == []
    assert gate_problems(result.only("clean"), {CPU_LIMITS: "podsec"}) == [
        "CKV_K8S_11 (pending on the 'podsec' part) fails nowhere: take it off the pending list"
    ]


def test_checkov_missing_skips_outside_ci_and_fails_in_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import tests.k8s_scan as gate

    monkeypatch.setattr(gate, "SCAN_VENV", tmp_path / "absent")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="checkov is not installed"):
        gate.checkov_executable()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="the Kubernetes scan gate did not run"):
        gate.checkov_executable()
