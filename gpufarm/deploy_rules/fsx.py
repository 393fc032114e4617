"""Amazon FSx for Lustre: rules the FSx API enforces on file systems and data repository associations."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_int, literal_str, ref_target

FILE_SYSTEM = "AWS::FSx::FileSystem"
ASSOCIATION = "AWS::FSx::DataRepositoryAssociation"

_API = "https://docs.aws.amazon.com/fsx/latest/APIReference/"

_SSD_STEP_TYPES = {"SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"}
# CreateFileSystemLustreConfiguration / UpdateFileSystemLustreConfiguration, PerUnitStorageThroughput:
# "For PERSISTENT_1 SSD ... 50, 100, and 200 MB/s/TiB. For PERSISTENT_2 SSD ... 125, 250, 500, and 1000."
_THROUGHPUT = {"PERSISTENT_1": {50, 100, 200}, "PERSISTENT_2": {125, 250, 500, 1000}}


def _lustre(resource: Resource) -> tuple[dict[str, Any], str | None, str]:
    config = resource.prop("LustreConfiguration")
    config = config if isinstance(config, dict) else {}
    deployment = literal_str(config.get("DeploymentType")) or "SCRATCH_1"
    storage = literal_str(resource.prop("StorageType")) or "SSD"
    return config, deployment, storage


def _storage_capacity(resource: Resource, _: Template) -> Iterator[str]:
    # CreateFileSystem, StorageCapacity: "For SCRATCH_2, PERSISTENT_2, and PERSISTENT_1
    # deployment types using SSD storage type, the valid values are 1200 GiB, 2400 GiB, and
    # increments of 2400 GiB."
    if literal_str(resource.prop("FileSystemType")) != "LUSTRE":
        return
    _config, deployment, storage = _lustre(resource)
    capacity = literal_int(resource.prop("StorageCapacity"))
    if capacity is None or storage != "SSD" or deployment not in _SSD_STEP_TYPES:
        return
    if capacity != 1200 and (capacity <= 0 or capacity % 2400):
        yield f"StorageCapacity {capacity} GiB: {deployment} SSD takes 1200, 2400 or a multiple of 2400"


def _throughput(resource: Resource, _: Template) -> Iterator[str]:
    if literal_str(resource.prop("FileSystemType")) != "LUSTRE":
        return
    config, deployment, storage = _lustre(resource)
    value = literal_int(config.get("PerUnitStorageThroughput"))
    if value is None or storage != "SSD" or deployment not in _THROUGHPUT:
        return
    allowed = _THROUGHPUT[deployment]
    if value not in allowed:
        choices = ", ".join(map(str, sorted(allowed)))
        yield f"PerUnitStorageThroughput {value}: {deployment} SSD takes {choices}"


_S3_PATH = re.compile(r"s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?")


def _paths(resource: Resource, _: Template) -> Iterator[str]:
    # DataRepositoryAssociation, FileSystemPath: "The leading forward slash in the name is
    # required." DataRepositoryPath: "the path can be an S3 bucket or prefix in the format
    # s3://bucket-name/prefix/".
    fs_path = literal_str(resource.prop("FileSystemPath"))
    if fs_path is not None and not fs_path.startswith("/"):
        yield f"FileSystemPath {fs_path!r} must begin with '/'"
    repo = literal_str(resource.prop("DataRepositoryPath"))
    if repo is not None and not _S3_PATH.fullmatch(repo):
        yield f"DataRepositoryPath {repo!r} is not s3://bucket-name/prefix/"


def _normal(path: str) -> str:
    return path.rstrip("/") + "/"


def _overlap(resource: Resource, template: Template) -> Iterator[str]:
    # FileSystemPath: "Two data repository associations cannot have overlapping file system
    # paths. For example, if a data repository is associated with file system path /ns1/, then
    # you cannot link another data repository with file system path /ns1/ns2."
    fs, path = ref_target(resource.prop("FileSystemId")), literal_str(resource.prop("FileSystemPath"))
    if fs is None or path is None:
        return
    for other in template.of_type(ASSOCIATION):
        if other.logical_id == resource.logical_id:
            return
        theirs = literal_str(other.prop("FileSystemPath"))
        if ref_target(other.prop("FileSystemId")) != fs or theirs is None:
            continue
        a, b = _normal(path), _normal(theirs)
        if a.startswith(b) or b.startswith(a):
            yield f"FileSystemPath {path} overlaps {other.logical_id}'s {theirs} on the same file system"


def _fs(capacity: int, throughput: int) -> dict[str, Any]:
    return {
        "Fs": {
            "Type": FILE_SYSTEM,
            "Properties": {
                "FileSystemType": "LUSTRE",
                "StorageType": "SSD",
                "StorageCapacity": capacity,
                "SubnetIds": ["subnet-0123456789abcdef0"],
                "LustreConfiguration": {
                    "DeploymentType": "PERSISTENT_2",
                    "PerUnitStorageThroughput": throughput,
                },
            },
        }
    }


def _dra(path: str, repository: str = "s3://gpufarm-models/weights/") -> dict[str, Any]:
    return {
        "Type": ASSOCIATION,
        "Properties": {
            "FileSystemId": {"Ref": "Fs"},
            "FileSystemPath": path,
            "DataRepositoryPath": repository,
        },
    }


RULES: tuple[Rule, ...] = (
    Rule(
        id="FSX-LUSTRE-STORAGE-CAPACITY",
        resource_type=FILE_SYSTEM,
        title="Lustre SSD (scratch 2, persistent) capacity is 1200, 2400 or a multiple of 2400 GiB",
        doc_url=_API + "API_CreateFileSystem.html",
        check=_storage_capacity,
        bad=_fs(3600, 250),
        good=_fs(4800, 250),
    ),
    Rule(
        id="FSX-LUSTRE-THROUGHPUT",
        resource_type=FILE_SYSTEM,
        title="Lustre throughput per TiB is 125/250/500/1000 (PERSISTENT_2) or 50/100/200 (PERSISTENT_1)",
        doc_url=_API + "API_CreateFileSystemLustreConfiguration.html",
        check=_throughput,
        bad=_fs(1200, 200),
        good=_fs(1200, 1000),
    ),
    Rule(
        id="FSX-DRA-PATHS",
        resource_type=ASSOCIATION,
        title="FileSystemPath begins with / and DataRepositoryPath is s3://bucket/prefix",
        doc_url=_API + "API_DataRepositoryAssociation.html",
        check=_paths,
        bad={**_fs(1200, 250), "Dra": _dra("models", "gpufarm-models/weights")},
        good={**_fs(1200, 250), "Dra": _dra("/models")},
    ),
    Rule(
        id="FSX-DRA-NESTED-PATHS",
        resource_type=ASSOCIATION,
        title="Associations of one file system do not have overlapping file system paths",
        doc_url=_API + "API_DataRepositoryAssociation.html",
        check=_overlap,
        bad={**_fs(1200, 250), "A": _dra("/models/"), "B": _dra("/models/llama", "s3://gpufarm-llama/")},
        good={**_fs(1200, 250), "A": _dra("/models/"), "B": _dra("/datasets", "s3://gpufarm-data/")},
    ),
)
