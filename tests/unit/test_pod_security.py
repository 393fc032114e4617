"""Every pod gpufarm renders passes the Pod Security Standards profile its namespace claims.

The checker (tests/unit/pod_security.py) is tested first against one pod per rule, then every
pod-bearing builder is run through it, with the other least-privilege claims: read-only root
file systems, writable paths only on volumes, Kubernetes tokens only where the API is called.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from gpufarm.config import load_preset
from gpufarm.config.model import (
    ModelConfig,
    PrefillDecodeConfig,
    ServingConfig,
    TargetOptimizerConfig,
)
from gpufarm.k8s import gateway as gw
from gpufarm.k8s import kv_cache_routing, lws, security, serving
from gpufarm.k8s.security import PodSecurityLevel

from .pod_security import (
    BASELINE,
    PRIVILEGED,
    RESTRICTED,
    containers,
    pod_specs,
    strictest_level,
    violations,
)

REGION = "us-east-1"
SERVING = ServingConfig(namespace="inference")
OPTIMIZER = TargetOptimizerConfig(enabled=True)
EFA_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-efa:v0.31.0@sha256:" + "e" * 64
GATED = ModelConfig(
    name="gated",
    weights="meta-llama/Llama-3.1-8B-Instruct",
    hf_token_secret="gpufarm/hf-token",
)
PD_TCP = ModelConfig(
    name="llama-70b",
    weights="meta-llama/Llama-3.3-70B-Instruct",
    gpus=4,
    prefill_decode=PrefillDecodeConfig(prefill_replicas=2),
)
PD_EFA = ModelConfig(
    name="llama-70b",
    weights="meta-llama/Llama-3.3-70B-Instruct",
    gpus=4,
    prefill_decode=PrefillDecodeConfig(prefill_replicas=2, kv_transport="efa", efa_image=EFA_IMAGE),
)
MULTI = ModelConfig(
    name="llama-405b",
    weights="s3://models/meta-llama/Llama-3.1-405B-Instruct-FP8/",
    gpus=8,
    pipeline_parallel=2,
    hf_token_secret=None,
)
MULTI_GATED = ModelConfig(
    name="deepseek",
    weights="deepseek-ai/DeepSeek-V3",
    gpus=8,
    pipeline_parallel=2,
    hf_token_secret="gpufarm/hf-token",
)


def _deployment(model: ModelConfig, **kwargs: Any) -> list[dict[str, Any]]:
    return [serving.vllm_deployment(model, SERVING, pool_name="gpu", region=REGION, **kwargs)]


def _lws(model: ModelConfig, **kwargs: Any) -> list[dict[str, Any]]:
    selector = {"gpufarm.io/capacity-class": "h100"}
    return [lws.vllm_leader_worker_set(model, SERVING, node_selector=selector, region=REGION, **kwargs)]


def _gateway(master_key: str | None) -> list[dict[str, Any]]:
    tier = load_preset("poc")
    config = gw.litellm_config(tier)
    return gw.gateway_manifests(
        tier, config=config, namespace="gpufarm", region=REGION, master_key_secret_arn=master_key
    )


def _router(**kwargs: Any) -> list[dict[str, Any]]:
    return kv_cache_routing.router_manifests(
        model_name="llama-70b", namespace="gpufarm", target_port=8000, **kwargs
    )


RESTRICTED_BUILDS: dict[str, Callable[[], list[dict[str, Any]]]] = {
    "vllm": lambda: _deployment(load_preset("poc").models[0]),
    "vllm-gated": lambda: _deployment(GATED),
    "vllm-target-optimizer": lambda: _deployment(GATED, target_optimizer=OPTIMIZER),
    "vllm-decode-tcp": lambda: _deployment(PD_TCP, prefill_decode_role="decode"),
    "vllm-prefill-tcp": lambda: _deployment(PD_TCP, prefill_decode_role="prefill"),
    "lws": lambda: _lws(MULTI),
    "lws-gated-target-optimizer": lambda: _lws(MULTI_GATED, target_optimizer=OPTIMIZER),
    "gateway": lambda: _gateway(None),
    "gateway-master-key": lambda: _gateway("gpufarm/litellm-master-key"),
    "router-kv": lambda: _router(),
    "router-pd": lambda: _router(prefill_decode=PD_TCP.prefill_decode),
}
"""Every pod-bearing builder in the variants that change its pods, except EFA engines."""

EFA_BUILDS: dict[str, Callable[[], list[dict[str, Any]]]] = {
    "vllm-decode-efa": lambda: _deployment(PD_EFA, prefill_decode_role="decode", efa_devices=16),
    "vllm-prefill-efa": lambda: _deployment(PD_EFA, prefill_decode_role="prefill", efa_devices=16),
    "lws-efa": lambda: _lws(MULTI, efa=True, efa_devices=4),
}


def _pods(builds: dict[str, Callable[[], list[dict[str, Any]]]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{key}:{name}", spec)
        for key, build in builds.items()
        for m in build()
        for name, spec in pod_specs(m)
    ]


ALL_PODS = _pods(RESTRICTED_BUILDS) + _pods(EFA_BUILDS)


def _ids(pods: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [name for name, _ in pods]


# --------------------------------------------------------------------------- the checker


def restricted_pod() -> dict[str, Any]:
    """A pod that passes `restricted` (the documented minimum)."""
    return {
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {
                "name": "app",
                "image": "example",
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }
        ],
        "volumes": [{"name": "scratch", "emptyDir": {}}],
    }


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change to a pod spec: set `value` at a dotted path (`containers.0.securityContext.x`)."""

    def change(spec: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = spec
        for key in parents:
            node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
        node[last] = value

    return change


BASELINE_BREAKS = [
    ("hostNetwork", True, "hostNetwork=true"),
    ("containers.0.securityContext.privileged", True, "container 'app' is privileged"),
    (
        "containers.0.securityContext.capabilities",
        {"drop": ["ALL"], "add": ["IPC_LOCK"]},
        "container 'app' adds non-default capabilities ['IPC_LOCK']",
    ),
    ("volumes", [{"name": "host", "hostPath": {"path": "/"}}], "volume 'host' is a hostPath"),
    ("containers.0.ports", [{"containerPort": 80, "hostPort": 80}], "container 'app' uses hostPort 80"),
    ("containers.0.securityContext.procMount", "Unmasked", "container 'app' sets procMount 'Unmasked'"),
    ("securityContext.seccompProfile", {"type": "Unconfined"}, "pod sets seccompProfile Unconfined"),
    (
        "securityContext.sysctls",
        [{"name": "kernel.msgmax", "value": "1"}],
        "pod sets unsafe sysctl 'kernel.msgmax'",
    ),
    ("securityContext.seLinuxOptions", {"user": "root"}, "pod sets seLinuxOptions {'user': 'root'}"),
]
"""Changes that `baseline` rejects (so `restricted` does too), with the checker's message."""

RESTRICTED_BREAKS = [
    (
        "volumes",
        [{"name": "nfs", "nfs": {"server": "x", "path": "/"}}],
        "volume 'nfs' has restricted type ['nfs']",
    ),
    (
        "containers.0.securityContext.allowPrivilegeEscalation",
        True,
        "container 'app' must set allowPrivilegeEscalation=false",
    ),
    ("securityContext.runAsNonRoot", False, "pod sets runAsNonRoot=false"),
    ("containers.0.securityContext.runAsUser", 0, "container 'app' sets runAsUser=0"),
    ("securityContext.runAsUser", 0, "pod sets runAsUser=0"),
    (
        "containers.0.securityContext.capabilities",
        {"drop": ["NET_RAW"]},
        "container 'app' must drop ALL capabilities",
    ),
    (
        "containers.0.securityContext.capabilities",
        {"drop": ["ALL"], "add": ["CHOWN"]},
        "container 'app' must not add ['CHOWN']",
    ),
]
"""Changes that `baseline` admits and `restricted` rejects, with the checker's message."""


def test_the_documented_minimum_passes_restricted() -> None:
    assert violations(restricted_pod(), RESTRICTED) == []
    assert strictest_level(restricted_pod()) == RESTRICTED


@pytest.mark.parametrize(("path", "value", "message"), BASELINE_BREAKS)
def test_baseline_rejects(path: str, value: Any, message: str) -> None:
    spec = restricted_pod()
    _set(path, value)(spec)
    assert violations(spec, BASELINE) == [message]
    assert message in violations(spec, RESTRICTED)
    assert strictest_level(spec) == PRIVILEGED


@pytest.mark.parametrize(("path", "value", "message"), RESTRICTED_BREAKS)
def test_restricted_rejects(path: str, value: Any, message: str) -> None:
    spec = restricted_pod()
    _set(path, value)(spec)
    assert violations(spec, RESTRICTED) == [message]
    assert violations(spec, BASELINE) == []
    assert strictest_level(spec) == BASELINE


def test_non_root_and_seccomp_may_be_set_per_container_instead() -> None:
    spec = restricted_pod()
    del spec["securityContext"]
    assert violations(spec, RESTRICTED) == [
        "pod or container 'app' must set runAsNonRoot=true",
        "pod or container 'app' must set seccompProfile RuntimeDefault or Localhost",
    ]
    spec["containers"][0]["securityContext"].update(
        {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    )
    assert violations(spec, RESTRICTED) == []


def test_init_containers_are_checked_too() -> None:
    spec = restricted_pod()
    spec["initContainers"] = [{"name": "init", "image": "example"}]
    assert violations(spec, RESTRICTED) == [
        "container 'init' must set allowPrivilegeEscalation=false",
        "container 'init' must drop ALL capabilities",
    ]


def test_restricted_allows_persistent_claims_csi_and_projected_volumes() -> None:
    spec = restricted_pod()
    spec["volumes"] = [
        {"name": "claim", "persistentVolumeClaim": {"claimName": "weights"}},
        {"name": "inline", "csi": {"driver": "s3.csi.aws.com"}},
        {"name": "token", "projected": {"sources": []}},
    ]
    assert violations(spec, RESTRICTED) == []


# --------------------------------------------------------------------------- security helpers


def test_container_security_is_the_restricted_minimum_on_a_read_only_root() -> None:
    assert security.container_security() == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert security.container_security(run_as_user=65532)["runAsUser"] == 65532
    assert security.container_security(run_as_user=65532)["runAsGroup"] == 65532


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: security.container_security(run_as_user=0),
            "'run_as_user' must not be 0 (root) in a restricted container",
        ),
        (lambda: security.pod_security(0), "'uid' must not be 0 (root): pods run as a non-root user"),
    ],
)
def test_root_is_refused(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError) as error:
        call()
    assert str(error.value) == message


