"""Schema checks for rendered manifests: core kinds with kubernetes-validate, CRDs with jsonschema."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = REPO_ROOT.parent / "shared" / "k8s-crds"
"""CRDs of the controllers gpufarm targets; present on the team's machines, absent elsewhere."""

KUBERNETES_VERSION = "1.35"
"""Schemas of the cluster version the poc preset pins (kubernetes-validate ships 1.35)."""

_SCHEMA_KEYWORDS_WITH_SUBSCHEMA = ("items", "additionalProperties", "not")
_SCHEMA_KEYWORDS_WITH_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


def validate_core(manifest: dict[str, Any]) -> None:
    """Validate a built-in kind strictly (unknown fields fail) against the Kubernetes schemas."""
    kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


def strictify(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of an OpenAPI v3 CRD schema in which unknown fields are errors.

    The API server prunes unknown fields silently instead of rejecting them, so a plain
    jsonschema check would pass a misspelled field. Every object schema that lists
    `properties`, sets no `additionalProperties` and does not preserve unknown fields gets
    `additionalProperties: false`.
    """
    out = copy.deepcopy(schema)
    _strictify(out)
    return out


def _strictify(node: dict[str, Any]) -> None:
    if (
        "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields", False)
    ):
        node["additionalProperties"] = False
    for child in node.get("properties", {}).values():
        _strictify(child)
    for key in _SCHEMA_KEYWORDS_WITH_SUBSCHEMA:
        if isinstance(node.get(key), dict):
            _strictify(node[key])
    for key in _SCHEMA_KEYWORDS_WITH_SUBSCHEMA_LISTS:
        for child in node.get(key, []):
            _strictify(child)


def crd_dir() -> Path:
    """The shared CRD folder; skips the calling test (visibly) when it is absent."""
    if not CRD_DIR.is_dir():
        pytest.skip(f"CRD schemas not available: {CRD_DIR} does not exist")
    return CRD_DIR


@cache
def _crd_validator(file_name: str, version: str) -> jsonschema.protocols.Validator:
    crd = yaml.safe_load((crd_dir() / file_name).read_text(encoding="utf-8"))
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version and v.get("served")]
    schema = strictify(served["schema"]["openAPIV3Schema"])
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    validator_class.check_schema(schema)
    return validator_class(schema)


def crd_errors(manifest: dict[str, Any], file_name: str, version: str) -> list[str]:
    """Every schema violation of `manifest` against a CRD version, as 'path: message' lines."""
    validator = _crd_validator(file_name, version)
    return [
        f"{'.'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message}"
        for error in sorted(validator.iter_errors(manifest), key=lambda e: list(map(str, e.path)))
    ]


def validate_crd(manifest: dict[str, Any], file_name: str, version: str) -> None:
    """Assert that `manifest` matches a CRD version's schema, unknown fields included."""
    errors = crd_errors(manifest, file_name, version)
    assert not errors, f"{manifest['kind']} does not match {file_name} {version}:\n" + "\n".join(errors)


def nodepool_errors(manifest: dict[str, Any]) -> list[str]:
    """Schema violations of a `karpenter.sh/v1` NodePool."""
    return crd_errors(manifest, "karpenter.sh_nodepools.yaml", "v1")
