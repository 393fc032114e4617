"""Multi-node vLLM: a LeaderWorkerSet per model, a leader-only Service, and the LWS controller's values.

A model whose `pipeline_parallel` is above 1 runs each replica as a group of `pipeline_parallel`
pods, one per node, each holding `gpus` GPUs. The group's leader (worker index 0) starts a Ray
head, waits until every pod of the group has joined, then runs `vllm serve` with tensor
parallelism inside a node (`--tensor-parallel-size gpus`) and pipeline parallelism across the
nodes (`--pipeline-parallel-size pipeline_parallel`) on Ray. The other pods only join the Ray
cluster. Only the leader serves HTTP, so the Service and the load balancer reach leaders only.

The LeaderWorkerSet controller injects `LWS_LEADER_ADDRESS` (the leader's DNS name),
`LWS_GROUP_SIZE` and `LWS_WORKER_INDEX` into every container, and creates a headless Service
named after the LeaderWorkerSet (`vllm-<model>`) for those DNS names. That Service resolves to
every pod of every group, workers included: clients use :func:`leader_service_name` instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpufarm import images
from gpufarm.config.model import TENSOR_PARALLEL_SIZES, ModelConfig, ServingConfig, TargetOptimizerConfig
from gpufarm.k8s.labels import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    GPU_TAINT_KEY,
    MODEL_LABEL,
    common_labels,
    model_selector,
    workload_name,
)
from gpufarm.k8s.labels import leader_service_name as leader_service_name  # re-exported (see labels.py)
from gpufarm.k8s.scan import scan_acknowledge
from gpufarm.k8s.security import (
    EFA_ROOT_REASON,
    VLLM_UID,
    VLLM_UID_REASON,
    container_security,
    efa_engine_security,
    pod_security,
)
from gpufarm.k8s.serving import (
    AGENT_DATA_PORT_NAME,
    GPU_POD_CPU_LIMIT_REASON,
    PRESTOP_SLEEP_SECONDS,
    TOKEN_DIR,
    acknowledge_unpinned_agent,
    engine_env,
    target_control_agent,
    token_init_container,
    vllm_args,
    vllm_probes,
    vllm_volumes,
)

LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_CHART = "lws"
LWS_REPOSITORY = "oci://registry.k8s.io/lws/charts/lws"
"""The controller's Helm chart as the LWS project publishes it (a whole OCI reference for `helm pull`)."""
LWS_CHART_VERSION = "0.10.0"
"""The pinned LWS release (chart version; the controller image is tagged `v<version>`).

v0.10.0 is the newest release whose publication could be confirmed: the LWS installation guide
(kubernetes-sigs/lws `site/content/en/docs/installation/_index.md`, https://lws.sigs.k8s.io/docs/installation/)
installs `oci://registry.k8s.io/lws/charts/lws --version=0.10.0`, the GitHub release
https://github.com/kubernetes-sigs/lws/releases/tag/v0.10.0 carries `manifests.yaml` and
`lws-chart-v0.10.0.tgz`, and the chart at that tag (kubernetes-sigs/lws@2161f38, `charts/lws`)
sets `appVersion: v0.10.0`. No 0.11.0 chart, CRD or `registry.k8s.io/lws/lws:v0.11.0` image
could be confirmed (see docs/decisions/0029-lws-release-and-crds.md)."""
LWS_CONTROLLER_IMAGE = images.image("lws-controller").repository
LWS_NAMESPACE = "lws-system"
LWS_CONTROLLER_REPLICAS = 2
"""Controller pods: one leads, the other keeps the pod webhook answering while it restarts."""

WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
"""Label LWS puts on every pod of a group: "0" on the leader, 1..size-1 on the workers."""
GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
"""Label LWS puts on every pod of a group: a hash unique to the group."""
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
"""Label LWS puts on every pod of a group: the group's index, "0".."replicas-1"
(`GroupIndexLabelKey`, kubernetes-sigs/lws@v0.10.0 api/leaderworkerset/v1/leaderworkerset_types.go)."""
LEADER_INDEX = "0"

SERVICE_ACCOUNT = "vllm-multinode"
"""Service account of multi-node pods that read a Hugging Face token (its own Pod Identity association)."""

