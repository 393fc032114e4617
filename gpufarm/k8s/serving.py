"""vLLM serving manifests: Namespace, ServiceAccount, Deployment and Service per model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from gpufarm.config.model import (
    KvTransport,
    ModelConfig,
    RunaiStreamerConfig,
    ServingConfig,
    TargetOptimizerConfig,
)
from gpufarm.core import gpu_health
from gpufarm.core.endpoints import HEALTH_PATH as HEALTH_PATH  # re-exported
from gpufarm.core.engines import VLLM, EngineSpec, engine_of
from gpufarm.core.prefill_decode import DECODE_ENGINE_PORT
from gpufarm.k8s import prefill_decode
from gpufarm.k8s.binding import READINESS_GATE_INJECT_LABEL
from gpufarm.k8s.labels import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    GPU_TAINT_KEY,
    MODEL_LABEL,
    NODEPOOL_LABEL,
    SHARE_LABEL,
    common_labels,
    model_selector,
    nodepool_name,
    share_selector,
    workload_name,
)
from gpufarm.k8s.scan import scan_acknowledge
from gpufarm.k8s.security import (
    EFA_ROOT_REASON,
    VLLM_UID,
    VLLM_UID_REASON,
    PodSecurityLevel,
    container_security,
    efa_engine_security,
    emptydir,
    namespace_labels,
    pod_security,
)
from gpufarm.k8s.storage import stream_weights, weights_claim_name

SERVICE_ACCOUNT = "vllm"
"""Service account of the vLLM pods (bound to an IAM role through EKS Pod Identity)."""

HF_CACHE_DIR = "/var/cache/huggingface"
VLLM_HOME = "/home/vllm"
"""HOME of the vLLM containers (the image's `vllm` user's home), an `emptyDir` on a read-only root."""
TMP_DIR = "/tmp"
TOKEN_DIR = "/var/run/gpufarm/hf"
MODELS_DIR = "/models"
STARTUP_PERIOD_SECONDS = gpu_health.STARTUP_PERIOD_SECONDS
PRESTOP_SLEEP_SECONDS = 15
"""Time the load balancer gets to stop sending new requests before vLLM receives SIGTERM."""
AGENT_CONTAINER = "alb-target-control-agent"
"""Name of the ALB Target Optimizer agent sidecar (the name the load balancer controller's injector uses)."""
AGENT_DATA_PORT_NAME = "data"
AGENT_CONTROL_PORT_NAME = "control"

GPU_POD_CPU_LIMIT_REASON = (
    "vLLM pods request CPU and set no CPU limit by design: they run alone on GPU nodes tainted for "
    "GPU pods, and a CFS quota would throttle vLLM's scheduler and tokenizer threads (and its "
    "sidecars') while the GPUs wait; memory is limited"
)
"""Why vLLM pods have no CPU limit (checkov CKV_K8S_11). A CPU limit is a CFS quota: in each period
the kernel stops a container that used its quota until the next one (Kubernetes, "Resource
Management for Pods and Containers", https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/,
"How Pods with resource limits are run")."""


def namespace(
    name: str,
    *,
    readiness_gates: bool = False,
    pod_security: PodSecurityLevel = PodSecurityLevel.RESTRICTED,
    pod_security_version: str = "latest",
) -> dict[str, Any]:
    """The serving namespace, with its Pod Security Admission labels.

    `readiness_gates` labels it so the AWS Load Balancer Controller injects a target-health
    readiness gate into each new pod that a TargetGroupBinding registers
    (:data:`gpufarm.k8s.binding.READINESS_GATE_INJECT_LABEL`). Default: no label.

    `pod_security` is the profile admission enforces, at the rules of `pod_security_version`
    (`v1.35`); audit and warn are always `restricted`
    (:func:`gpufarm.k8s.security.namespace_labels`). Defaults: `restricted`, `latest`.
    """
    labels = common_labels("serving")
    labels.update(namespace_labels(pod_security, version=pod_security_version))
    if readiness_gates:
        labels[READINESS_GATE_INJECT_LABEL] = "enabled"
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": labels},
    }


