"""Pod and container security contexts, and the Pod Security Admission labels of gpufarm's namespaces.

One answer for every builder in :mod:`gpufarm.k8s`: each container drops every capability,
cannot gain privileges, runs as a non-root user on a read-only root file system under the
runtime's default seccomp profile (:func:`container_security`), and each pod names the user its
containers run as (:func:`pod_security`). The only exception is the one need an engine has that
the Pod Security Standards' `restricted` profile forbids (:func:`efa_engine_security`), and the
namespace's level follows from it (:func:`namespace_labels`). See
docs/decisions/0041-least-privilege-pods.md and docs/architecture.md ("Pod security").

Profile rules: Kubernetes' Pod Security Standards
(https://kubernetes.io/docs/concepts/security/pod-security-standards/) as the admission plugin
implements them (kubernetes/kubernetes `staging/src/k8s.io/pod-security-admission/policy/`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class PodSecurityLevel(StrEnum):
    """A Pod Security Standards profile, as the `pod-security.kubernetes.io/*` labels name it."""

    RESTRICTED = "restricted"
    BASELINE = "baseline"
    PRIVILEGED = "privileged"


PSA_LABEL_PREFIX = "pod-security.kubernetes.io"
"""Prefix of the Pod Security Admission namespace labels (`<prefix>/<mode>`, `<prefix>/<mode>-version`)."""

VLLM_UID = 2000
"""UID (and GID) of the vLLM containers: the `vllm` user the vLLM image ships.