POD_INTERFACE = "eth0"
"""The pod's network interface under the VPC CNI: NCCL and Gloo bootstrap over it (and carry the
traffic when no EFA transport is available)."""
ZONE_KEY = "topology.kubernetes.io/zone"

RAY_PORT = 6379
"""Port of the Ray head's GCS on the leader; workers join at `$LWS_LEADER_ADDRESS:6379`."""
RAY_CLIENT_PORT = 10001
"""Port of the Ray client server `ray start --head` also opens on the leader: the CLI's default for
`--ray-client-server-port` (https://docs.ray.io/en/latest/cluster/cli.html, `ray start`). Nothing in
gpufarm uses it; the NetworkPolicies keep it closed to everything outside the group."""
RAY_OBJECT_STORE_GIB = 4
"""Ray's object store per pod, GiB, held in /dev/shm. vLLM sends only control messages through it;
Ray's default (30% of the pod's memory) would not fit the memory-backed /dev/shm volume."""
RAY_JOIN_RETRY_SECONDS = 5
WORKER_GRACE_MARGIN_SECONDS = 30
"""Extra grace a worker gets over its leader, to notice that the leader has stopped serving."""

LEADER_SCRIPT = f"""\
set -e
ray start --head --port={RAY_PORT} --node-ip-address="$VLLM_HOST_IP" \\
  --object-store-memory="$RAY_OBJECT_STORE_BYTES" --include-dashboard=false
waited=0
until python3 -c 'import os, ray
ray.init(address="auto", logging_level="ERROR")
alive = sum(1 for node in ray.nodes() if node["Alive"])
raise SystemExit(alive < int(os.environ["LWS_GROUP_SIZE"]))'; do
  waited=$((waited + {RAY_JOIN_RETRY_SECONDS}))
  if [ "$waited" -ge "$RAY_CLUSTER_TIMEOUT_SECONDS" ]; then
    echo "the Ray cluster did not reach $LWS_GROUP_SIZE nodes in $RAY_CLUSTER_TIMEOUT_SECONDS s" >&2
    exit 1
  fi
  sleep {RAY_JOIN_RETRY_SECONDS}
done
exec vllm serve "$@"
"""
"""The leader's entrypoint: Ray head, wait for the whole group, then `vllm serve "$@"` as PID 1.

vLLM's helper script `multi-node-serving.sh` does the same, but its path in the image moved
between releases (`examples/online_serving/` then `examples/ray_serving/`), so gpufarm carries
these few lines itself. No `$(NAME)` references: the kubelet expands those in a container's
command when NAME is a variable of the container (`$((...))` arithmetic names none, so stays).
"""

WORKER_SCRIPT = f"""\
trap 'exit 0' TERM
waited=0
while :; do
  ray start --address="$LWS_LEADER_ADDRESS:{RAY_PORT}" --node-ip-address="$VLLM_HOST_IP" \\
    --object-store-memory="$RAY_OBJECT_STORE_BYTES" --block &
  wait $!
  waited=$((waited + {RAY_JOIN_RETRY_SECONDS}))
  if [ "$waited" -ge "$RAY_CLUSTER_TIMEOUT_SECONDS" ]; then
    echo "could not stay in the Ray cluster at $LWS_LEADER_ADDRESS:{RAY_PORT}" >&2
    exit 1
  fi
  sleep {RAY_JOIN_RETRY_SECONDS}
done
"""
"""A worker's entrypoint: join the leader's Ray cluster and block, retrying while the head starts.

`ray start --block` runs in the background so that the TERM trap fires at once (a shell as PID
1 ignores SIGTERM otherwise, and the pod would wait out its whole grace period). A worker that
gives up exits non-zero; with `RecreateGroupOnPodRestart` the whole group is then recreated.
"""

WORKER_PROBES_REASON = (
    "a multi-node worker pod runs only a Ray worker (ray start --block) and serves nothing to probe; "
    "the leader's probes on vLLM's /health cover the group, and a worker whose Ray process exits "
    "restarts the whole group (RecreateGroupOnPodRestart)"
)
"""Why the worker pods of a LeaderWorkerSet have no liveness or readiness probe (checkov CKV_K8S_8 and
CKV_K8S_9 on its worker template; the leader's template has both)."""