def service_account(ns: str) -> dict[str, Any]:
    """The vLLM service account; its AWS permissions come from a Pod Identity association.

    No Kubernetes token is mounted for it: the pods never call the Kubernetes API (the account
    has no RBAC permissions), and Pod Identity does not need that token. The EKS Pod Identity
    webhook adds a projected volume of its own, a service-account token for the audience
    `pods.eks.amazonaws.com`, and points `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` at it
    (aws/amazon-eks-pod-identity-webhook `pkg/handler/testdata/containercredentials/`;
    https://docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html).
    `automountServiceAccountToken` governs only the API-access volume Kubernetes adds itself.
    """
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": ns, "labels": common_labels("serving")},
        "automountServiceAccountToken": False,
    }


def engine_env(engine: EngineSpec = VLLM) -> list[dict[str, Any]]:
    """Where a vLLM container writes: its caches under :data:`VLLM_HOME`, Hugging Face's under HF_HOME.

    The root file system is read-only, so every library that writes must land on a volume:
    vLLM's compile cache and config (`VLLM_CACHE_ROOT`, `VLLM_CONFIG_ROOT`), Triton's kernels
    (`TRITON_CACHE_DIR`), PyTorch Inductor's (`TORCHINDUCTOR_CACHE_DIR`) and whatever follows the
    XDG directories or HOME (FlashInfer's JIT cache, Outlines, Numba). All are variables vLLM
    0.31.0 reads (`vllm/envs.py`, listed in upstream-ref `vllm@0.31.0.json`); the defaults
    already fall under HOME or /tmp, and naming them keeps them there if a default changes.

    Another `engine` keeps its own caches there the same way (:attr:`EngineSpec.cache_env`:
    SGLang's `SGLANG_CACHE_DIR`, under which it puts Triton's, Inductor's and FlashInfer's).
    """
    values = [("HOME", VLLM_HOME)]
    values += [(k, v.format(home=VLLM_HOME)) for k, v in engine.cache_env]
    values.append(("HF_HOME", HF_CACHE_DIR))
    return [{"name": k, "value": v} for k, v in values]


def engine_args(
    model: ModelConfig, serving: ServingConfig, *, port: int | None = None, gpus: int | None = None
) -> list[str]:
    """Arguments of the model's engine server (:meth:`gpufarm.core.engines.EngineSpec.args`).

    `port` and `gpus` replace the serving port and the model's `gpus` (the tensor-parallel size),
    for a decode pod's vLLM behind its sidecar and for prefill pods of another size.
    """
    return engine_of(model).args(
        model, source=model_source(model), port=port or serving.port, gpus=gpus or model.gpus
    )


def model_source(model: ModelConfig) -> str:
    """What the engine loads: the Hugging Face repo id, or `/models/<model>` for `s3://` weights."""
    return f"{MODELS_DIR}/{model.name}" if model.is_s3 else model.weights


def vllm_args(
    model: ModelConfig, serving: ServingConfig, *, port: int | None = None, gpus: int | None = None
) -> list[str]:
    """Arguments to `vllm serve` (a vLLM model's :func:`engine_args`): the weights first, then
    flags derived from the model config, then `extra_args`."""
    return VLLM.args(model, source=model_source(model), port=port or serving.port, gpus=gpus or model.gpus)


def http_probe(path: str, **timing: int) -> dict[str, Any]:
    """An HTTP GET probe on the container's `http` port."""
    return {"httpGet": {"path": path, "port": "http"}, **timing}


