"""FSx for Lustre model-store manifests: the static volume, its claim, and model sub-paths."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.k8s.storage import (
    FSX_CLAIM,
    FSX_DATA_PATH,
    FSX_DRIVER,
    FSX_MOUNT_PATH,
    FSX_NOMINAL_CAPACITY,
    fsx_sub_path,
    fsx_weights_volume,
)

from .k8s_schema import validate_core

FS_ID = "fs-0123456789abcdef0"
DNS = f"{FS_ID}.fsx.us-east-1.amazonaws.com"
MOUNT = "abcdefgh"


def volume(namespace: str = "gpufarm") -> list[dict[str, Any]]:
    return fsx_weights_volume(namespace=namespace, file_system_id=FS_ID, dns_name=DNS, mount_name=MOUNT)


@pytest.fixture(scope="module")
def pv() -> dict[str, Any]:
    return volume()[0]


@pytest.fixture(scope="module")
def pvc() -> dict[str, Any]:
    return volume()[1]


# --------------------------------------------------------------------------- volume and claim


def test_renders_a_volume_then_its_claim() -> None:
    assert [(d["apiVersion"], d["kind"]) for d in volume()] == [
        ("v1", "PersistentVolume"),
        ("v1", "PersistentVolumeClaim"),
    ]


@pytest.mark.parametrize("index", [0, 1])
def test_manifests_match_the_kubernetes_schema(index: int) -> None:
    validate_core(volume()[index])


def test_volume_points_the_fsx_driver_at_the_file_system(pv: dict[str, Any]) -> None:
    assert pv["spec"]["csi"] == {
        "driver": FSX_DRIVER,
        "volumeHandle": FS_ID,
        "volumeAttributes": {"dnsname": DNS, "mountname": MOUNT},
    }
    assert FSX_DRIVER == "fsx.csi.aws.com"


def test_volume_is_static_and_retained(pv: dict[str, Any]) -> None:
    assert pv["spec"]["storageClassName"] == ""
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"


def test_access_mode_is_read_write_many_because_the_driver_rejects_read_only_many(
    pv: dict[str, Any], pvc: dict[str, Any]
) -> None:
    assert pv["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]


def test_every_mount_is_read_only_with_coherent_locks(pv: dict[str, Any]) -> None:
    assert pv["spec"]["mountOptions"] == ["ro", "flock"]


def test_capacity_is_nominal_so_growing_the_file_system_changes_nothing(
    pv: dict[str, Any], pvc: dict[str, Any]
) -> None:
    # A bound static claim cannot be resized: its size must not follow the file system's.
    assert pv["spec"]["capacity"] == {"storage": FSX_NOMINAL_CAPACITY}
    assert pvc["spec"]["resources"] == {"requests": {"storage": FSX_NOMINAL_CAPACITY}}


def test_claim_and_volume_are_bound_to_each_other(pv: dict[str, Any], pvc: dict[str, Any]) -> None:
    assert pvc["metadata"]["name"] == FSX_CLAIM == "fsx-models"
    assert pvc["metadata"]["namespace"] == "gpufarm"
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    assert pvc["spec"]["storageClassName"] == ""
    assert pv["spec"]["claimRef"] == {"namespace": "gpufarm", "name": FSX_CLAIM}


def test_volume_name_is_qualified_with_the_namespace(pv: dict[str, Any]) -> None:
    assert pv["metadata"]["name"] == "gpufarm-fsx-models"
    assert "namespace" not in pv["metadata"], "PersistentVolumes are cluster-scoped"
    other = volume(namespace="batch")[0]
    assert other["metadata"]["name"] == "batch-fsx-models"
    assert other["spec"]["claimRef"] == {"namespace": "batch", "name": FSX_CLAIM}


def test_objects_carry_the_model_store_labels(pv: dict[str, Any], pvc: dict[str, Any]) -> None:
    for doc in (pv, pvc):
        assert doc["metadata"]["labels"]["app.kubernetes.io/component"] == "model-store"
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "gpufarm"


# --------------------------------------------------------------------------- sub-paths


def test_models_are_mounted_under_models() -> None:
    assert FSX_MOUNT_PATH == "/models"
    assert FSX_DATA_PATH == "/models"


@pytest.mark.parametrize(
    ("import_path", "weights", "expected"),
    [
        ("s3://b/", "s3://b/meta-llama/X/", "models/meta-llama/X"),
        ("s3://b", "s3://b/meta-llama/X", "models/meta-llama/X"),
        ("s3://b/weights/", "s3://b/weights/Qwen/Qwen3-32B/", "models/Qwen/Qwen3-32B"),
        ("s3://b/weights", "s3://b/weights/Qwen/Qwen3-32B", "models/Qwen/Qwen3-32B"),
    ],
)
def test_sub_path_is_the_weights_folder_under_the_linked_directory(
    import_path: str, weights: str, expected: str
) -> None:
    assert fsx_sub_path(import_path, weights) == expected


@pytest.mark.parametrize(
    ("import_path", "weights"),
    [
        ("s3://b/weights/", "s3://other/weights/m/"),
        ("s3://b/weights/", "s3://b/weights-old/m/"),
        ("s3://b/weights/", "s3://b/elsewhere/m/"),
        ("s3://b/weights/", "s3://b/weights/"),
    ],
)
def test_weights_outside_the_import_path_are_rejected(import_path: str, weights: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        fsx_sub_path(import_path, weights)
    assert str(excinfo.value) == (
        f"'weights_uri' must be a folder under the import path {import_path!r}, got {weights!r}"
    )
