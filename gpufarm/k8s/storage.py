"""Model weights in pods: static volumes for Mountpoint for S3 and FSx for Lustre, or the Run:ai streamer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpufarm.core.s3 import split_s3_uri
from gpufarm.core.weights import STREAMER_LOAD_FORMAT, streamer_extra_config
from gpufarm.k8s.labels import MODEL_LABEL, common_labels

if TYPE_CHECKING:
    from gpufarm.config.model import ModelConfig, RunaiStreamerConfig

MOUNTPOINT_DRIVER = "s3.csi.aws.com"


def weights_claim_name(model_name: str) -> str:
    """Name of the claim (and volume) holding a model's weights."""
    return f"weights-{model_name}"


def s3_weights_volume(*, model_name: str, namespace: str, s3_uri: str, region: str) -> list[dict[str, Any]]:
    """A read-only Mountpoint for S3 PersistentVolume bound to a claim in `namespace`.

    Mountpoint streams the weights from S3 as vLLM reads them: nothing is copied ahead of time
    and the node's disk is not filled with a second copy.
    """
    bucket, prefix = split_s3_uri(s3_uri)
    name = weights_claim_name(model_name)
    # PersistentVolumes are cluster-scoped: qualify the name with the namespace.
    pv_name = f"{namespace}-{name}"
    labels = {**common_labels("model-store"), MODEL_LABEL: model_name}
    mount_options = ["read-only", "allow-other", f"region {region}"]
    if prefix:
        mount_options.append(f"prefix {prefix}")
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv_name, "labels": labels},
        "spec": {
            "capacity": {"storage": "1Ti"},  # required by the API, ignored by Mountpoint
            "accessModes": ["ReadOnlyMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": namespace, "name": name},
            "mountOptions": mount_options,
            "csi": {
                "driver": MOUNTPOINT_DRIVER,
                "volumeHandle": pv_name,
                "volumeAttributes": {"bucketName": bucket},
            },
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "accessModes": ["ReadOnlyMany"],
            "storageClassName": "",
            "volumeName": pv_name,
            "resources": {"requests": {"storage": "1Ti"}},
        },
    }
    return [pv, pvc]


# --------------------------------------------------------------------------- FSx for Lustre

FSX_DRIVER = "fsx.csi.aws.com"
FSX_CLAIM = "fsx-models"
"""Name of the claim (in each serving namespace) bound to the FSx for Lustre model store."""

FSX_MOUNT_PATH = "/models"
"""Where pods mount model folders: `<FSX_MOUNT_PATH>/<model name>`, each a `subPath` of the claim."""

FSX_DATA_PATH = "/models"
"""The file system directory linked to the model bucket (the data repository association's path).

A dedicated directory rather than `/`: a file system whose first association is at `/` can never
have a second one, and a directory leaves room for, say, an export association for a compile cache.
"""

FSX_MOUNT_OPTIONS = ("ro", "flock")
"""Mount options of the model store volume.

`ro`: the store is a read-only mirror of S3 (nothing is exported back), so every mount is read-only
whatever the pod asks for. `flock`: Lustre's default is to fail lock calls (ENOSYS); with `flock`
the shared locks some loaders take while reading are coherent across nodes instead of failing.
"""


def fsx_sub_path(import_path: str, weights_uri: str) -> str:
    """A model's folder relative to the root of the FSx volume, for a volumeMount `subPath`.

    The data repository association maps `import_path` to :data:`FSX_DATA_PATH`, so
    `fsx_sub_path("s3://b/", "s3://b/meta-llama/X/")` is `"models/meta-llama/X"`.
    Raises `ValueError` when the weights are not a folder under `import_path`.
    """
    bucket, prefix = split_s3_uri(import_path)
    w_bucket, w_prefix = split_s3_uri(weights_uri)
    if w_bucket != bucket or not w_prefix.startswith(prefix) or w_prefix == prefix:
        raise ValueError(
            f"'weights_uri' must be a folder under the import path {import_path!r}, got {weights_uri!r}"
        )
    return f"{FSX_DATA_PATH.strip('/')}/{w_prefix[len(prefix) :].strip('/')}"


