"""Schema checks for rendered manifests: core kinds with kubernetes-validate, CRDs with jsonschema."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import kubernetes_validate
import pytest
import re2
import yaml
from celpy import celtypes

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
def _crd(file_name: str) -> dict[str, Any]:
    """A CRD file, read once per process with libyaml's safe loader.

    The eight CRD files under ../shared/k8s-crds are 1.5 MB of YAML: PyYAML's pure-Python
    `safe_load` took 2.6 s of CPU to read them, `CSafeLoader` 0.25 s, for equal data (compared
    file by file). Each file used to be read up to three times a process (the index, the schema
    validator, the CEL rules). Falls back to the pure-Python loader where PyYAML was built
    without libyaml.
    """
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data: dict[str, Any] = yaml.load((crd_dir() / file_name).read_text(encoding="utf-8"), Loader=loader)
    return data


@cache
def _crd_validator(file_name: str, version: str) -> jsonschema.protocols.Validator:
    crd = _crd(file_name)
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


# --------------------------------------------------------------------------- CRD lookup by kind


@cache
def crd_index() -> dict[tuple[str, str], tuple[str, str]]:
    """(apiVersion, kind) -> (CRD file, version name), for every served version of every CRD."""
    index: dict[tuple[str, str], tuple[str, str]] = {}
    for path in sorted(crd_dir().glob("*.yaml")):
        crd = _crd(path.name)
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served"):
                index[(f"{group}/{version['name']}", kind)] = (path.name, version["name"])
    return index


def crd_of(manifest: dict[str, Any]) -> tuple[str, str] | None:
    """The (CRD file, version) that defines a manifest's kind, or None for kinds without one here."""
    return crd_index().get((manifest["apiVersion"], manifest["kind"]))


@cache
def _served_schema(file_name: str, version: str) -> dict[str, Any]:
    crd = _crd(file_name)
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version and v.get("served")]
    schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
    return schema


# --------------------------------------------------------------------------- CEL validation rules
#
# The API server evaluates each `x-kubernetes-validations` rule at its schema node, with `self`
# bound to every instance of that node (each array item, each map value), after applying the
# schema's defaults. Rules that reference `oldSelf` are transition rules: on create there is no
# old object, and the API server skips them. See
# https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#validation-rules
#
# The evaluator is cel-python (celpy). The rules use two functions of the Kubernetes CEL
# libraries that celpy does not ship: `<string>.find(<regex>)` (Kubernetes regex library) and
# `<string>.split(<separator>)` (cel-go strings extension); both are listed at
# https://kubernetes.io/docs/reference/using-api/cel/ and registered below with RE2 semantics,
# the regex engine the API server uses. A rule calling any other missing function evaluates to
# an error, which is reported as a violation, never as a pass.


@dataclass(frozen=True)
class CelRule:
    """One `x-kubernetes-validations` rule, compiled, at a schema path ('.spec.tags', '[]' = items)."""

    path: str
    rule: str
    message: str
    program: celpy.Runner | None
    """None for a transition rule (it reads `oldSelf`), which the API server skips on create."""


def _cel_find(value: celtypes.StringType, pattern: celtypes.StringType) -> celtypes.StringType:
    """`<string>.find(<regex>)`: the first match, or '' (k8s.io/apiserver/pkg/cel/library/regex.go)."""
    match = re2.search(str(pattern), str(value))
    return celtypes.StringType(match.group(0) if match else "")


def _cel_split(
    value: celtypes.StringType, separator: celtypes.StringType, limit: celtypes.IntType | None = None
) -> celtypes.ListType:
    """`<string>.split(<sep>[, <n>])` of the cel-go strings extension (n < 0: no limit)."""
    parts = (
        str(value).split(str(separator))
        if limit is None or int(limit) < 0
        else str(value).split(str(separator), max(int(limit) - 1, 0))
        if int(limit) > 0
        else []
    )
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


CEL_FUNCTIONS: dict[str, Any] = {"find": _cel_find, "split": _cel_split}
"""Kubernetes CEL library functions the CRD rules use, on top of celpy's standard ones."""

_CEL_ENV = celpy.Environment()


@cache
def _compile(path: str, rule: str, message: str) -> CelRule:
    ast = _CEL_ENV.compile(rule)
    reads_old_self = any(ast.scan_values(lambda t: getattr(t, "type", None) == "IDENT" and t == "oldSelf"))
    program = None if reads_old_self else _CEL_ENV.program(ast, functions=CEL_FUNCTIONS)
    return CelRule(path=path, rule=rule, message=message, program=program)


