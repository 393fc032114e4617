"""Reading a cloud assembly: its stacks, with the shape of `manifest.json` and templates checked.

`gpufarm review` and `gpufarm cost --assembly` read folders that `cdk synth` or `gpufarm synth`
wrote, or that a user points at by mistake; :func:`read_assembly` is the one reader of both,
and :class:`AssemblyError` its one error. The manifest is the cloud assembly schema's
`AssemblyManifest`: `artifacts` maps an artifact ID to an `ArtifactManifest` (`type`,
`environment`, `properties`); a stack's properties hold `templateFile`, "a file relative to the
assembly root", a nested assembly's `directoryName` (aws/aws-cdk,
packages/@aws-cdk/cloud-assembly-schema/lib/cloud-assembly/*.ts). Anything else is reported as a
:class:`ManifestShapeError` naming the key, instead of failing later inside a reader.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STACK_ARTIFACT = "aws:cloudformation:stack"
NESTED_ASSEMBLY = "cdk:cloud-assembly"

_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}


class AssemblyError(ValueError):
    """A folder that is not a readable cloud assembly."""


@dataclass(frozen=True, kw_only=True)
class AssemblyStack:
    """One CloudFormation stack of a cloud assembly."""

    artifact_id: str
    """The stack's key under the manifest's `artifacts`."""
    name: str
    """The stack's name: `properties.stackName`, else its display name, else its artifact ID."""
    region: str
    """The region of its `environment` (`aws://account/region`), us-east-1 when it has none."""
    template: dict[str, Any]


class ManifestShapeError(ValueError):
    """A manifest or template that is JSON but not of the shape the cloud assembly schema gives."""


def json_type(value: object) -> str:
    """The JSON name of a parsed value's type ('an object', 'an array', 'a number', ...)."""
    return _JSON_TYPES.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__
    )


def read_json(path: Path) -> Any:
    """The JSON document in `path`; raises OSError, or ValueError with a one-line reason."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise ValueError("not a cloud assembly file (nested too deeply to read)") from None


def artifacts_of(manifest: object) -> list[tuple[str, dict[str, Any]]]:
    """(artifact ID, artifact) of a parsed manifest, each artifact's `properties` an object.

    Raises :class:`ManifestShapeError` naming the first key whose value has the wrong type.
    """
    if not isinstance(manifest, dict):
        raise ManifestShapeError(f"must be a JSON object, got {json_type(manifest)}")
    artifacts = manifest.get("artifacts")
    artifacts = {} if artifacts is None else artifacts
    if not isinstance(artifacts, dict):
        raise ManifestShapeError(f"'artifacts' must be an object, got {json_type(artifacts)}")
    out: list[tuple[str, dict[str, Any]]] = []
    for artifact_id, artifact in artifacts.items():
        if not isinstance(artifact, dict):
            raise ManifestShapeError(f"artifacts.{artifact_id} must be an object, got {json_type(artifact)}")
        props = artifact.get("properties")
        props = {} if props is None else props
        if not isinstance(props, dict):
            raise ManifestShapeError(
                f"artifacts.{artifact_id}.properties must be an object, got {json_type(props)}"
            )
        required = {STACK_ARTIFACT: "templateFile", NESTED_ASSEMBLY: "directoryName"}.get(
            str(artifact.get("type"))
        )
        if required is not None and not (isinstance(props.get(required), str) and props[required]):
            raise ManifestShapeError(
                f"artifacts.{artifact_id}.properties.{required} must be a file name, "
                f"got {json_type(props.get(required))}"
            )
        out.append((str(artifact_id), {**artifact, "properties": props}))
    return out


def check_template(template: object) -> dict[str, Any]:
    """`template` when it is a JSON object whose `Resources` (if any) maps IDs to objects."""
    if not isinstance(template, dict):
        raise ManifestShapeError(f"must be a JSON object, got {json_type(template)}")
    resources = template.get("Resources")
    if resources is not None:
        if not isinstance(resources, dict):
            raise ManifestShapeError(f"'Resources' must be an object, got {json_type(resources)}")
        for logical_id, resource in resources.items():
            if not isinstance(resource, dict):
                raise ManifestShapeError(
                    f"Resources.{logical_id} must be an object, got {json_type(resource)}"
                )
    metadata = template.get("Metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ManifestShapeError(f"'Metadata' must be an object, got {json_type(metadata)}")
    return template


def read_assembly(path: str | Path, *, _seen: frozenset[Path] = frozenset()) -> list[AssemblyStack]:
    """Every stack of the cloud assembly in `path`, nested assemblies (stages) included.

    Each folder's artifacts are read in order of their IDs; a nested assembly's stacks come in
    its artifact's place. Raises :class:`AssemblyError` naming the file and what is wrong when
    the folder, its manifest or a template is missing, unreadable, not JSON or not of the cloud
    assembly's shape, or when a nested assembly leads back to a folder already read.
    """
    folder = Path(path)
    manifest_file = folder / "manifest.json"
    if not folder.is_dir():
        raise AssemblyError(f"{str(folder)!r} is not a folder")
    if not manifest_file.is_file():
        raise AssemblyError(
            f"{str(folder)!r} is not a cloud assembly (no manifest.json); give the folder `cdk synth` "
            "or `gpufarm synth` wrote (cdk.out)"
        )
    if folder.resolve() in _seen:
        raise AssemblyError(f"{str(folder)!r}: a nested assembly leads back to a folder already read")
    seen = _seen | {folder.resolve()}
    try:
        artifacts = artifacts_of(read_json(manifest_file))
    except OSError as exc:
        raise AssemblyError(f"cannot read {str(manifest_file)!r}: {exc.strerror or exc}") from None
    except ValueError as exc:  # not JSON, or not a manifest's shape
        raise AssemblyError(f"cannot read {str(manifest_file)!r}: {exc}") from None
    stacks: list[AssemblyStack] = []
    for artifact_id, artifact in sorted(artifacts, key=lambda item: item[0]):
        kind = artifact.get("type")
        props = artifact["properties"]
        if kind == NESTED_ASSEMBLY:
            stacks.extend(read_assembly(folder / str(props["directoryName"]), _seen=seen))
        if kind != STACK_ARTIFACT:
            continue
        template_file = folder / str(props["templateFile"])
        try:
            template = check_template(read_json(template_file))
        except OSError as exc:
            raise AssemblyError(
                f"cannot read the template of {artifact_id!r} ({str(template_file)!r}): {exc.strerror or exc}"
            ) from None
        except ValueError as exc:  # not JSON, or not a template's shape
            raise AssemblyError(
                f"cannot read the template of {artifact_id!r} ({str(template_file)!r}): {exc}"
            ) from None
        environment = str(artifact.get("environment", ""))
        region = environment.rsplit("/", 1)[-1] if environment.startswith("aws://") else ""
        stacks.append(
            AssemblyStack(
                artifact_id=artifact_id,
                name=str(props.get("stackName") or artifact.get("displayName") or artifact_id),
                region=region if region and region != "unknown-region" else "us-east-1",
                template=template,
            )
        )
    return stacks
