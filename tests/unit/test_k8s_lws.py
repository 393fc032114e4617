"""Multi-node manifests: the LeaderWorkerSet, its leader-only Service and the LWS controller's values."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpufarm.config import ModelConfig, ServingConfig
from gpufarm.config.model import ModelAutoscalingConfig, TargetOptimizerConfig
from gpufarm.k8s.labels import model_selector
from gpufarm.k8s.lws import (
    EFA_RESOURCE,
    GROUP_KEY_LABEL,
    LEADER_SCRIPT,
    LWS_CHART,
    LWS_CHART_VERSION,
    LWS_CONTROLLER_IMAGE,
    LWS_REPOSITORY,
    RAY_OBJECT_STORE_GIB,
    RAY_PORT,
    SERVICE_ACCOUNT,
    WAIT_FOR_LEADER,
    WORKER_INDEX_LABEL,
    WORKER_SCRIPT,
    leader_service_name,
    lws_controller_values,
    multinode_service_account,
    vllm_leader_worker_set,
    vllm_multinode_service,
)
from gpufarm.k8s.serving import AGENT_CONTAINER, vllm_args, vllm_probes

from .k8s_schema import REPO_ROOT, validate_core, validate_crd

REGION = "us-east-1"
LWS_CRD = "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
SELECTOR = {"gpufarm.io/capacity-class": "h100"}
SERVING = ServingConfig(namespace="inference", port=8000)
FSX_CLAIM = "fsx-models"
FSX_SUB_PATH = "models/meta-llama/Llama-3.1-405B-Instruct-FP8"
BIG = ModelConfig(
    name="llama-405b",
    weights="s3://models/meta-llama/Llama-3.1-405B-Instruct-FP8/",
    gpus=8,
    pipeline_parallel=2,
    replicas=2,
    max_num_seqs=64,
    cpu=64,
    memory_gib=900,
    startup_timeout_seconds=3600,
    extra_args=["--enable-prefix-caching"],
)
GATED = ModelConfig(
    name="deepseek",
    weights="deepseek-ai/DeepSeek-V3",
    hf_token_secret="gated/hf-token",
    gpus=8,
    pipeline_parallel=4,
)
OPTIMIZER = TargetOptimizerConfig(enabled=True, data_port=9090, control_port=3000)
LWS_ENV = ("LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX")


def flag(args: list[str], name: str) -> str | None:
    """The value after `name` in an argument list (None when the flag is absent)."""
    if name not in args:
        return None
    assert args.count(name) == 1, f"{name} given {args.count(name)} times"
    return args[args.index(name) + 1]


def build(model: ModelConfig = BIG, **kwargs: Any) -> dict[str, Any]:
    return vllm_leader_worker_set(model, SERVING, node_selector=SELECTOR, region=REGION, **kwargs)


def template(lws: dict[str, Any], role: str) -> dict[str, Any]:
    found: dict[str, Any] = lws["spec"]["leaderWorkerTemplate"][f"{role}Template"]
    return found


def container(lws: dict[str, Any], role: str) -> dict[str, Any]:
    [vllm] = template(lws, role)["spec"]["containers"]
    assert vllm["name"] == "vllm"
    found: dict[str, Any] = vllm
    return found


def env_of(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}


ROLES = ("leader", "worker")


@pytest.fixture(scope="module")
def plain() -> dict[str, Any]:
    """An S3 model on its Mountpoint claim, two groups of two nodes, no EFA."""
    return build()


@pytest.fixture(scope="module")
def full() -> dict[str, Any]:
    """The same model from FSx, with EFA (4 interfaces) and the Target Optimizer."""
    return build(
        fsx_claim=FSX_CLAIM, fsx_sub_path=FSX_SUB_PATH, efa=True, efa_devices=4, target_optimizer=OPTIMIZER
    )


@pytest.fixture(scope="module")
def gated() -> dict[str, Any]:
    """A gated Hugging Face model over four nodes."""
    return build(GATED)


# --------------------------------------------------------------------------- schemas


@pytest.mark.parametrize("variant", ["plain", "full", "gated"])
def test_leader_worker_set_matches_the_lws_crd(variant: str, request: pytest.FixtureRequest) -> None:
    validate_crd(request.getfixturevalue(variant), LWS_CRD, "v1")


@pytest.mark.parametrize("variant", ["plain", "full", "gated"])
@pytest.mark.parametrize("role", ROLES)
def test_pod_templates_are_valid_pods(variant: str, role: str, request: pytest.FixtureRequest) -> None:
    tpl = template(request.getfixturevalue(variant), role)
    validate_core(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **tpl["metadata"]}, "spec": tpl["spec"]}
    )


def test_service_and_service_account_are_valid_core_kinds() -> None:
    validate_core(vllm_multinode_service(BIG, SERVING))
    validate_core(vllm_multinode_service(BIG, SERVING, target_optimizer=OPTIMIZER))
    validate_core(multinode_service_account("inference"))


# --------------------------------------------------------------------------- shape of a group


def test_identity_replicas_and_group_size(plain: dict[str, Any]) -> None:
    assert (plain["apiVersion"], plain["kind"]) == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    assert plain["metadata"]["name"] == "vllm-llama-405b"
    assert plain["metadata"]["namespace"] == "inference"
    assert plain["spec"]["replicas"] == BIG.replicas == 2
    assert plain["spec"]["leaderWorkerTemplate"]["size"] == BIG.pipeline_parallel == 2


def test_group_size_follows_pipeline_parallel(gated: dict[str, Any]) -> None:
    assert gated["spec"]["leaderWorkerTemplate"]["size"] == 4
    assert gated["spec"]["replicas"] == 1


def test_parallelism_flags_agree_with_the_group(plain: dict[str, Any], gated: dict[str, Any]) -> None:
    for lws, model in ((plain, BIG), (gated, GATED)):
        args = container(lws, "leader")["args"]
        size = lws["spec"]["leaderWorkerTemplate"]["size"]
        assert flag(args, "--tensor-parallel-size") == str(model.gpus)
        assert flag(args, "--pipeline-parallel-size") == str(size)
        assert flag(args, "--distributed-executor-backend") == "ray"
        for role in ROLES:
            resources = container(lws, role)["resources"]
            assert resources["requests"]["nvidia.com/gpu"] == str(model.gpus)
            assert resources["limits"]["nvidia.com/gpu"] == str(model.gpus)


def test_leader_args_are_the_single_node_flags_plus_pipeline_then_extra_args(plain: dict[str, Any]) -> None:
    args = container(plain, "leader")["args"]
    single = vllm_args(BIG, SERVING)
    assert args[: len(single) - 1] == single[:-1]
    assert args[-1] == "--enable-prefix-caching"


def test_group_restarts_together_and_workers_start_with_the_leader(plain: dict[str, Any]) -> None:
    assert plain["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    # LeaderReady would wait for a leader that is ready only once the workers have joined.
    assert plain["spec"]["startupPolicy"] == "LeaderCreated"


def test_rollout_replaces_one_group_at_a_time_in_place(plain: dict[str, Any]) -> None:
    # A surge would need several whole GPU nodes spare; on reserved capacity it never schedules.
    assert plain["spec"]["rolloutStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1},
    }


def test_one_shared_headless_service_and_no_hand_set_hostnames(plain: dict[str, Any]) -> None:
    assert plain["spec"]["networkConfig"] == {"subdomainPolicy": "Shared"}
    for role in ROLES:
        spec = template(plain, role)["spec"]
        assert "subdomain" not in spec and "hostname" not in spec


# --------------------------------------------------------------------------- placement


@pytest.mark.parametrize("role", ROLES)
def test_every_pod_lands_on_the_given_nodes_and_tolerates_the_gpu_taint(
    plain: dict[str, Any], role: str
) -> None:
    spec = template(plain, role)["spec"]
    assert spec["nodeSelector"] == SELECTOR
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


@pytest.mark.parametrize("role", ROLES)
def test_a_group_stays_in_one_zone(plain: dict[str, Any], role: str) -> None:
    [term] = template(plain, role)["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term == {
        "labelSelector": {"matchLabels": model_selector("llama-405b")},
        "matchLabelKeys": [GROUP_KEY_LABEL],
        "topologyKey": "topology.kubernetes.io/zone",
    }


@pytest.mark.parametrize("role", ROLES)
def test_pods_are_not_disrupted_voluntarily(plain: dict[str, Any], role: str) -> None:
    assert template(plain, role)["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"


@pytest.mark.parametrize("role", ROLES)
def test_pods_carry_the_model_labels(plain: dict[str, Any], role: str) -> None:
    labels = template(plain, role)["metadata"]["labels"]
    assert model_selector("llama-405b").items() <= labels.items()


# --------------------------------------------------------------------------- leader and workers


def test_only_the_leader_serves_http_and_is_probed(plain: dict[str, Any]) -> None:
    leader, worker = container(plain, "leader"), container(plain, "worker")
    assert {"name": "http", "containerPort": 8000, "protocol": "TCP"} in leader["ports"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert leader[probe]["httpGet"] == {"path": "/health", "port": "http"}
        assert probe not in worker
        # The leader's vLLM tells loading, serving and a dead engine apart as a single pod's does.
        assert leader[probe] == vllm_probes(BIG)[probe]
    # No port named http: the metrics scraper and the Service find leaders only.
    assert "ports" not in worker


def test_leader_startup_allows_the_model_startup_timeout(plain: dict[str, Any]) -> None:
    probe = container(plain, "leader")["startupProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] >= BIG.startup_timeout_seconds
    assert env_of(container(plain, "leader"))["RAY_CLUSTER_TIMEOUT_SECONDS"] == "3600"


def test_leader_starts_the_ray_head_then_vllm(plain: dict[str, Any]) -> None:
    command = container(plain, "leader")["command"]
    assert command == ["/bin/sh", "-c", LEADER_SCRIPT, "vllm-leader"]
    assert f"ray start --head --port={RAY_PORT}" in LEADER_SCRIPT
    assert LEADER_SCRIPT.rstrip().endswith('exec vllm serve "$@"')


def test_leader_wait_loop_is_valid_python() -> None:
    code = LEADER_SCRIPT.split("python3 -c '", 1)[1].split("'; do", 1)[0]
    compile(code, "leader-wait", "exec")
    compile(WAIT_FOR_LEADER, "worker-prestop", "exec")


def test_workers_join_the_leaders_ray_cluster(plain: dict[str, Any]) -> None:
    worker = container(plain, "worker")
    assert worker["command"] == ["/bin/sh", "-c", WORKER_SCRIPT, "vllm-worker"]
    assert "args" not in worker
    assert f'ray start --address="$LWS_LEADER_ADDRESS:{RAY_PORT}"' in WORKER_SCRIPT
    assert "--block" in WORKER_SCRIPT


@pytest.mark.parametrize("role", ROLES)
def test_scripts_hold_no_reference_the_kubelet_would_expand(full: dict[str, Any], role: str) -> None:
    c = container(full, role)
    text = " ".join([*c["command"], *c.get("args", [])])
    for name in [*env_of(c), *LWS_ENV]:
        assert f"$({name})" not in text
    assert "$$" not in text


@pytest.mark.parametrize("role", ROLES)
def test_pods_advertise_their_own_address_and_bootstrap_nccl_on_eth0(
    plain: dict[str, Any], role: str
) -> None:
    env = env_of(container(plain, role))
    assert env["VLLM_HOST_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert env["GLOO_SOCKET_IFNAME"] == "eth0"


@pytest.mark.parametrize("role", ROLES)
def test_shared_memory_holds_the_ray_object_store(plain: dict[str, Any], role: str) -> None:
    spec = template(plain, role)["spec"]
    [dshm] = [v for v in spec["volumes"] if v["name"] == "dshm"]
    assert dshm["emptyDir"]["medium"] == "Memory"
    assert int(dshm["emptyDir"]["sizeLimit"].removesuffix("Gi")) > RAY_OBJECT_STORE_GIB
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container(plain, role)["volumeMounts"]
    assert env_of(container(plain, role))["RAY_OBJECT_STORE_BYTES"] == str(RAY_OBJECT_STORE_GIB * 1024**3)


def test_workers_outlive_the_leaders_drain(plain: dict[str, Any]) -> None:
    leader_grace = template(plain, "leader")["spec"]["terminationGracePeriodSeconds"]
    worker_grace = template(plain, "worker")["spec"]["terminationGracePeriodSeconds"]
    assert leader_grace == 300 + 15
    assert worker_grace > leader_grace
    hook = container(plain, "worker")["lifecycle"]["preStop"]["exec"]["command"]
    assert hook == ["python3", "-c", WAIT_FOR_LEADER, "8000"]


# --------------------------------------------------------------------------- EFA


@pytest.mark.parametrize("role", ROLES)
def test_efa_interfaces_are_requested_with_libfabric_settings(full: dict[str, Any], role: str) -> None:
    c = container(full, role)
    assert c["resources"]["requests"][EFA_RESOURCE] == "4"
    assert c["resources"]["limits"][EFA_RESOURCE] == "4"
    env = env_of(c)
    assert (env["FI_PROVIDER"], env["FI_EFA_USE_DEVICE_RDMA"]) == ("efa", "1")
    # IPC_LOCK is the one capability kept, and it takes effect only for root.
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK"]}
    assert (c["securityContext"]["runAsUser"], c["securityContext"]["runAsNonRoot"]) == (0, False)
    tolerations = template(full, role)["spec"]["tolerations"]
    assert {"key": EFA_RESOURCE, "operator": "Exists", "effect": "NoSchedule"} in tolerations


@pytest.mark.parametrize("role", ROLES)
def test_without_efa_nothing_of_it_is_set(plain: dict[str, Any], role: str) -> None:
    c = container(plain, role)
    assert EFA_RESOURCE not in c["resources"]["requests"]
    assert not {"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA"} & set(env_of(c))
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "runAsUser" not in c["securityContext"]  # the pod's non-root user


# --------------------------------------------------------------------------- weights


@pytest.mark.parametrize("role", ROLES)
def test_every_pod_mounts_the_fsx_folder_of_the_model(full: dict[str, Any], role: str) -> None:
    spec = template(full, role)["spec"]
    [weights] = [v for v in spec["volumes"] if v["name"] == "weights"]
    assert weights["persistentVolumeClaim"] == {"claimName": FSX_CLAIM, "readOnly": True}
    [mount] = [m for m in container(full, role)["volumeMounts"] if m["name"] == "weights"]
    assert mount == {
        "name": "weights",
        "mountPath": "/models/llama-405b",
        "readOnly": True,
        "subPath": FSX_SUB_PATH,
    }
    assert flag(container(full, "leader")["args"], "--served-model-name") == "llama-405b"
    assert container(full, "leader")["args"][0] == "/models/llama-405b"


@pytest.mark.parametrize("role", ROLES)
def test_without_fsx_every_pod_mounts_the_models_mountpoint_claim(plain: dict[str, Any], role: str) -> None:
    [weights] = [v for v in template(plain, role)["spec"]["volumes"] if v["name"] == "weights"]
    assert weights["persistentVolumeClaim"] == {"claimName": "weights-llama-405b", "readOnly": True}


@pytest.mark.parametrize("role", ROLES)
def test_gated_weights_are_downloaded_by_every_pod_with_the_token(gated: dict[str, Any], role: str) -> None:
    spec = template(gated, role)["spec"]
    assert spec["serviceAccountName"] == SERVICE_ACCOUNT
    [init] = spec["initContainers"]
    assert init["name"] == "hf-token"
    assert {"name": "SECRET_ID", "value": "gated/hf-token"} in init["env"]
    assert env_of(container(gated, role))["HF_TOKEN_PATH"] == "/var/run/gpufarm/hf/token"
    assert not [v for v in spec["volumes"] if v["name"] == "weights"]


@pytest.mark.parametrize("role", ROLES)
def test_without_a_token_no_service_account_token_is_mounted(plain: dict[str, Any], role: str) -> None:
    spec = template(plain, role)["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in spec and "initContainers" not in spec


# --------------------------------------------------------------------------- Target Optimizer


def test_target_optimizer_agent_runs_on_the_leader_only(full: dict[str, Any]) -> None:
    [agent] = template(full, "leader")["spec"]["initContainers"]
    assert agent["name"] == AGENT_CONTAINER
    assert agent["restartPolicy"] == "Always"
    assert "initContainers" not in template(full, "worker")["spec"]


# --------------------------------------------------------------------------- the leader Service


def test_service_selects_only_the_leaders_of_the_model() -> None:
    service = vllm_multinode_service(BIG, SERVING)
    assert service["metadata"]["name"] == leader_service_name("llama-405b") == "vllm-llama-405b-leader"
    assert service["spec"]["selector"] == {**model_selector("llama-405b"), WORKER_INDEX_LABEL: "0"}
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}
    ]


def test_service_selector_matches_the_leader_template_and_not_the_workers(plain: dict[str, Any]) -> None:
    selector = vllm_multinode_service(BIG, SERVING)["spec"]["selector"]
    leader = {**template(plain, "leader")["metadata"]["labels"], WORKER_INDEX_LABEL: "0"}
    worker = {**template(plain, "worker")["metadata"]["labels"], WORKER_INDEX_LABEL: "1"}
    assert selector.items() <= leader.items()
    assert not selector.items() <= worker.items()


def test_service_is_not_the_name_lws_takes_for_its_headless_service(plain: dict[str, Any]) -> None:
    assert vllm_multinode_service(BIG, SERVING)["metadata"]["name"] != plain["metadata"]["name"]


def test_service_exposes_the_agent_data_port_with_the_target_optimizer() -> None:
    ports = vllm_multinode_service(BIG, SERVING, target_optimizer=OPTIMIZER)["spec"]["ports"]
    assert [p["name"] for p in ports] == ["http", "data"]
    assert ports[1] == {"name": "data", "port": 9090, "targetPort": 9090, "protocol": "TCP"}


# --------------------------------------------------------------------------- controller values


def test_controller_values_pin_the_image_to_the_chart_release() -> None:
    assert lws_controller_values() == {
        "replicaCount": 2,
        "image": {
            "manager": {
                "repository": "registry.k8s.io/lws/lws",
                "tag": f"v{LWS_CHART_VERSION}",
                "pullPolicy": "IfNotPresent",
            }
        },
    }
    assert lws_controller_values("0.9.0")["image"]["manager"]["tag"] == "v0.9.0"


# --------------------------------------------------------------------------- the pinned release

UPSTREAM_REF = REPO_ROOT.parent / "shared" / "upstream-ref"
"""Facts from the upstream releases gpufarm pins; present on the team's machines, absent elsewhere."""


