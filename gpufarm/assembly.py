"""The shape of a cloud assembly's `manifest.json` and templates, checked before anything reads them.

`gpufarm review` and `gpufarm cost --assembly` read folders that `cdk synth` or `gpufarm synth`
wrote, or that a user points at by mistake. The manifest is the cloud assembly schema's
`AssemblyManifest`: `artifacts` maps an artifact ID to an `ArtifactManifest` (`type`,
`environment`, `properties`); a stack's properties hold `templateFile`, "a file relative to the
assembly root", a nested assembly's `directoryName` (aws/aws-cdk,
packages/@aws-cdk/cloud-assembly-schema/lib/cloud-assembly/*.ts). Anything else is reported as a
:class:`ManifestShapeError` naming the key, instead of failing later inside a reader.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

STACK_ARTIFACT = "aws:cloudformation:stack"
NESTED_ASSEMBLY = "cdk:cloud-assembly"

_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}


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
