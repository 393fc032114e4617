"""The Kubernetes scan gate: checkov's Kubernetes framework over rendered manifests, one run per session.

checkov runs from its own virtualenv (`.venv-scan`, installed from the hashed
`k8s-scan/requirements.lock`; its pins cannot sit beside gpufarm's, see
docs/decisions/0043-checkov-kubernetes-scan-gate.md) as one subprocess over a folder with one
file per scanned object, so each finding maps back to the object (and the tier) that caused it.

How a finding is judged:
- The acknowledgements an object carries (checkov's own `checkov.io/skip<n>` annotations, written
  by :func:`gpufarm.k8s.scan.scan_acknowledge`) are read, then removed before the scan: checkov
  does not evaluate a check it is told to skip, so only a scan without them shows whether each
  acknowledgement still matches a finding.
- A finding on an object is acknowledged when the object (or, for a pod template checkov cannot
  read, the custom object that holds it) acknowledges its check ID. Every other finding fails,
  unless its check ID is pending in the caller's list of findings other changes remove.
- An acknowledgement whose check no longer fails on that object is stale and fails; so does one
  with an empty or blanket reason (:func:`gpufarm.k8s.scan.reason_problem`).

checkov knows the built-in workload kinds only. The pod templates of a LeaderWorkerSet (leader
and worker) are therefore scanned as Pods named `<lws>/leader` and `<lws>/worker`: the Ray head
and its workers are the pods that most need the checks.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufarm.k8s.scan import SKIP_ANNOTATION_PREFIX, acknowledgements, reason_problem
from tests.conftest import REPO

SCAN_VENV = REPO / ".venv-scan"
SCAN_LOCK = REPO / "k8s-scan" / "requirements.lock"
SETUP_COMMAND = "make scan-venv"

POD_TEMPLATES: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "LeaderWorkerSet": (
        ("leader", ("spec", "leaderWorkerTemplate", "leaderTemplate")),
        ("worker", ("spec", "leaderWorkerTemplate", "workerTemplate")),
    ),
}
"""Custom kinds holding pod templates checkov does not read: kind -> (role, path to the template)."""


@dataclass(frozen=True)
class Finding:
    """One failed check on one scanned object."""

    tier: str
    ref: str
    """`<kind>/<namespace>/<name>` of the object that carries the acknowledgements."""
    check_id: str
    check_name: str

    def __str__(self) -> str:
        return f"{self.tier} {self.ref} {self.check_id} {self.check_name}"


@dataclass
class ScannedObject:
    """An object as gpufarm rendered it: its acknowledgements and the documents checkov scans for it."""

    tier: str
    ref: str
    acknowledged: dict[str, str]
    documents: list[dict[str, Any]]
    findings: list[Finding] = field(default_factory=list)
    evaluated: bool = False
    """Whether checkov reported any check (passed or failed) on one of its documents."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Check ID -> comment of the checks checkov itself skipped (only where a document kept its
    skip annotations: the gate's own documents never do)."""


@dataclass
class ScanResult:
    """The scanned objects of every tier, their findings, and checkov's own errors."""

    objects: list[ScannedObject]
    parsing_errors: list[str]

    def tiers(self) -> list[str]:
        """The tier labels scanned, in order."""
        return list(dict.fromkeys(o.tier for o in self.objects))

    def of(self, tier: str) -> list[ScannedObject]:
        """The scanned objects of one tier."""
        return [o for o in self.objects if o.tier == tier]

    def only(self, tier: str) -> ScanResult:
        """The result of one tier alone."""
        return ScanResult(self.of(tier), [])


def object_ref(manifest: Mapping[str, Any]) -> str:
    """`<kind>/<namespace>/<name>`; cluster-scoped objects have `-` as their namespace."""
    metadata = manifest.get("metadata") or {}
    return f"{manifest.get('kind')}/{metadata.get('namespace', '-')}/{metadata.get('name')}"