def _upstream(name: str) -> dict[str, Any]:
    if not UPSTREAM_REF.is_dir():
        pytest.skip(f"{UPSTREAM_REF} is not here")
    path = UPSTREAM_REF / name
    assert path.is_file(), f"no upstream data for {name}: the pin names a release nobody has confirmed"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _keys(tree: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for key, value in tree.items():
        out.add(prefix + key)
        if isinstance(value, dict) and value:
            out |= _keys(value, f"{prefix}{key}.")
    return out


def test_the_pinned_lws_chart_is_a_published_release() -> None:
    chart = _upstream(f"charts/{LWS_CHART}@{LWS_CHART_VERSION}.json")
    assert (chart["chart"], chart["repository"], chart["version"]) == (
        LWS_CHART,
        LWS_REPOSITORY,
        LWS_CHART_VERSION,
    )


def test_the_controller_image_is_the_release_of_the_pinned_chart() -> None:
    chart = _upstream(f"charts/{LWS_CHART}@{LWS_CHART_VERSION}.json")
    manager = lws_controller_values()["image"]["manager"]
    assert (manager["repository"], manager["tag"]) == (LWS_CONTROLLER_IMAGE, chart["app_version"])
    assert _keys(lws_controller_values()) <= _keys(chart["values"])
    # A digest the tier supplies joins the release tag; the release stays the chart's.
    digest = "sha256:" + "f" * 64
    pinned = lws_controller_values(digests={"lws-controller": digest})["image"]["manager"]["tag"]
    assert pinned == f"{chart['app_version']}@{digest}"


def test_the_lws_labels_and_environment_are_those_of_the_pinned_release() -> None:
    labels = _upstream("labels.json")
    assert {WORKER_INDEX_LABEL, GROUP_KEY_LABEL} <= set(labels["keys"])
    assert set(LWS_ENV) == set(labels["lws_env"])


# --------------------------------------------------------------------------- the scripts, run


def _shims(tmp_path: Path, *, python_fails: int, ray_exit: int) -> dict[str, str]:
    """A PATH where `ray`, `vllm`, `python3` and `sleep` only record their calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    scripts = {
        "ray": f'echo "ray $*" >> {log}; exit {ray_exit}',
        "vllm": f'printf "vllm" >> {log}; for a in "$@"; do printf " <%s>" "$a" >> {log}; done; '
        f"echo >> {log}",
        "python3": (
            f"n=$(cat {tmp_path}/n 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {tmp_path}/n; "
            f'echo "python3" >> {log}; [ "$n" -gt {python_fails} ]'
        ),
        "sleep": "exit 0",
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "VLLM_HOST_IP": "10.0.0.5",
        "LWS_LEADER_ADDRESS": "vllm-x-0.vllm-x.inference",
        "LWS_GROUP_SIZE": "2",
        "RAY_OBJECT_STORE_BYTES": "4294967296",
        "RAY_CLUSTER_TIMEOUT_SECONDS": "15",
    }


def _run(script: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", "-c", script, "entry", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_leader_script_waits_for_the_group_then_runs_vllm_with_its_args(tmp_path: Path) -> None:
    env = _shims(tmp_path, python_fails=2, ray_exit=0)
    result = _run(LEADER_SCRIPT, env, "/models/x", "--served-model-name", "a b")
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == (
        "ray start --head --port=6379 --node-ip-address=10.0.0.5 "
        "--object-store-memory=4294967296 --include-dashboard=false"
    )
    assert calls[1:4] == ["python3"] * 3
    assert calls[4] == "vllm <serve> </models/x> <--served-model-name> <a b>"


def test_leader_script_gives_up_when_the_group_does_not_form(tmp_path: Path) -> None:
    env = _shims(tmp_path, python_fails=100, ray_exit=0)
    result = _run(LEADER_SCRIPT, env, "/models/x")
    assert result.returncode == 1
    assert "did not reach 2 nodes in 15 s" in result.stderr
    assert not [c for c in (tmp_path / "calls").read_text().splitlines() if c.startswith("vllm")]


def test_worker_script_retries_joining_then_gives_up(tmp_path: Path) -> None:
    env = _shims(tmp_path, python_fails=0, ray_exit=1)
    result = _run(WORKER_SCRIPT, env)
    assert result.returncode == 1
    calls = (tmp_path / "calls").read_text().splitlines()
    assert (
        calls
        == [
            "ray start --address=vllm-x-0.vllm-x.inference:6379 --node-ip-address=10.0.0.5 "
            "--object-store-memory=4294967296 --block"
        ]
        * 3
    )


def test_worker_prestop_waits_until_the_leader_stops_serving() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    env = {**os.environ, "LWS_LEADER_ADDRESS": "127.0.0.1"}
    hook = subprocess.Popen([sys.executable, "-c", WAIT_FOR_LEADER, str(port)], env=env)
    try:
        time.sleep(1)
        assert hook.poll() is None, "the hook returned while the leader still accepted connections"
        listener.close()
        assert hook.wait(timeout=10) == 0
    finally:
        hook.kill()
        listener.close()


# --------------------------------------------------------------------------- invalid input


@pytest.mark.parametrize(
    ("model", "kwargs", "message"),
    [
        (
            BIG.model_copy(update={"pipeline_parallel": 1}),
            {},
            "model 'llama-405b' must have pipeline_parallel of at least 2 to run as a LeaderWorkerSet "
            "(a single-node model is a Deployment), got 1",
        ),
        (
            BIG.model_copy(update={"gpus": 16}),
            {},
            "model 'llama-405b' must have gpus (per node: the tensor-parallel size) of 1, 2, 4, 8; "
            "pipeline_parallel counts the nodes, got 16",
        ),
        (
            BIG.model_copy(update={"autoscaling": ModelAutoscalingConfig()}),
            {},
            "model 'llama-405b' must not set autoscaling: LeaderWorkerSet groups have fixed replicas, "
            "got an autoscaling section",
        ),
        (
            BIG.model_copy(update={"extra_args": ["--pipeline-parallel-size=4"]}),
            {},
            "model 'llama-405b' must not set --pipeline-parallel-size in extra_args (pipeline_parallel "
            "and Ray set it), got ['--pipeline-parallel-size=4']",
        ),
        (
            BIG,
            {"node_selector": {}},
            "'node_selector' must name at least one node label for model 'llama-405b' (every pod of a "
            "group needs a GPU node of the model's class), got {}",
        ),
        (
            BIG,
            {"fsx_sub_path": FSX_SUB_PATH},
            f"'fsx_sub_path' needs 'fsx_claim' (the claim it is a path in), got {FSX_SUB_PATH!r}",
        ),
        (
            BIG,
            {"efa": True, "efa_devices": 0},
            "'efa_devices' must be at least 1 (EFA interfaces per pod), got 0",
        ),
    ],
    ids=[
        "single-node",
        "gpus-beyond-a-node",
        "autoscaling",
        "pipeline-in-extra-args",
        "no-selector",
        "sub-path-without-claim",
        "no-efa-devices",
    ],
)
def test_invalid_input_is_rejected_with_an_exact_message(
    model: ModelConfig, kwargs: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {"node_selector": SELECTOR, "region": REGION, **kwargs}
    with pytest.raises(ValueError) as excinfo:
        vllm_leader_worker_set(model, SERVING, **arguments)
    assert str(excinfo.value) == message