vLLM's Dockerfile creates `useradd --uid 2000 --gid 0 --home-dir /home/vllm vllm` and keeps
`USER root` as the default for compatibility (vllm-project/vllm#40275, merged May 2026, before
the pinned v0.31.0; docs/deployment/docker.md: "the image ships a `vllm` user (UID 2000, GID 0)").
A UID the image's /etc/passwd does not know makes PyTorch fail at import: its inductor cache
directory is derived from `getpass.getuser()`, which raises `KeyError: 'getpwuid(): uid not
found'` (vllm-project/vllm#44548; kserve/kserve#5666). So gpufarm uses the image's own user
rather than an arbitrary high UID. The group is the user's number, not the image's group 0:
the pod needs no file the image grants to group 0 only (its Python packages are world-readable,
`chmod -R g+rwX,a+rX /opt/uv`), and every path it writes is an `emptyDir`.
"""

VLLM_UID_REASON = (
    "vLLM runs as UID 2000, the vllm user its image ships: PyTorch fails at import under a UID "
    "the image's passwd file does not list, so a UID of 10000 or more cannot be used"
)
"""Why the vLLM containers run below UID 10000 (checkov CKV_K8S_40; see :data:`VLLM_UID`)."""

EFA_ROOT_REASON = (
    "an EFA engine runs as root to hold IPC_LOCK, which it needs to pin the buffers it transfers "
    "over RDMA; Kubernetes gives a non-root container's added capabilities no effect"
)
"""Why an EFA engine runs as root (checkov CKV_K8S_23; see :func:`efa_engine_security`)."""

NONROOT_UID = 65532
"""UID/GID of the distroless `nonroot` user: the router's Envoy and endpoint-picker images and the
prefill/decode sidecar run as it (`gcr.io/distroless/static:nonroot` in
kubernetes-sigs/gateway-api-inference-extension `Dockerfile`; `USER 65532:65532` in
llm-d/llm-d-router `Dockerfile.sidecar`; `gcr.io/distroless/base-nossl-*:nonroot` in
envoyproxy/envoy `ci/Dockerfile-envoy`, stage `envoy-distroless`)."""

RUNTIME_DEFAULT_SECCOMP = {"type": "RuntimeDefault"}

EFA_CAPABILITY = "IPC_LOCK"
"""The one capability an EFA engine keeps: it registers (pins) the memory it sends from and
receives into, which the kernel bounds by RLIMIT_MEMLOCK unless the process holds CAP_IPC_LOCK."""


def container_security(*, run_as_user: int | None = None) -> dict[str, Any]:
    """The `restricted` container securityContext every gpufarm container starts from.

    No privilege escalation, every capability dropped (NET_RAW included), non-root, read-only root
    file system (writable paths are `emptyDir` volumes), RuntimeDefault seccomp. `run_as_user`
    pins the container's UID and GID where it differs from the pod's (an image with its own user).
    Default: the pod's user.
    """
    security: dict[str, Any] = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP),
    }
    if run_as_user is not None:
        if run_as_user == 0:
            raise ValueError("'run_as_user' must not be 0 (root) in a restricted container")
        security["runAsUser"] = run_as_user
        security["runAsGroup"] = run_as_user
    return security


def efa_engine_security() -> dict[str, Any]:
    """The securityContext of an engine that sends its KV cache or activations over EFA.

    Everything of :func:`container_security` but two fields: it adds IPC_LOCK (EFA registers
    the buffers it transfers), and it runs as root, because Kubernetes gives a non-root
    container's added capabilities no effect: they are not raised into its ambient set, so the
    process's permitted and effective sets are empty after exec (kubernetes/kubernetes#56374;
    ambient capabilities are still an open proposal, kubernetes/enhancements#2763). Neither
    `restricted` nor `baseline` admits IPC_LOCK (`baseline` allows only the runtime's default
    set), so a namespace with such pods enforces `privileged` (:func:`level_for`).
    """
    security = container_security()
    security["capabilities"] = {"drop": ["ALL"], "add": [EFA_CAPABILITY]}
    security["runAsNonRoot"] = False
    security["runAsUser"] = 0
    security["runAsGroup"] = 0
    return security


def pod_security(uid: int, *, fs_group: bool = True) -> dict[str, Any]:
    """The pod securityContext: every container runs as `uid`:`uid` under RuntimeDefault seccomp.

    `fs_group` (default true) makes the pod's volumes group-owned by `uid`, so an `emptyDir`
    written by an init container is readable by the others. Pods that mount model weights pass
    false: their `emptyDir`s are world-writable already, and an `fsGroup` would have the kubelet
    change the group of every file of a volume whose CSI driver asks it to, a walk of the whole
    model store at every pod start.
    """
    if uid == 0:
        raise ValueError("'uid' must not be 0 (root): pods run as a non-root user")
    security: dict[str, Any] = {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP),
    }
    if fs_group:
        security["fsGroup"] = uid
    return security


def level_for(*, efa_engines: bool) -> PodSecurityLevel:
    """The strictest profile a serving namespace's pods pass.

    `restricted` unless some engine sends over EFA: IPC_LOCK is outside `baseline`'s list as
    well, so such a namespace can only enforce `privileged` (and audits and warns at
    `restricted`, see :func:`namespace_labels`).
    """
    return PodSecurityLevel.PRIVILEGED if efa_engines else PodSecurityLevel.RESTRICTED


def namespace_labels(level: PodSecurityLevel, *, version: str = "latest") -> dict[str, str]:
    """Pod Security Admission labels: enforce `level` at `version`, audit and warn at `restricted`.

    Audit and warn stay at `restricted` whatever the enforced level, so a pod that falls short of
    it is reported (an audit annotation and a warning to the client that applies it) even where
    the namespace has to admit it. `version` pins the rules of one Kubernetes minor release
    (`v1.35`) so an upgrade cannot reject running workloads; default `latest`.
    """
    labels = {
        f"{PSA_LABEL_PREFIX}/enforce": level.value,
        f"{PSA_LABEL_PREFIX}/enforce-version": version,
    }
    for mode in ("audit", "warn"):
        labels[f"{PSA_LABEL_PREFIX}/{mode}"] = PodSecurityLevel.RESTRICTED.value
        labels[f"{PSA_LABEL_PREFIX}/{mode}-version"] = version
    return labels


def psa_version(kubernetes_version: str | None) -> str:
    """The `*-version` label value for a cluster version: `'1.35'` -> `'v1.35'`; None -> `'latest'`."""
    return "latest" if kubernetes_version is None else f"v{kubernetes_version}"


def emptydir(name: str, *, size_limit: str | None = None, memory: bool = False) -> dict[str, Any]:
    """An `emptyDir` volume, optionally memory-backed and size-limited."""
    spec: dict[str, Any] = {}
    if memory:
        spec["medium"] = "Memory"
    if size_limit is not None:
        spec["sizeLimit"] = size_limit
    return {"name": name, "emptyDir": spec}