def vllm_probes(model: ModelConfig) -> dict[str, dict[str, Any]]:
    """Startup, readiness and liveness probes of an engine container; vLLM's are all on `/health`.

    Startup and readiness ask the engine's readiness path, liveness its health path
    (:class:`gpufarm.core.engines.EngineSpec`: SGLang's `/ready` and `/health`).

    They tell vLLM's three states apart (:mod:`gpufarm.core.gpu_health`): while the model loads
    the port refuses connections and only the startup probe runs, for up to the model's
    `startup_timeout_seconds`; once serving, readiness keeps the pod in its Service while
    `/health` answers 200 and takes it out after two failures (503 once the engine is dead);
    liveness, which starts only after startup succeeded, restarts a server that stops answering
    for a minute. A dead engine makes vLLM exit by itself within 5 s, so the kubelet restarts
    it and the startup probe covers the reload.
    """
    engine = engine_of(model)
    return {
        "startupProbe": http_probe(
            engine.readiness_path,
            periodSeconds=gpu_health.STARTUP_PERIOD_SECONDS,
            timeoutSeconds=gpu_health.STARTUP_TIMEOUT_SECONDS,
            failureThreshold=gpu_health.startup_failure_threshold(model),
        ),
        "readinessProbe": http_probe(
            engine.readiness_path,
            periodSeconds=gpu_health.READINESS_PERIOD_SECONDS,
            timeoutSeconds=gpu_health.READINESS_TIMEOUT_SECONDS,
            failureThreshold=gpu_health.READINESS_FAILURE_THRESHOLD,
        ),
        "livenessProbe": http_probe(
            engine.health_path,
            periodSeconds=gpu_health.LIVENESS_PERIOD_SECONDS,
            timeoutSeconds=gpu_health.LIVENESS_TIMEOUT_SECONDS,
            failureThreshold=gpu_health.LIVENESS_FAILURE_THRESHOLD,
        ),
    }


def agent_probes() -> dict[str, dict[str, Any]]:
    """TCP probes of the Target Optimizer agent on its data port.

    The agent has no health endpoint (:data:`gpufarm.core.gpu_health.AGENT_PERIOD_SECONDS`), so
    the kubelet checks that it accepts connections: as a native sidecar its startup probe holds
    vLLM's start until the agent listens, its readiness counts toward the pod's, and liveness
    restarts an agent that stops accepting. Whether vLLM behind it serves is the load balancer's
    health check, which passes through the agent to `/health`.
    """
    probe = {
        "tcpSocket": {"port": AGENT_DATA_PORT_NAME},
        "periodSeconds": gpu_health.AGENT_PERIOD_SECONDS,
        "timeoutSeconds": gpu_health.AGENT_TIMEOUT_SECONDS,
        "failureThreshold": gpu_health.AGENT_FAILURE_THRESHOLD,
    }
    return {"startupProbe": dict(probe), "readinessProbe": dict(probe), "livenessProbe": dict(probe)}


def token_init_container(model: ModelConfig, serving: ServingConfig, region: str) -> dict[str, Any]:
    """Reads the Hugging Face token from Secrets Manager into a memory-backed volume.

    The token never appears in the template, the pod spec or a Kubernetes Secret; vLLM's
    Hugging Face client reads it through `HF_TOKEN_PATH`. The AWS CLI runs as the pod's user on a
    read-only root file system with HOME on the pod's `/tmp` volume, as the gateway's does.
    """
    return {
        "name": "hf-token",
        "image": serving.aws_cli_image,
        "command": ["/bin/sh", "-c"],
        "args": [
            'aws secretsmanager get-secret-value --secret-id "$SECRET_ID" '
            f"--query SecretString --output text > {TOKEN_DIR}/token"
        ],
        "env": [
            {"name": "SECRET_ID", "value": model.hf_token_secret},
            {"name": "AWS_REGION", "value": region},
            {"name": "HOME", "value": TMP_DIR},
        ],
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"memory": "256Mi"},
        },
        "securityContext": container_security(),
        "volumeMounts": [
            {"name": "hf-token", "mountPath": TOKEN_DIR},
            {"name": "tmp", "mountPath": TMP_DIR},
        ],
    }