def _rules_under(node: dict[str, Any], path: str, out: list[CelRule]) -> None:
    out += [
        _compile(path, rule["rule"], rule.get("message", rule["rule"]))
        for rule in node.get("x-kubernetes-validations", [])
    ]
    for name, child in node.get("properties", {}).items():
        _rules_under(child, f"{path}.{name}", out)
    if isinstance(node.get("items"), dict):
        _rules_under(node["items"], f"{path}[]", out)
    if isinstance(node.get("additionalProperties"), dict):
        _rules_under(node["additionalProperties"], f"{path}{{}}", out)


@cache
def cel_rules(file_name: str, version: str) -> tuple[CelRule, ...]:
    """Every CEL rule of a CRD version, compiled, in schema order."""
    out: list[CelRule] = []
    _rules_under(_served_schema(file_name, version), "", out)
    return tuple(out)


def with_defaults(schema: dict[str, Any], value: Any) -> Any:
    """A copy of `value` with the schema's `default`s filled in, as the API server does before validation."""
    if isinstance(value, dict):
        out = {}
        properties = schema.get("properties", {})
        for name, child in properties.items():
            if name in value:
                out[name] = with_defaults(child, value[name])
            elif "default" in child:
                out[name] = with_defaults(child, copy.deepcopy(child["default"]))
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            if name not in properties:
                out[name] = with_defaults(extra, item) if isinstance(extra, dict) else copy.deepcopy(item)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [with_defaults(schema["items"], item) for item in value]
    return copy.deepcopy(value)


def to_cel(value: Any) -> Any:
    """A JSON value as celpy's CEL value."""
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, list):
        return celtypes.ListType([to_cel(v) for v in value])
    if isinstance(value, dict):
        return celtypes.MapType({celtypes.StringType(k): to_cel(v) for k, v in value.items()})
    if value is None:
        return None
    raise TypeError(f"not a JSON value: {value!r}")


def _evaluate(node: dict[str, Any], value: Any, path: str, instance: str, out: list[str]) -> None:
    if value is None:
        return
    for rule in node.get("x-kubernetes-validations", []):
        compiled = _compile(path, rule["rule"], rule.get("message", rule["rule"]))
        if compiled.program is None:
            continue
        try:
            result = compiled.program.evaluate({"self": to_cel(value)})
        except celpy.CELEvalError as error:
            # The API server reports a rule that fails to evaluate as invalid, never as passed.
            cause = str(error.args[0]).split(" (in activation", 1)[0]
            out.append(f"{instance or '<root>'}: rule errored: {cause} (rule: {compiled.rule})")
            continue
        if not (isinstance(result, celtypes.BoolType) and bool(result)):
            out.append(f"{instance or '<root>'}: {compiled.message} (rule: {compiled.rule})")
    if isinstance(value, dict):
        for name, child in node.get("properties", {}).items():
            if name in value:
                _evaluate(child, value[name], f"{path}.{name}", f"{instance}.{name}".lstrip("."), out)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            for name, item in value.items():
                if name not in node.get("properties", {}):
                    _evaluate(extra, item, f"{path}{{}}", f"{instance}.{name}".lstrip("."), out)
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, item in enumerate(value):
            _evaluate(node["items"], item, f"{path}[]", f"{instance}.{i}".lstrip("."), out)


def cel_errors(manifest: dict[str, Any], file_name: str, version: str) -> list[str]:
    """Every CEL rule of a CRD version that `manifest` breaks on create, as 'path: message (rule: ...)'.

    Defaults are applied first and transition rules (those reading `oldSelf`) are skipped, as
    the API server does when the object is created.
    """
    return schema_cel_errors(_served_schema(file_name, version), manifest)


def schema_cel_errors(schema: dict[str, Any], value: Any) -> list[str]:
    """Every CEL rule of an OpenAPI v3 schema that `value` breaks (defaults applied first)."""
    out: list[str] = []
    _evaluate(schema, with_defaults(schema, value), "", "", out)
    return out


def custom_object_errors(manifest: dict[str, Any]) -> list[str]:
    """Schema (strict) and CEL violations of a custom object against the CRD of its kind."""
    found = crd_of(manifest)
    assert found is not None, f"no CRD under {CRD_DIR} defines {manifest['apiVersion']} {manifest['kind']}"
    return crd_errors(manifest, *found) + cel_errors(manifest, *found)