FSX_NOMINAL_CAPACITY = "1200Gi"
"""The size the static volume and claim state: the smallest file system, whatever the real one is.

Kubernetes ignores it for a static volume, and it must never change: a bound claim that no
expandable StorageClass provisioned cannot be resized, so tying it to the file system's capacity
would make every FSx growth fail the deploy when the manifest is re-applied.
"""


def fsx_weights_volume(
    *, namespace: str, file_system_id: str, dns_name: str, mount_name: str
) -> list[dict[str, Any]]:
    """A static PersistentVolume for an existing FSx for Lustre file system and its claim in `namespace`.

    Access mode is ReadWriteMany because the FSx CSI driver rejects ReadOnlyMany at mount time
    ("Volume capability not supported"); read-only is enforced by the `ro` mount option instead.
    The volume is retained when the claim goes: the file system outlives any namespace. Both
    state :data:`FSX_NOMINAL_CAPACITY`, not the file system's size, so growing it changes nothing here.
    """
    pv_name = f"{namespace}-{FSX_CLAIM}"
    labels = common_labels("model-store")
    storage = FSX_NOMINAL_CAPACITY
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv_name, "labels": labels},
        "spec": {
            "capacity": {"storage": storage},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": namespace, "name": FSX_CLAIM},
            "mountOptions": list(FSX_MOUNT_OPTIONS),
            "csi": {
                "driver": FSX_DRIVER,
                "volumeHandle": file_system_id,
                "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name},
            },
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": FSX_CLAIM, "namespace": namespace, "labels": labels},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": pv_name,
            "resources": {"requests": {"storage": storage}},
        },
    }
    return [pv, pvc]


# --------------------------------------------------------------------------- Run:ai Model Streamer


def stream_weights(
    pod_spec: dict[str, Any],
    *,
    model: ModelConfig,
    config: RunaiStreamerConfig,
    gpus: int,
    region: str,
    local_path: str,
    service_account: str,
    container: str = "vllm",
) -> None:
    """Make a vLLM pod read its `s3://` weights with the Run:ai Model Streamer instead of a volume.

    In the engine `container`: the weights argument `local_path` becomes the S3 URI itself and
    `--load-format runai_streamer --model-loader-extra-config <json>` follows
    (:func:`gpufarm.core.weights.streamer_extra_config`: the buffer per engine process, the
    readers, distributed reading across `gpus` ranks). vLLM 0.31.0 copies the small files
    (`*.json`, `*.py`, `*.model`, the tokenizer) to `$VLLM_CACHE_ROOT/assets/model_streamer/`, on the
    HOME volume, and streams the `*.safetensors` files from S3 into GPU memory
    (`ModelConfig.maybe_pull_model_tokenizer_for_runai`, `RunaiModelStreamerLoader`). The pod
    runs as `service_account`, whose Pod Identity role may read the model's prefix; the streamer
    resolves those credentials through boto3 (runai-model-streamer-s3 0.15.7
    `credentials/credentials.py`), and `AWS_REGION` names the region its S3 client uses.
    The `weights` volume and its mount go: nothing is mounted. Raises `ValueError` for a model
    whose weights are not `s3://` or a pod without `container` reading `local_path`.
    """
    if not model.is_s3:
        raise ValueError(f"'model' must have s3:// weights to stream them, got {model.weights!r}")
    engine = next((c for c in pod_spec["containers"] if c["name"] == container), None)
    if engine is None or local_path not in engine["args"]:
        raise ValueError(f"'pod_spec' must have a container {container!r} reading {local_path!r}")
    extra = streamer_extra_config(config, memory_gib=model.memory_gib, gpus=gpus)
    engine["args"] = [model.weights if a == local_path else a for a in engine["args"]] + [
        "--load-format",
        STREAMER_LOAD_FORMAT,
        "--model-loader-extra-config",
        extra,
    ]
    engine["env"] = [*engine.get("env", []), {"name": "AWS_REGION", "value": region}]
    engine["volumeMounts"] = [m for m in engine.get("volumeMounts", []) if m["name"] != "weights"]
    pod_spec["volumes"] = [v for v in pod_spec.get("volumes", []) if v["name"] != "weights"]
    pod_spec["serviceAccountName"] = service_account