def target_control_agent(
    model: ModelConfig, serving: ServingConfig, target_optimizer: TargetOptimizerConfig
) -> dict[str, Any]:
    """The ALB Target Optimizer agent as a native sidecar (an init container that keeps running).

    It receives the load balancer's requests on `data_port`, tells the load balancer on
    `control_port` when the pod can take another one (at most `model.max_concurrency` at a
    time) and proxies them to vLLM on the loopback interface. As a native sidecar it starts
    before vLLM and stops after it, so in-flight requests drain through it.
    """
    destination = f"127.0.0.1:{serving.port}"
    return {
        "name": AGENT_CONTAINER,
        "image": target_optimizer.agent_image,
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",
        "env": [
            {"name": "TARGET_CONTROL_DATA_ADDRESS", "value": f"0.0.0.0:{target_optimizer.data_port}"},
            {"name": "TARGET_CONTROL_CONTROL_ADDRESS", "value": f"0.0.0.0:{target_optimizer.control_port}"},
            # The Elastic Load Balancing guide and the load balancer controller's injector name
            # the variable ..._DESTINATION_ADDRESS; the controller's own guide writes
            # ..._DESTINATION. Both carry the same value, so either spelling reaches the agent.
            {"name": "TARGET_CONTROL_DESTINATION_ADDRESS", "value": destination},
            {"name": "TARGET_CONTROL_DESTINATION", "value": destination},
            {"name": "TARGET_CONTROL_MAX_CONCURRENCY", "value": str(model.max_concurrency)},
        ],
        "ports": [
            {"name": AGENT_DATA_PORT_NAME, "containerPort": target_optimizer.data_port, "protocol": "TCP"},
            {
                "name": AGENT_CONTROL_PORT_NAME,
                "containerPort": target_optimizer.control_port,
                "protocol": "TCP",
            },
        ],
        "resources": {
            "requests": {"cpu": "250m", "memory": "128Mi"},
            "limits": {"memory": "512Mi"},
        },
        **agent_probes(),
        "securityContext": container_security(),
    }