EFA_CAPABILITY_REASON = (
    "with EFA the vLLM containers add IPC_LOCK and nothing else: libfabric's EFA provider registers "
    "(pins) the memory it sends from and receives into for RDMA, which needs that capability"
)
"""Why an EFA LeaderWorkerSet adds a capability (checkov CKV_K8S_25)."""

WAIT_FOR_LEADER = """\
import os, socket, sys, time
address = (os.environ["LWS_LEADER_ADDRESS"], int(sys.argv[1]))
while True:
    try:
        socket.create_connection(address, timeout=2).close()
    except OSError:
        break
    time.sleep(5)
"""
"""A worker's preStop hook: stay up while the leader still accepts connections on its serving port.

When a group is removed (rollout, scale-in), the leader finishes in-flight requests after the
load balancer has let go of it; its pipeline stages on the workers must outlive that. When the
leader is already gone (a failed group being recreated) the first connection fails and the
worker stops at once.
"""

_RESERVED_ARGS = (
    "--pipeline-parallel-size",
    "--pipeline_parallel_size",
    "-pp",
    "--distributed-executor-backend",
    "--distributed_executor_backend",
)


def leader_selector(model_name: str) -> dict[str, str]:
    """Selector matching the leader pods (worker index 0) of one multi-node model."""
    return {**model_selector(model_name), WORKER_INDEX_LABEL: LEADER_INDEX}


def multinode_args(model: ModelConfig, serving: ServingConfig) -> list[str]:
    """Arguments to `vllm serve` on the leader: single-node flags, then pipeline parallelism on Ray.

    The model's `extra_args` stay last, as in :func:`gpufarm.k8s.serving.vllm_args`.
    """
    args = vllm_args(model, serving)
    extra = len(model.extra_args)
    base, tail = (args[:-extra], args[-extra:]) if extra else (args, [])
    return [
        *base,
        "--pipeline-parallel-size",
        str(model.pipeline_parallel),
        "--distributed-executor-backend",
        "ray",
        *tail,
    ]


def _validate(
    model: ModelConfig,
    node_selector: Mapping[str, str],
    fsx_claim: str | None,
    fsx_sub_path: str | None,
    efa_devices: int,
) -> None:
    if model.pipeline_parallel < 2:
        raise ValueError(
            f"model {model.name!r} must have pipeline_parallel of at least 2 to run as a "
            f"LeaderWorkerSet (a single-node model is a Deployment), got {model.pipeline_parallel}"
        )
    if model.gpus not in TENSOR_PARALLEL_SIZES:
        raise ValueError(
            f"model {model.name!r} must have gpus (per node: the tensor-parallel size) of "
            f"{', '.join(map(str, TENSOR_PARALLEL_SIZES))}; pipeline_parallel counts the nodes, "
            f"got {model.gpus}"
        )
    if model.autoscaling is not None:
        raise ValueError(
            f"model {model.name!r} must not set autoscaling: LeaderWorkerSet groups have fixed "
            "replicas, got an autoscaling section"
        )
    reserved = [a for a in model.extra_args if a.split("=", 1)[0] in _RESERVED_ARGS]
    if reserved:
        raise ValueError(
            f"model {model.name!r} must not set {reserved[0].split('=', 1)[0]} in extra_args "
            f"(pipeline_parallel and Ray set it), got {list(model.extra_args)}"
        )
    if not node_selector:
        raise ValueError(
            f"'node_selector' must name at least one node label for model {model.name!r} "
            "(every pod of a group needs a GPU node of the model's class), got {}"
        )
    if fsx_sub_path is not None and fsx_claim is None:
        raise ValueError(
            f"'fsx_sub_path' needs 'fsx_claim' (the claim it is a path in), got {fsx_sub_path!r}"
        )
    if efa_devices < 1:
        raise ValueError(f"'efa_devices' must be at least 1 (EFA interfaces per pod), got {efa_devices}")