def test_pod_security_names_the_user_group_and_volume_group() -> None:
    assert security.pod_security(2000) == {
        "runAsNonRoot": True,
        "runAsUser": 2000,
        "runAsGroup": 2000,
        "seccompProfile": {"type": "RuntimeDefault"},
        "fsGroup": 2000,
    }
    assert "fsGroup" not in security.pod_security(2000, fs_group=False)


def test_efa_engine_keeps_ipc_lock_as_root_and_nothing_else() -> None:
    ctx = security.efa_engine_security()
    assert ctx["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK"]}
    assert (ctx["runAsUser"], ctx["runAsGroup"], ctx["runAsNonRoot"]) == (0, 0, False)
    assert ctx["allowPrivilegeEscalation"] is False
    assert ctx["readOnlyRootFilesystem"] is True


def test_namespace_labels_enforce_the_level_and_always_audit_and_warn_restricted() -> None:
    assert security.namespace_labels(PodSecurityLevel.PRIVILEGED, version="v1.35") == {
        "pod-security.kubernetes.io/enforce": "privileged",
        "pod-security.kubernetes.io/enforce-version": "v1.35",
        "pod-security.kubernetes.io/audit": "restricted",
        "pod-security.kubernetes.io/audit-version": "v1.35",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/warn-version": "v1.35",
    }


