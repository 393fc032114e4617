"""Acknowledgements of Kubernetes scanner findings, written on the manifest that causes them.

The test suite scans every manifest gpufarm renders with checkov's Kubernetes framework
(tests/tiers/test_k8s_security_scan.py, docs/decisions/0043-checkov-kubernetes-scan-gate.md), as
cdk-nag checks the AWS side. A finding that is there by design is acknowledged by the builder
that makes the manifest, with :func:`scan_acknowledge` and a reason about that workload: the
acknowledgement travels with the object, in the form checkov itself reads, so anyone who scans the
rendered manifests (or the live cluster objects) sees the same suppression and its reason.

checkov reads a Kubernetes suppression from an annotation on the object's own metadata whose key
contains `checkov.io/skip`, with the value `<check id>=<reason>` (bridgecrewio/checkov,
docs/2.Concepts/Suppressions.md, "Kubernetes Example": `checkov.io/skip#: <check_id>=<comment>`).
checkov 3.3.30 splits the value on every `=` and expects exactly two parts
(checkov/kubernetes/kubernetes_utils.py, `get_skipped_checks`), so a reason never holds one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SKIP_ANNOTATION_PREFIX = "checkov.io/skip"
"""checkov's suppression annotation; the keys written here are `checkov.io/skip1`, `...skip2`, ..."""

CHECK_ID = re.compile(r"CKV2?_K8S_[0-9]+")
"""checkov's Kubernetes check IDs: `CKV_K8S_<n>` (resource checks) and `CKV2_K8S_<n>` (graph checks)."""

MIN_REASON_WORDS = 8
"""A reason names the workload and why the check does not fit it; fewer words cannot do both."""

GENERIC_REASONS = frozenset(
    {
        "accepted",
        "accepted risk",
        "as designed",
        "by design",
        "false positive",
        "ignore",
        "intended",
        "known issue",
        "n/a",
        "no comment provided",
        "not applicable",
        "not needed",
        "not relevant",
        "skip",
        "suppressed",
        "tbd",
        "todo",
        "wontfix",
    }
)
"""Blanket reasons (compared without case, spaces or trailing punctuation): never enough on their own."""


def reason_problem(reason: str) -> str | None:
    """Why `reason` cannot acknowledge a finding, or None when it can.

    A reason is one line of at least :data:`MIN_REASON_WORDS` words, without `=` (checkov splits the
    annotation on it), and is not one of :data:`GENERIC_REASONS`.
    """
    text = reason.strip()
    if not text:
        return "is empty"
    if "=" in text:
        return "contains '=' (checkov splits the annotation value on it)"
    if "\n" in text or "\r" in text:
        return "spans several lines"
    if " ".join(text.lower().rstrip(".!").split()) in GENERIC_REASONS:
        return "is a blanket reason: say why this check does not fit this workload"
    words = len(text.split())
    if words < MIN_REASON_WORDS:
        return (
            f"has {words} words, fewer than {MIN_REASON_WORDS}: "
            "name the workload and why this check does not fit it"
        )
    return None


def acknowledgements(manifest: Mapping[str, Any]) -> dict[str, str]:
    """Check ID -> reason of every scanner acknowledgement on a manifest's metadata.

    Reads every annotation checkov would treat as a suppression (a key containing
    :data:`SKIP_ANNOTATION_PREFIX`); a value without `=` yields an empty reason.
    """
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    out: dict[str, str] = {}
    for key, value in annotations.items():
        if SKIP_ANNOTATION_PREFIX in key:
            check_id, _, reason = str(value).partition("=")
            out[check_id.strip()] = reason
    return out


def scan_acknowledge(manifest: dict[str, Any], check_id: str, reason: str) -> dict[str, Any]:
    """Acknowledge scanner finding `check_id` on `manifest` with `reason`; returns the manifest.

    Adds the annotation `checkov.io/skip<n>: <check_id>=<reason>` to the object's own metadata
    (`n` is the next free number on it), which checkov honours. Call it in the builder that makes
    the manifest, where the reason can speak about that workload. Raises ValueError for an ID that
    is not a checkov Kubernetes check, a check already acknowledged on this manifest, or a reason
    :func:`reason_problem` rejects.
    """
    if not CHECK_ID.fullmatch(check_id):
        raise ValueError(
            "'check_id' must be a checkov Kubernetes check ID (CKV_K8S_<n> or CKV2_K8S_<n>), "
            f"got {check_id!r}"
        )
    problem = reason_problem(reason)
    if problem is not None:
        raise ValueError(f"the reason for {check_id} {problem}, got {reason!r}")
    existing = acknowledgements(manifest)
    if check_id in existing:
        raise ValueError(
            f"{check_id} is already acknowledged on {manifest.get('kind')}/"
            f"{manifest.get('metadata', {}).get('name')}: {existing[check_id]!r}"
        )
    annotations: dict[str, str] = manifest.setdefault("metadata", {}).setdefault("annotations", {})
    number = 1
    while f"{SKIP_ANNOTATION_PREFIX}{number}" in annotations:
        number += 1
    annotations[f"{SKIP_ANNOTATION_PREFIX}{number}"] = f"{check_id}={reason.strip()}"
    return manifest