def _env(model: ModelConfig, efa: bool) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        *engine_env(),
        {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
        {"name": "DO_NOT_TRACK", "value": "1"},
        {"name": "RAY_USAGE_STATS_ENABLED", "value": "0"},
        # Ray and vLLM advertise the pod's own address to the rest of the group.
        {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "NCCL_SOCKET_IFNAME", "value": POD_INTERFACE},
        {"name": "GLOO_SOCKET_IFNAME", "value": POD_INTERFACE},
        {"name": "RAY_OBJECT_STORE_BYTES", "value": str(RAY_OBJECT_STORE_GIB * 1024**3)},
        {"name": "RAY_CLUSTER_TIMEOUT_SECONDS", "value": str(model.startup_timeout_seconds)},
    ]
    if efa:
        env += [
            {"name": "FI_PROVIDER", "value": "efa"},
            {"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"},
        ]
    if model.hf_token_secret:
        env.append({"name": "HF_TOKEN_PATH", "value": f"{TOKEN_DIR}/token"})
    return env


def _volumes(
    model: ModelConfig, fsx_claim: str | None, fsx_sub_path: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The Deployment's volumes and mounts, with /dev/shm sized for Ray's object store too."""
    shm_gib = max(2, 2 * model.gpus) + RAY_OBJECT_STORE_GIB
    return vllm_volumes(model, shm_gib=shm_gib, fsx_claim=fsx_claim, fsx_sub_path=fsx_sub_path)


def _resources(model: ModelConfig, efa: bool, efa_devices: int) -> dict[str, Any]:
    extended = {GPU_RESOURCE: str(model.gpus)}
    if efa:
        extended[EFA_RESOURCE] = str(efa_devices)
    return {
        "requests": {"cpu": f"{model.cpu:g}", "memory": f"{model.memory_gib}Gi", **extended},
        "limits": {"memory": f"{model.memory_gib}Gi", **extended},
    }


def _pod_spec(
    model: ModelConfig,
    serving: ServingConfig,
    container: dict[str, Any],
    *,
    volumes: list[dict[str, Any]],
    node_selector: Mapping[str, str],
    region: str,
    grace_seconds: int,
    efa: bool,
    sidecars: list[dict[str, Any]],
) -> dict[str, Any]:
    tolerations = [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
    if efa:
        tolerations.append({"key": EFA_RESOURCE, "operator": "Exists", "effect": "NoSchedule"})
    init_containers = [token_init_container(model, serving, region)] if model.hf_token_secret else []
    init_containers += sidecars
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": grace_seconds,
        "nodeSelector": dict(node_selector),
        "tolerations": tolerations,
        # Every pod of a group in one zone: pipeline stages exchange activations on every token,
        # and EFA traffic does not leave its subnet. LWS's group-key label tells groups apart.
        "affinity": {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": model_selector(model.name)},
                        "matchLabelKeys": [GROUP_KEY_LABEL],
                        "topologyKey": ZONE_KEY,
                    }
                ]
            }
        },
        "securityContext": pod_security(VLLM_UID, fs_group=False),
        # Neither Ray nor vLLM calls the Kubernetes API; Pod Identity brings its own token.
        "automountServiceAccountToken": False,
        "containers": [container],
        "volumes": volumes,
    }
    if model.hf_token_secret:
        spec["serviceAccountName"] = SERVICE_ACCOUNT
    if init_containers:
        spec["initContainers"] = init_containers
    return spec


def vllm_leader_worker_set(
    model: ModelConfig,
    serving: ServingConfig,
    *,
    node_selector: Mapping[str, str],
    region: str,
    termination_grace_seconds: int = 300,
    fsx_claim: str | None = None,
    fsx_sub_path: str | None = None,
    efa: bool = False,
    efa_devices: int = 1,
    target_optimizer: TargetOptimizerConfig | None = None,
) -> dict[str, Any]:
    """The `leaderworkerset.x-k8s.io/v1` LeaderWorkerSet of one multi-node model.

    `replicas` groups of `pipeline_parallel` pods; every pod requests `gpus` GPUs (the tensor-
    parallel size) on a node matching `node_selector` (all labels must match: a capacity class
    such as `{"gpufarm.io/capacity-class": "h100"}`), tolerates the GPU taint and loads the
    weights itself: `s3://` weights from the model's Mountpoint claim, or from `fsx_claim` at
    `fsx_sub_path`; Hugging Face weights are downloaded by each pod, with the token read by an
    init container when `hf_token_secret` is set.

    Defaults worth knowing: `startupPolicy: LeaderCreated` (workers start with the leader, since the
    leader becomes ready only once they have joined; `LeaderReady` would never start them);
    `restartPolicy: RecreateGroupOnPodRestart` (any restarted pod or container restarts the whole
    group, as one lost pipeline stage stalls the others); rollouts replace one group at a time in
    place (maxUnavailable 1, maxSurge 0: a surge needs several whole GPU nodes spare, which reserved
    capacity rarely has, and a surge that cannot schedule never finishes; with one replica the
    gateway answers from the fallback meanwhile); the Shared subdomain policy (one headless Service
    named after the LeaderWorkerSet; LWS sets each pod's hostname and subdomain); every pod of a
    group in one zone; `karpenter.sh/do-not-disrupt` on every pod. Probes run on the leader only:
    startup (`startup_timeout_seconds` for the group to form and load), readiness and liveness on
    `/health`. `efa` requests `efa_devices` EFA interfaces per pod (default 1), tolerates
    `vpc.amazonaws.com/efa` taints, adds IPC_LOCK (vLLM then runs as root: a non-root container's
    added capability has no effect) and sets `FI_PROVIDER=efa` and
    `FI_EFA_USE_DEVICE_RDMA=1`; NCCL uses it only when the image carries the aws-ofi-nccl plugin.
    `target_optimizer` (enabled) adds the ALB target control agent to the leader.
    Pods run as :func:`gpufarm.k8s.serving.vllm_deployment`'s do: UID 2000, read-only root,
    HOME and `/tmp` (Ray's session directory) on `emptyDir`s, no Kubernetes token.
    Default: no EFA, no agent, Mountpoint claim.
    """
    _validate(model, node_selector, fsx_claim, fsx_sub_path, efa_devices)
    name = workload_name(model.name)
    labels = {**common_labels("vllm"), **model_selector(model.name)}
    annotations = {"karpenter.sh/do-not-disrupt": "true"}
    volumes, mounts = _volumes(model, fsx_claim, fsx_sub_path)
    env = _env(model, efa)
    resources = _resources(model, efa, efa_devices)
    # EFA registers (pins) memory for RDMA: the one need beyond the restricted profile.
    security = efa_engine_security() if efa else container_security()
    leader_grace = termination_grace_seconds + PRESTOP_SLEEP_SECONDS

    leader = {
        "name": "vllm",
        "image": serving.vllm_image,
        "command": ["/bin/sh", "-c", LEADER_SCRIPT, "vllm-leader"],
        "args": multinode_args(model, serving),
        "ports": [
            {"name": "http", "containerPort": serving.port, "protocol": "TCP"},
            {"name": "ray-gcs", "containerPort": RAY_PORT, "protocol": "TCP"},
        ],
        "env": env,
        "resources": resources,
        **vllm_probes(model),
        "lifecycle": {"preStop": {"sleep": {"seconds": PRESTOP_SLEEP_SECONDS}}},
        "securityContext": security,
        "volumeMounts": mounts,
    }
    worker = {
        "name": "vllm",
        "image": serving.vllm_image,
        "command": ["/bin/sh", "-c", WORKER_SCRIPT, "vllm-worker"],
        "env": env,
        "resources": resources,
        "lifecycle": {
            "preStop": {"exec": {"command": ["python3", "-c", WAIT_FOR_LEADER, str(serving.port)]}}
        },
        "securityContext": security,
        "volumeMounts": mounts,
    }
    sidecars: list[dict[str, Any]] = []
    if target_optimizer is not None and target_optimizer.enabled:
        sidecars.append(target_control_agent(model, serving, target_optimizer))
    leader_spec = _pod_spec(
        model,
        serving,
        leader,
        volumes=volumes,
        node_selector=node_selector,
        region=region,
        grace_seconds=leader_grace,
        efa=efa,
        sidecars=sidecars,
    )
    leader_spec["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE_KEY,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": leader_selector(model.name)},
        }
    ]
    # A worker outlives its leader's drain: the leader's grace period plus a margin to notice it.
    worker_spec = _pod_spec(
        model,
        serving,
        worker,
        volumes=volumes,
        node_selector=node_selector,
        region=region,
        grace_seconds=leader_grace + WORKER_GRACE_MARGIN_SECONDS,
        efa=efa,
        sidecars=[],
    )
    lws: dict[str, Any] = {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": serving.namespace, "labels": labels},
        "spec": {
            "replicas": model.replicas,
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1},
            },
            "networkConfig": {"subdomainPolicy": "Shared"},
            "leaderWorkerTemplate": {
                "size": model.pipeline_parallel,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {
                    "metadata": {"labels": dict(labels), "annotations": dict(annotations)},
                    "spec": leader_spec,
                },
                "workerTemplate": {
                    "metadata": {"labels": dict(labels), "annotations": dict(annotations)},
                    "spec": worker_spec,
                },
            },
        },
    }
    scan_acknowledge(lws, "CKV_K8S_11", GPU_POD_CPU_LIMIT_REASON)
    scan_acknowledge(lws, "CKV_K8S_8", WORKER_PROBES_REASON)
    scan_acknowledge(lws, "CKV_K8S_9", WORKER_PROBES_REASON)
    scan_acknowledge(lws, "CKV_K8S_40", VLLM_UID_REASON)
    if efa:
        scan_acknowledge(lws, "CKV_K8S_25", EFA_CAPABILITY_REASON)
        scan_acknowledge(lws, "CKV_K8S_23", EFA_ROOT_REASON)
    acknowledge_unpinned_agent(lws, target_optimizer)
    return lws


def vllm_multinode_service(
    model: ModelConfig, serving: ServingConfig, *, target_optimizer: TargetOptimizerConfig | None = None
) -> dict[str, Any]:
    """ClusterIP Service `vllm-<model>-leader` in front of a multi-node model's leaders only.

    It selects the model's pods with worker index 0, so in-cluster clients and the load
    balancer (through a TargetGroupBinding on port `http`) reach only the pods that serve HTTP.
    With the Target Optimizer (enabled) a second port `data` reaches the leader's agent, as for
    :func:`gpufarm.k8s.serving.vllm_service`. Default: `http` only.
    """
    ports: list[dict[str, Any]] = [
        {"name": "http", "port": serving.port, "targetPort": "http", "protocol": "TCP"}
    ]
    if target_optimizer is not None and target_optimizer.enabled:
        port = target_optimizer.data_port
        ports.append({"name": AGENT_DATA_PORT_NAME, "port": port, "targetPort": port, "protocol": "TCP"})
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": leader_service_name(model.name),
            "namespace": serving.namespace,
            "labels": {**common_labels("vllm"), MODEL_LABEL: model.name},
        },
        "spec": {"type": "ClusterIP", "selector": leader_selector(model.name), "ports": ports},
    }


def multinode_service_account(namespace: str) -> dict[str, Any]:
    """The service account of multi-node pods that read a Hugging Face token (Pod Identity, no RBAC).

    No Kubernetes token, as :func:`gpufarm.k8s.serving.service_account`.
    """
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace, "labels": common_labels("serving")},
        "automountServiceAccountToken": False,
    }


def lws_controller_values(
    chart_version: str = LWS_CHART_VERSION, digests: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Helm values for the LWS chart: two controller replicas, image pinned to the chart's release.

    The chart's `values.yaml` in the LWS repository sets the image tag to `main` (a moving
    development build); the tag is set here to `v<chart_version>` so the controller is the
    release that matches the chart and its CRDs. When that is the table's `lws-controller` tag,
    the digest from `digests` (the tier's `images.digests`) joins it in the `tag` value: the
    chart builds `repository:tag` (kubernetes-sigs/lws charts/lws/templates/manager/deployment.yaml).
    """
    row = images.image("lws-controller")
    tag = f"v{chart_version}"
    return {
        "replicaCount": LWS_CONTROLLER_REPLICAS,
        "image": {
            "manager": {
                "repository": LWS_CONTROLLER_IMAGE,
                "tag": images.helm_tag(row.name, digests) if tag == row.tag else tag,
                "pullPolicy": "IfNotPresent",
            }
        },
    }