def test_level_follows_efa_engines() -> None:
    assert security.level_for(efa_engines=False) is PodSecurityLevel.RESTRICTED
    assert security.level_for(efa_engines=True) is PodSecurityLevel.PRIVILEGED


def test_psa_version_pins_the_cluster_release() -> None:
    assert security.psa_version("1.35") == "v1.35"
    assert security.psa_version(None) == "latest"


def test_serving_namespace_carries_the_labels() -> None:
    labels = serving.namespace("gpufarm", pod_security_version="v1.35")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/enforce-version"] == "v1.35"
    efa = serving.namespace("gpufarm", pod_security=PodSecurityLevel.PRIVILEGED)["metadata"]["labels"]
    assert (efa["pod-security.kubernetes.io/enforce"], efa["pod-security.kubernetes.io/warn"]) == (
        "privileged",
        "restricted",
    )


# --------------------------------------------------------------------------- every builder


@pytest.mark.parametrize(("name", "spec"), _pods(RESTRICTED_BUILDS), ids=_ids(_pods(RESTRICTED_BUILDS)))
def test_pod_passes_restricted(name: str, spec: dict[str, Any]) -> None:
    assert violations(spec, RESTRICTED) == []


@pytest.mark.parametrize(("name", "spec"), _pods(EFA_BUILDS), ids=_ids(_pods(EFA_BUILDS)))
def test_efa_pod_falls_short_of_baseline_only_by_ipc_lock(name: str, spec: dict[str, Any]) -> None:
    assert violations(spec, BASELINE) == ["container 'vllm' adds non-default capabilities ['IPC_LOCK']"]
    without = copy.deepcopy(spec)
    for c in containers(without):
        if c["name"] == "vllm":
            c["securityContext"] = security.container_security()
    assert violations(without, RESTRICTED) == []


@pytest.mark.parametrize(("name", "spec"), ALL_PODS, ids=_ids(ALL_PODS))
def test_every_container_has_a_read_only_root_and_no_capabilities_but_the_one_need(
    name: str, spec: dict[str, Any]
) -> None:
    for c in containers(spec):
        ctx = c["securityContext"]
        assert ctx["readOnlyRootFilesystem"] is True, c["name"]
        assert ctx["capabilities"]["drop"] == ["ALL"], c["name"]
        assert ctx["capabilities"].get("add", []) in ([], ["IPC_LOCK"]), c["name"]


