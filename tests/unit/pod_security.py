"""The Pod Security Standards checks, for tests: which profile a pod spec passes, and why not.

A small reimplementation of the Pod Security Admission plugin's checks as Kubernetes 1.35 runs
them (kubernetes/kubernetes `staging/src/k8s.io/pod-security-admission/policy/check_*.go`; the
profiles as documented at https://kubernetes.io/docs/concepts/security/pod-security-standards/).
Each check returns the messages of the fields it rejects, so a test can show what failed.
Not covered: Windows host-process fields, AppArmor annotations and fields (gpufarm sets none),
and the user-namespace relaxation of the non-root checks (gpufarm pods share the host's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

BASELINE = "baseline"
RESTRICTED = "restricted"
PRIVILEGED = "privileged"

BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
"""Capabilities `baseline` lets a container add (`check_capabilities_baseline.go`)."""

RESTRICTED_ADDABLE = frozenset({"NET_BIND_SERVICE"})
"""The only capability `restricted` lets a container add (`check_capabilities_restricted.go`)."""

RESTRICTED_VOLUME_TYPES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
"""Volume sources `restricted` allows (`check_restrictedVolumes.go`)."""

SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    }
)
"""Sysctls `baseline` allows from 1.0 on (`check_sysctls.go`, `sysctls_allowed_1_0`). Later
releases allow a few more; they are not modelled, so this check is stricter, never laxer."""

Check = Callable[[dict[str, Any]], list[str]]


def containers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every container of a pod spec: init (native sidecars included), regular and ephemeral."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key, [])


def _ctx(container: dict[str, Any]) -> dict[str, Any]:
    context: dict[str, Any] = container.get("securityContext") or {}
    return context


def host_namespaces(spec: dict[str, Any]) -> list[str]:
    return [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]


def privileged(spec: dict[str, Any]) -> list[str]:
    return [f"container {c['name']!r} is privileged" for c in containers(spec) if _ctx(c).get("privileged")]


def capabilities_baseline(spec: dict[str, Any]) -> list[str]:
    out = []
    for c in containers(spec):
        extra = sorted(set((_ctx(c).get("capabilities") or {}).get("add", [])) - BASELINE_CAPABILITIES)
        if extra:
            out.append(f"container {c['name']!r} adds non-default capabilities {extra}")
    return out


def host_path_volumes(spec: dict[str, Any]) -> list[str]:
    return [f"volume {v['name']!r} is a hostPath" for v in spec.get("volumes", []) if "hostPath" in v]


def host_ports(spec: dict[str, Any]) -> list[str]:
    return [
        f"container {c['name']!r} uses hostPort {p['hostPort']}"
        for c in containers(spec)
        for p in c.get("ports", [])
        if p.get("hostPort")
    ]


def selinux(spec: dict[str, Any]) -> list[str]:
    """Any seLinuxOptions at all (upstream allows a few container types: stricter, never laxer)."""
    options = [("pod", (spec.get("securityContext") or {}).get("seLinuxOptions"))]
    options += [(f"container {c['name']!r}", _ctx(c).get("seLinuxOptions")) for c in containers(spec)]
    return [f"{where} sets seLinuxOptions {opts}" for where, opts in options if opts]


def proc_mount(spec: dict[str, Any]) -> list[str]:
    return [
        f"container {c['name']!r} sets procMount {_ctx(c)['procMount']!r}"
        for c in containers(spec)
        if _ctx(c).get("procMount", "Default") != "Default"
    ]


def seccomp_baseline(spec: dict[str, Any]) -> list[str]:
    out = []
    if ((spec.get("securityContext") or {}).get("seccompProfile") or {}).get("type") == "Unconfined":
        out.append("pod sets seccompProfile Unconfined")
    for c in containers(spec):
        if (_ctx(c).get("seccompProfile") or {}).get("type") == "Unconfined":
            out.append(f"container {c['name']!r} sets seccompProfile Unconfined")
    return out


def sysctls(spec: dict[str, Any]) -> list[str]:
    names = [s["name"] for s in (spec.get("securityContext") or {}).get("sysctls", [])]
    return [f"pod sets unsafe sysctl {n!r}" for n in names if n not in SAFE_SYSCTLS]


def restricted_volumes(spec: dict[str, Any]) -> list[str]:
    out = []
    for volume in spec.get("volumes", []):
        source = set(volume) - {"name"}
        if not source <= RESTRICTED_VOLUME_TYPES:
            out.append(f"volume {volume['name']!r} has restricted type {sorted(source)}")
    return out


def privilege_escalation(spec: dict[str, Any]) -> list[str]:
    return [
        f"container {c['name']!r} must set allowPrivilegeEscalation=false"
        for c in containers(spec)
        if _ctx(c).get("allowPrivilegeEscalation") is not False
    ]


def run_as_non_root(spec: dict[str, Any]) -> list[str]:
    """Explicit `runAsNonRoot: false` first; only without one, the containers no `true` covers."""
    pod = (spec.get("securityContext") or {}).get("runAsNonRoot")
    explicit = ["pod sets runAsNonRoot=false"] if pod is False else []
    implicit = []
    for c in containers(spec):
        value = _ctx(c).get("runAsNonRoot")
        if value is False:
            explicit.append(f"container {c['name']!r} sets runAsNonRoot=false")
        elif value is None and pod is not True:
            implicit.append(f"pod or container {c['name']!r} must set runAsNonRoot=true")
    return explicit or implicit


def run_as_user(spec: dict[str, Any]) -> list[str]:
    out = ["pod sets runAsUser=0"] if (spec.get("securityContext") or {}).get("runAsUser") == 0 else []
    out += [
        f"container {c['name']!r} sets runAsUser=0" for c in containers(spec) if _ctx(c).get("runAsUser") == 0
    ]
    return out


def seccomp_restricted(spec: dict[str, Any]) -> list[str]:
    allowed = {"RuntimeDefault", "Localhost"}
    pod = ((spec.get("securityContext") or {}).get("seccompProfile") or {}).get("type")
    out = [f"pod sets seccompProfile {pod}"] if pod is not None and pod not in allowed else []
    for c in containers(spec):
        own = (_ctx(c).get("seccompProfile") or {}).get("type")
        if own is not None and own not in allowed:
            out.append(f"container {c['name']!r} sets seccompProfile {own}")
        elif own is None and pod is None:
            out.append(f"pod or container {c['name']!r} must set seccompProfile RuntimeDefault or Localhost")
    return out


def capabilities_restricted(spec: dict[str, Any]) -> list[str]:
    out = []
    for c in containers(spec):
        caps = _ctx(c).get("capabilities") or {}
        if "ALL" not in caps.get("drop", []):
            out.append(f"container {c['name']!r} must drop ALL capabilities")
        extra = sorted(set(caps.get("add", [])) - RESTRICTED_ADDABLE)
        if extra:
            out.append(f"container {c['name']!r} must not add {extra}")
    return out


BASELINE_CHECKS: tuple[Check, ...] = (
    host_namespaces,
    privileged,
    capabilities_baseline,
    host_path_volumes,
    host_ports,
    selinux,
    proc_mount,
    seccomp_baseline,
    sysctls,
)
RESTRICTED_CHECKS: tuple[Check, ...] = (
    *BASELINE_CHECKS,
    restricted_volumes,
    privilege_escalation,
    run_as_non_root,
    run_as_user,
    seccomp_restricted,
    capabilities_restricted,
)


def violations(spec: dict[str, Any], level: str) -> list[str]:
    """Why a pod spec fails `level` (`privileged`, `baseline`, `restricted`); [] when it passes."""
    checks = {PRIVILEGED: (), BASELINE: BASELINE_CHECKS, RESTRICTED: RESTRICTED_CHECKS}[level]
    return [message for check in checks for message in check(spec)]


def strictest_level(spec: dict[str, Any]) -> str:
    """The strictest profile a pod spec passes."""
    for level in (RESTRICTED, BASELINE):
        if not violations(spec, level):
            return level
    return PRIVILEGED


def pod_specs(manifest: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(`Kind/name[/role]`, pod spec) of every pod template in a manifest; [] for kinds without pods."""
    name = f"{manifest['kind']}/{manifest['metadata']['name']}"
    spec = manifest.get("spec", {})
    if manifest["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"):
        return [(name, spec["template"]["spec"])]
    if manifest["kind"] == "Pod":
        return [(name, spec)]
    if manifest["kind"] == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        out = [(f"{name}/worker", lwt["workerTemplate"]["spec"])]
        if "leaderTemplate" in lwt:
            out.insert(0, (f"{name}/leader", lwt["leaderTemplate"]["spec"]))
        return out
    return []