def _without_acknowledgements(manifest: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(manifest)
    annotations = out.get("metadata", {}).get("annotations")
    if annotations:
        for key in [k for k in annotations if SKIP_ANNOTATION_PREFIX in k]:
            del annotations[key]
        if not annotations:
            del out["metadata"]["annotations"]
    return out


def _pod_documents(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pod templates of a custom workload kind as Pods checkov reads (none for other kinds)."""
    out = []
    metadata = manifest.get("metadata") or {}
    for role, path in POD_TEMPLATES.get(str(manifest.get("kind")), ()):
        template: Any = manifest
        for key in path:
            template = template.get(key) if isinstance(template, Mapping) else None
        if not isinstance(template, Mapping):
            continue
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{metadata.get('name')}-{role}",
                    "namespace": metadata.get("namespace", "default"),
                    "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                },
                "spec": copy.deepcopy(dict(template.get("spec") or {})),
            }
        )
    return out


def scanned_objects(tier: str, manifests: Iterable[Mapping[str, Any]]) -> list[ScannedObject]:
    """The objects of one tier as the gate scans them: acknowledgements read, then taken off."""
    out = []
    for manifest in manifests:
        plain = _without_acknowledgements(dict(manifest))
        documents = _pod_documents(plain) if plain.get("kind") in POD_TEMPLATES else [plain]
        out.append(ScannedObject(tier, object_ref(manifest), acknowledgements(manifest), documents))
    return out


def checkov_executable() -> Path:
    """checkov of `.venv-scan`; skips the test when it is missing, but fails under CI (CI=true).

    A gate that silently skips in CI is no gate: `make test` (and `make setup`) install it there.
    """
    exe = SCAN_VENV / "bin" / "checkov"
    if not exe.exists():
        message = (
            f"checkov is not installed ({exe} not found): the Kubernetes scan gate did not run. "
            f"`make test` installs it; by hand, from {REPO}: {SETUP_COMMAND}"
        )
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    pinned, installed = locked_version("checkov"), installed_version("checkov")
    if installed != pinned:
        pytest.fail(
            f"{SCAN_VENV} has checkov {installed}, {SCAN_LOCK.relative_to(REPO)} pins {pinned}: "
            f"recreate it: rm -rf .venv-scan && {SETUP_COMMAND}",
            pytrace=False,
        )
    return exe


def locked_version(package: str) -> str:
    """The version of `package` that k8s-scan/requirements.lock pins."""
    for line in SCAN_LOCK.read_text(encoding="utf-8").splitlines():
        name, sep, version = line.partition("==")
        if sep and name.strip() == package:
            return version.split()[0].rstrip("\\").strip()
    raise AssertionError(f"{SCAN_LOCK} pins no {package}")


def installed_version(package: str) -> str | None:
    """The version of `package` installed in `.venv-scan` (None: not installed)."""
    found = sorted(SCAN_VENV.glob(f"lib/python*/site-packages/{package}-*.dist-info"))
    return found[-1].name.removesuffix(".dist-info").split("-", 1)[1] if found else None


def scan(objects: Sequence[ScannedObject], workdir: Path) -> ScanResult:
    """Run checkov's Kubernetes framework once over every document of `objects`; record the findings.

    Each document goes to a file of its own (`<n>.yaml`), so each result maps back to its object,
    graph checks (which report a pod nested in its parent) included.
    """
    exe = checkov_executable()
    folder = workdir / "manifests"
    folder.mkdir(parents=True, exist_ok=False)
    owner: dict[str, ScannedObject] = {}
    for obj in objects:
        for document in obj.documents:
            path = f"/{len(owner)}.yaml"
            owner[path] = obj
            (folder / path.lstrip("/")).write_text(yaml.safe_dump(document, sort_keys=False))
    completed = subprocess.run(
        [
            str(exe),
            "--directory",
            str(folder),
            "--framework",
            "kubernetes",
            "--output",
            "json",
            # Not --quiet: it leaves passed and skipped checks out of the report, and both are read.
            "--compact",
            "--skip-download",
        ],
        capture_output=True,
        text=True,
        check=False,
        # Offline: with --skip-download and no API key, checkov fetches no guidelines or policies.
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
        timeout=600,
    )
    # checkov exits 1 when a check failed; anything else means it did not finish the scan.
    if completed.returncode not in (0, 1) or not completed.stdout.strip():
        raise AssertionError(
            f"checkov exited {completed.returncode}:\n{completed.stderr[-4000:]}\n{completed.stdout[-2000:]}"
        )
    reports = json.loads(completed.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    parsing_errors: list[str] = []
    for report in reports:
        if report.get("check_type") != "kubernetes":
            continue
        results = report["results"]
        parsing_errors += list(results.get("parsing_errors", []))
        for record in results.get("skipped_checks", []):
            comment = record["check_result"].get("suppress_comment", "")
            owner[record["file_path"]].skipped[record["check_id"]] = comment
        for status in ("passed_checks", "failed_checks"):
            for record in results.get(status, []):
                obj = owner[record["file_path"]]
                obj.evaluated = True
                if status == "failed_checks":
                    finding = Finding(obj.tier, obj.ref, record["check_id"], record["check_name"])
                    if finding not in obj.findings:
                        obj.findings.append(finding)
    return ScanResult(list(objects), parsing_errors)


def unacknowledged(result: ScanResult, pending: Mapping[str, str]) -> list[str]:
    """Findings neither acknowledged on their object nor pending (check ID -> part that fixes it)."""
    return [
        str(f)
        for obj in result.objects
        for f in obj.findings
        if f.check_id not in obj.acknowledged and f.check_id not in pending
    ]


def stale_acknowledgements(result: ScanResult) -> list[str]:
    """Acknowledgements whose check no longer fails on their object."""
    return [
        f"{obj.tier} {obj.ref} acknowledges {check_id}, which does not fail there: remove the "
        f"acknowledgement ({reason!r})"
        for obj in result.objects
        for check_id, reason in obj.acknowledged.items()
        if check_id not in {f.check_id for f in obj.findings}
    ]


def bad_reasons(result: ScanResult) -> list[str]:
    """Acknowledgements with an empty or blanket reason."""
    out = []
    for obj in result.objects:
        for check_id, reason in obj.acknowledged.items():
            problem = reason_problem(reason)
            if problem is not None:
                out.append(f"{obj.tier} {obj.ref} {check_id}: the reason {problem}, got {reason!r}")
    return out


def stale_pending(result: ScanResult, pending: Mapping[str, str]) -> list[str]:
    """Pending check IDs that no longer fail anywhere: the change that fixes them has landed."""
    failing = {f.check_id for obj in result.objects for f in obj.findings}
    return [
        f"{check_id} (pending on the {part!r} part) fails nowhere: take it off the pending list"
        for check_id, part in pending.items()
        if check_id not in failing
    ]


def gate_problems(result: ScanResult, pending: Mapping[str, str]) -> list[str]:
    """Everything that fails the gate: checkov's parsing errors, unacknowledged findings, stale or
    badly reasoned acknowledgements, and stale pending entries."""
    return [
        *(f"checkov could not parse {e}" for e in result.parsing_errors),
        *unacknowledged(result, pending),
        *stale_acknowledgements(result),
        *bad_reasons(result),
        *stale_pending(result, pending),
    ]
