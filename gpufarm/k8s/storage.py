"""Model-weight volumes: a static PersistentVolume and claim per model read from S3 by Mountpoint."""

from __future__ import annotations

from typing import Any

from gpufarm.k8s.labels import MODEL_LABEL, common_labels

MOUNTPOINT_DRIVER = "s3.csi.aws.com"


def weights_claim_name(model_name: str) -> str:
    """Name of the claim (and volume) holding a model's weights."""
    return f"weights-{model_name}"


def split_s3_uri(uri: str) -> tuple[str, str]:
    """'s3://bucket/a/b' -> ('bucket', 'a/b/'); the prefix is '' or ends with '/'."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    prefix = prefix.strip("/")
    return bucket, f"{prefix}/" if prefix else ""


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