def vllm_volumes(
    model: ModelConfig, *, shm_gib: int, fsx_claim: str | None, fsx_sub_path: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A vLLM pod's volumes and the vLLM container's mounts.

    A memory-backed `/dev/shm` of `shm_gib` (NCCL's and Ray's shared memory), the Hugging Face
    cache, HOME (:data:`VLLM_HOME`, the caches of :func:`engine_env`) and `/tmp` as the only
    writable paths of a read-only root file system, the token volume when the model reads a gated
    repo, and `s3://` weights read-only at `/models/<model>`: from the model's Mountpoint claim,
    or from `fsx_claim` at `fsx_sub_path`.
    """
    volumes: list[dict[str, Any]] = [
        emptydir("dshm", memory=True, size_limit=f"{shm_gib}Gi"),
        emptydir("hf-cache"),
        emptydir("home"),
        emptydir("tmp"),
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "hf-cache", "mountPath": HF_CACHE_DIR},
        {"name": "home", "mountPath": VLLM_HOME},
        {"name": "tmp", "mountPath": TMP_DIR},
    ]
    if model.hf_token_secret:
        volumes.append({"name": "hf-token", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}})
        mounts.append({"name": "hf-token", "mountPath": TOKEN_DIR, "readOnly": True})
    if model.is_s3:
        claim = fsx_claim or weights_claim_name(model.name)
        volumes.append({"name": "weights", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}})
        mount: dict[str, Any] = {
            "name": "weights",
            "mountPath": f"{MODELS_DIR}/{model.name}",
            "readOnly": True,
        }
        if fsx_claim and fsx_sub_path:
            mount["subPath"] = fsx_sub_path
        mounts.append(mount)
    return volumes, mounts


def vllm_deployment(
    model: ModelConfig,
    serving: ServingConfig,
    *,
    pool_name: str,
    region: str,
    termination_grace_seconds: int = 300,
    target_optimizer: TargetOptimizerConfig | None = None,
    fsx_claim: str | None = None,
    fsx_sub_path: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    node_affinity: Mapping[str, Any] | None = None,
    prefill_decode_role: Literal["prefill", "decode"] | None = None,
    efa_devices: int = 0,
    share: str | None = None,
    min_ready_seconds: int = 0,
    streamer: RunaiStreamerConfig | None = None,
) -> dict[str, Any]:
    """The vLLM Deployment for one model, for one share of it, or for one role of a disaggregated model.

    Pods run on the NodePool of `pool_name` unless `node_selector` says otherwise (a capacity
    class, or a reserved node group's label), or `node_affinity` places them (the on-premises
    class, :func:`gpufarm.core.hybrid.node_affinity`; no NodePool selector then). With `share`
    (a name of `model.shares`; pass
    `model.as_share(...)` as `model`, which carries the share's replicas and GPUs) the
    Deployment is `vllm-<model>-<share>` and its pods carry the `gpufarm.io/share` label next
    to the model's, which its selector and zone spread match: each share has pods of its own.

    Defaults worth knowing: the startup probe allows `startup_timeout_seconds` for download and
    load before liveness starts; rolling updates add a pod before removing one (maxSurge 1,
    maxUnavailable 0) so capacity never dips; pods carry `karpenter.sh/do-not-disrupt` so
    voluntary node disruption waits for them; `/dev/shm` is memory-backed for tensor parallelism;
    every container runs non-root (vLLM as UID 2000) on a read-only root with no capabilities
    (:mod:`gpufarm.k8s.security`), writing only to its volumes (:func:`engine_env`), and the pod
    mounts no Kubernetes token.
    `min_ready_seconds` (default 0) holds each rollout step that long after a new pod is Ready:
    where no readiness gate ties Ready to target health, it covers the pod's registration and
    initial health checks (:func:`gpufarm.k8s.binding.min_ready_seconds`).

    `target_optimizer` (enabled) adds the target control agent as a native sidecar
    (:func:`target_control_agent`); pod readiness follows vLLM's `/health` and the agent
    accepting connections (:func:`agent_probes`). `fsx_claim` mounts `s3://` weights read-only
    from that FSx for Lustre claim (at `fsx_sub_path` inside it) instead of the model's
    Mountpoint claim; Hugging Face weights ignore it. A model with
    `autoscaling` has no `spec.replicas`: KEDA owns the count, and re-applying the manifest must
    not reset it. Default: no agent, Mountpoint claim, `replicas` from the model.

    `prefill_decode_role` (a model with `prefill_decode`) renders one role of it
    (:mod:`gpufarm.k8s.prefill_decode`):
    `"decode"` is the model's own Deployment with vLLM moved to the decode engine port behind the
    disaggregation sidecar; `"prefill"` is `vllm-<model>-prefill` with `prefill_replicas` pods of
    `prefill_gpus`. Both add the NixlConnector, the shared block size, the role labels and a
    preference for the zone of the model's other pods (KV transfer stays in one AZ). With
    `efa_devices` (kv_transport 'efa') the pods run `efa_image`, request that many EFA interfaces
    and may lock memory (IPC_LOCK, so vLLM runs as root there:
    :func:`gpufarm.k8s.security.efa_engine_security`). Default: a plain model.

    `streamer` (the tier's `runai-streamer` store) makes vLLM read `s3://` weights from S3 with
    the Run:ai Model Streamer as the service account's Pod Identity role, with no volume
    (:func:`gpufarm.k8s.storage.stream_weights`); Hugging Face weights ignore it. Default: a volume.
    """
    if fsx_sub_path is not None and fsx_claim is None:
        raise ValueError(
            f"'fsx_sub_path' needs 'fsx_claim' (the claim it is a path in), got {fsx_sub_path!r}"
        )
    pd = model.prefill_decode
    if prefill_decode_role is not None and pd is None:
        raise ValueError(
            "'prefill_decode_role' needs a model with prefill_decode, "
            f"got {prefill_decode_role!r} for {model.name!r}"
        )
    if efa_devices and (pd is None or pd.kv_transport is not KvTransport.EFA):
        raise ValueError(
            f"'efa_devices' needs a prefill/decode model with kv_transport 'efa', got {efa_devices}"
        )
    prefill = prefill_decode_role == "prefill"
    if prefill:
        name, selector = prefill_decode.prefill_name(model.name), prefill_decode.prefill_selector(model.name)
    else:
        name = workload_name(model.name, share)
        selector = model_selector(model.name) if share is None else share_selector(model.name, share)
    labels = {**common_labels("vllm-prefill" if prefill else "vllm"), **selector}
    if prefill_decode_role is not None:
        labels.update(prefill_decode.role_labels(model.name, prefill_decode_role))
    engine = engine_of(model)
    env: list[dict[str, Any]] = [*engine_env(engine)]
    if engine is VLLM:
        env.append({"name": "VLLM_NO_USAGE_STATS", "value": "1"})
    env.append({"name": "DO_NOT_TRACK", "value": "1"})
    gpu_count = pd.prefill_gpus_for(model.gpus) if pd is not None and prefill else model.gpus
    volumes, mounts = vllm_volumes(
        model, shm_gib=max(2, 2 * gpu_count), fsx_claim=fsx_claim, fsx_sub_path=fsx_sub_path
    )
    init_containers: list[dict[str, Any]] = []
    if model.hf_token_secret:
        env.append({"name": "HF_TOKEN_PATH", "value": f"{TOKEN_DIR}/token"})
        init_containers.append(token_init_container(model, serving, region))
    if target_optimizer is not None and target_optimizer.enabled:
        init_containers.append(target_control_agent(model, serving, target_optimizer))

    port = DECODE_ENGINE_PORT if prefill_decode_role == "decode" else serving.port
    args = engine_args(model, serving, port=port, gpus=gpu_count)
    image = serving.engine_image(model.engine)
    extended = {GPU_RESOURCE: str(gpu_count)}
    if pd is not None and prefill_decode_role is not None:
        args += prefill_decode.engine_args(pd)
        env += prefill_decode.nixl_env(prefill=prefill)
        if prefill_decode_role == "decode":
            init_containers.append(prefill_decode.routing_sidecar(serving))
        if efa_devices:
            image = pd.efa_image or image
            extended[EFA_RESOURCE] = str(efa_devices)
    container = {
        "name": model.engine.value,
        "image": image,
        "command": list(engine.command),
        "args": args,
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "env": env,
        "resources": {
            "requests": {"cpu": f"{model.cpu:g}", "memory": f"{model.memory_gib}Gi", **extended},
            "limits": {"memory": f"{model.memory_gib}Gi", **extended},
        },
        **vllm_probes(model),
        "lifecycle": {"preStop": {"sleep": {"seconds": PRESTOP_SLEEP_SECONDS}}},
        "securityContext": container_security(),
        "volumeMounts": mounts,
    }
    tolerations = [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
    if efa_devices:
        # EFA registers (pins) the KV-cache buffers it sends from and receives into.
        container["securityContext"] = efa_engine_security()
        tolerations.append({"key": EFA_RESOURCE, "operator": "Exists", "effect": "NoSchedule"})
    pod_spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": termination_grace_seconds + PRESTOP_SLEEP_SECONDS,
        "nodeSelector": dict(
            node_selector or ({} if node_affinity else {NODEPOOL_LABEL: nodepool_name(pool_name)})
        ),
        "tolerations": tolerations,
        "securityContext": pod_security(VLLM_UID, fs_group=False),
        # vLLM never calls the Kubernetes API; Pod Identity brings its own token (service_account).
        "automountServiceAccountToken": False,
        "containers": [container],
        "volumes": volumes,
    }
    if not pod_spec["nodeSelector"]:
        del pod_spec["nodeSelector"]
    if node_affinity:
        pod_spec["affinity"] = {"nodeAffinity": dict(node_affinity)}
    if prefill_decode_role is None:
        pod_spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": selector},
            }
        ]
    else:
        # Prefill and decode pods prefer one zone: every disaggregated request moves its KV cache
        # between them (no inter-AZ charge, lower transfer time; EFA does not leave its subnet).
        pod_spec["affinity"] = {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {
                                "matchLabels": {prefill_decode.PREFILL_DECODE_GROUP_LABEL: model.name}
                            },
                            "topologyKey": "topology.kubernetes.io/zone",
                        },
                    }
                ]
            }
        }
    if model.hf_token_secret:
        pod_spec["serviceAccountName"] = SERVICE_ACCOUNT
    if init_containers:
        pod_spec["initContainers"] = init_containers
    if streamer is not None and model.is_s3:
        stream_weights(
            pod_spec,
            model=model,
            config=streamer,
            gpus=gpu_count,
            region=region,
            local_path=f"{MODELS_DIR}/{model.name}",
            service_account=SERVICE_ACCOUNT,
        )
    # KEDA owns the replica count of an autoscaled model: leaving it out keeps a re-apply of this
    # manifest from resetting it.
    if pd is not None and prefill:
        replicas = {} if pd.prefill_autoscaling else {"replicas": pd.prefill_replicas}
    else:
        replicas = {} if model.autoscaling else {"replicas": model.replicas}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": serving.namespace, "labels": labels},
        "spec": {
            **replicas,
            "revisionHistoryLimit": 3,
            "progressDeadlineSeconds": model.startup_timeout_seconds + 600,
            **({"minReadySeconds": min_ready_seconds} if min_ready_seconds else {}),
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {"karpenter.sh/do-not-disrupt": "true"},
                },
                "spec": pod_spec,
            },
        },
    }
    scan_acknowledge(deployment, "CKV_K8S_11", GPU_POD_CPU_LIMIT_REASON)
    scan_acknowledge(deployment, "CKV_K8S_40", VLLM_UID_REASON)
    if efa_devices:
        scan_acknowledge(deployment, "CKV_K8S_23", EFA_ROOT_REASON)
    # The agent's ':latest' fails CKV_K8S_14 (a fixed tag), 15 (pull policy) and 43 (digest); an
    # engine image with a release tag and no digest fails 15 and 43 only.
    agent = target_optimizer is not None and target_optimizer.runs_unpinned_agent
    reasons: dict[str, list[str]] = {}
    for check in ("CKV_K8S_14", "CKV_K8S_15", "CKV_K8S_43"):
        if agent:
            reasons.setdefault(check, []).append(UNPINNED_AGENT_REASON)
        if "@" not in image and check != "CKV_K8S_14":
            reasons.setdefault(check, []).append(UNPINNED_ENGINE_REASON)
    for check, why in reasons.items():
        scan_acknowledge(deployment, check, "; and ".join(why))
    return deployment


UNPINNED_ENGINE_REASON = (
    "the engine image has no digest in gpufarm's table (gpufarm/data/images.yaml says why): the tier "
    "reports it as an unpinned image, so synth warns and the stack refuses to deploy until the tier "
    "sets the serving image to a digest"
)
"""Why an engine container may carry a tag-only image (checkov CKV_K8S_15, CKV_K8S_43)."""


UNPINNED_AGENT_REASON = (
    "the Target Optimizer agent is published only under the latest tag and no digest of it is "
    "known: gpufarm reports this default as a documentation value, so synth warns and the stack "
    "refuses to deploy until the tier sets agent_image to a mirrored digest"
)
"""Why a pod with the default agent image carries a tag-only image (checkov CKV_K8S_14, CKV_K8S_15
and CKV_K8S_43; docs/decisions/0042-images-pinned-by-digest.md)."""


def acknowledge_unpinned_agent(
    manifest: dict[str, Any], target_optimizer: TargetOptimizerConfig | None
) -> None:
    """Acknowledge the image findings of the agent sidecar while it is the unpinned default.

    The acknowledgements exist only while `agent_image` is the published `:latest`: once a tier
    pins a digest, they go, and the scan gate checks the pinned image like any other.
    """
    if target_optimizer is None or not target_optimizer.runs_unpinned_agent:
        return
    for check in ("CKV_K8S_14", "CKV_K8S_15", "CKV_K8S_43"):
        scan_acknowledge(manifest, check, UNPINNED_AGENT_REASON)


def vllm_service(
    model: ModelConfig,
    serving: ServingConfig,
    *,
    target_optimizer: TargetOptimizerConfig | None = None,
    share: str | None = None,
) -> dict[str, Any]:
    """ClusterIP Service in front of a model's pods; the load balancer reaches pods through it.

    With `share`, the Service `vllm-<model>-<share>` selects that share's pods only (its own
    target group binds it).

    Port `http` reaches vLLM (in-cluster clients use it). With the Target Optimizer (enabled), a
    second port `data` reaches the agent's data port: the TargetGroupBinding names it, so the
    load balancer's traffic passes the agent. Its target port is a number, not the container
    port's name: named ports of native sidecars reach EndpointSlices only in recent Kubernetes
    releases. Default: `http` only.
    """
    ports: list[dict[str, Any]] = [
        {"name": "http", "port": serving.port, "targetPort": "http", "protocol": "TCP"}
    ]
    if target_optimizer is not None and target_optimizer.enabled:
        port = target_optimizer.data_port
        ports.append({"name": AGENT_DATA_PORT_NAME, "port": port, "targetPort": port, "protocol": "TCP"})
    labels = {**common_labels("vllm"), MODEL_LABEL: model.name}
    if share is not None:
        labels[SHARE_LABEL] = share
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": workload_name(model.name, share),
            "namespace": serving.namespace,
            "labels": labels,
        },
        "spec": {
            "type": "ClusterIP",
            "selector": model_selector(model.name) if share is None else share_selector(model.name, share),
            "ports": ports,
        },
    }