@pytest.mark.parametrize(("name", "spec"), ALL_PODS, ids=_ids(ALL_PODS))
def test_only_the_picker_gets_a_kubernetes_token(name: str, spec: dict[str, Any]) -> None:
    assert spec["automountServiceAccountToken"] is False
    holders = [
        c["name"]
        for c in containers(spec)
        for m in c.get("volumeMounts", [])
        if m["mountPath"] == kv_cache_routing.API_ACCESS_MOUNT
    ]
    assert holders == (["epp"] if name.startswith("router") else [])


def test_the_pickers_token_volume_is_the_standard_api_access_volume() -> None:
    [deployment] = [d for d in _router() if d["kind"] == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    [volume] = [v for v in spec["volumes"] if "projected" in v]
    sources = volume["projected"]["sources"]
    assert [next(iter(s)) for s in sources] == ["serviceAccountToken", "configMap", "downwardAPI"]
    assert sources[1]["configMap"]["name"] == "kube-root-ca.crt"
    [epp] = [c for c in spec["containers"] if c["name"] == "epp"]
    [mount] = [m for m in epp["volumeMounts"] if m["name"] == volume["name"]]
    assert (mount["mountPath"], mount["readOnly"]) == ("/var/run/secrets/kubernetes.io/serviceaccount", True)


@pytest.mark.parametrize(
    "account",
    [
        serving.service_account("gpufarm"),
        lws.multinode_service_account("gpufarm"),
        gw.service_account("gpufarm"),
    ],
    ids=["vllm", "multinode", "gateway"],
)
def test_service_accounts_of_pods_that_never_call_the_api_mount_no_token(account: dict[str, Any]) -> None:
    assert account["automountServiceAccountToken"] is False


def _vllm_pods() -> list[tuple[str, dict[str, Any]]]:
    return [(n, s) for n, s in ALL_PODS if n.startswith(("vllm", "lws"))]


def _writable(container: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """Mount paths of the container's writable emptyDir volumes."""
    empty = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
    return [m["mountPath"] for m in container["volumeMounts"] if m["name"] in empty and not m.get("readOnly")]


@pytest.mark.parametrize(("name", "spec"), _vllm_pods(), ids=_ids(_vllm_pods()))
def test_vllm_runs_as_the_images_user_and_writes_only_to_its_volumes(name: str, spec: dict[str, Any]) -> None:
    assert spec["securityContext"]["runAsUser"] == security.VLLM_UID == 2000
    [engine] = spec["containers"]
    env = {e["name"]: e.get("value") for e in engine["env"]}
    writable = _writable(engine, spec)
    assert {"/dev/shm", "/tmp", serving.VLLM_HOME, serving.HF_CACHE_DIR} <= set(writable)
    for variable in (
        "HOME",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "VLLM_CACHE_ROOT",
        "VLLM_CONFIG_ROOT",
        "TRITON_CACHE_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
        "HF_HOME",
    ):
        path = env[variable]
        assert any(path == w or path.startswith(w + "/") for w in writable), (variable, path)


@pytest.mark.parametrize(("name", "spec"), _vllm_pods(), ids=_ids(_vllm_pods()))
def test_shared_memory_stays_a_memory_volume(name: str, spec: dict[str, Any]) -> None:
    [shm] = [v for v in spec["volumes"] if v["name"] == "dshm"]
    assert shm["emptyDir"]["medium"] == "Memory"


def test_token_init_container_writes_only_to_its_volumes() -> None:
    [doc] = _deployment(GATED)
    spec = doc["spec"]["template"]["spec"]
    [init] = spec["initContainers"]
    env = {e["name"]: e["value"] for e in init["env"]}
    assert env["HOME"] in _writable(init, spec)
    assert serving.TOKEN_DIR in _writable(init, spec)
    assert "runAsUser" not in init["securityContext"]  # the pod's user, who reads the token


@pytest.mark.parametrize(
    ("build", "uid"),
    [(lambda: _router(), security.NONROOT_UID), (lambda: _gateway(None), gw.RUN_AS_USER)],
    ids=["router", "gateway"],
)
def test_cpu_pods_run_as_their_images_unprivileged_user(
    build: Callable[[], list[dict[str, Any]]], uid: int
) -> None:
    [deployment] = [d for d in build() if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == uid


def test_decode_sidecar_runs_as_its_images_user() -> None:
    [doc] = _deployment(PD_TCP, prefill_decode_role="decode")
    [sidecar] = [
        c for c in doc["spec"]["template"]["spec"]["initContainers"] if c["name"] == "routing-sidecar"
    ]
    assert sidecar["securityContext"]["runAsUser"] == security.NONROOT_UID
