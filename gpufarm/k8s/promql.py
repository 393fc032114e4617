"""Every PromQL expression a synthesized template carries, and the metric names one reads.

:func:`template_expressions` is the one collector: tests run a real PromQL parser (promtool) over
what it returns and check each metric name against the pinned upstream releases, so a query
added anywhere in a template cannot escape the check. It reads

* the rules of every `AWS::APS::RuleGroupsNamespace` (`Data`, the rules file);
* the `query` of every Prometheus trigger of a KEDA `ScaledObject` applied through the kubectl
  provider (`Custom::AWSCDK-EKS-KubernetesResource` `Manifest`);
* every `expr` of a JSON document held in a string property (dashboards as code: a Grafana
  dashboard's panel targets);

and any source added to :data:`EXTRACTORS`. CloudFormation tokens inside a string become
:data:`TOKEN_TEXT` first, so a document that embeds an ARN still parses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

RULE_GROUPS_NAMESPACE = "AWS::APS::RuleGroupsNamespace"
KUBERNETES_RESOURCE = "Custom::AWSCDK-EKS-KubernetesResource"
TOKEN_TEXT = "TOKEN"
"""What an unresolved CloudFormation value becomes in a flattened string."""


@dataclass(frozen=True)
class Expression:
    """One PromQL expression and where it came from (`<logical id>: <what>`)."""

    source: str
    expr: str


def flatten(value: Any) -> str | None:
    """A string property with every intrinsic (`Ref`, `Fn::GetAtt`, ...) replaced by TOKEN_TEXT."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and len(value) == 1:
        (key,) = value
        if key == "Fn::Join":
            separator, parts = value[key]
            texts = [flatten(part) for part in parts]
            return str(separator).join(TOKEN_TEXT if t is None else t for t in texts)
        if key == "Fn::Sub":
            body = value[key]
            template = body[0] if isinstance(body, list) else body
            return re.sub(r"\$\{[^!][^}]*\}", TOKEN_TEXT, template) if isinstance(template, str) else None
        if key == "Ref" or str(key).startswith("Fn::"):
            return TOKEN_TEXT
    return None


def rules_expressions(source: str, data: str) -> Iterator[Expression]:
    """The `expr` of every rule of a Prometheus rules file."""
    document = yaml.safe_load(data) or {}
    for group in document.get("groups", []):
        for rule in group.get("rules", []):
            name = rule.get("alert") or rule.get("record")
            yield Expression(f"{source}: {group.get('name')}/{name}", str(rule["expr"]))


def _rule_groups(logical_id: str, properties: Mapping[str, Any]) -> Iterator[Expression]:
    data = flatten(properties.get("Data"))
    if data is not None:
        yield from rules_expressions(logical_id, data)


def _scaled_objects(logical_id: str, properties: Mapping[str, Any]) -> Iterator[Expression]:
    text = flatten(properties.get("Manifest"))
    if text is None:
        return
    for manifest in json.loads(text):
        if manifest.get("kind") != "ScaledObject":
            continue
        name = manifest["metadata"]["name"]
        for trigger in manifest.get("spec", {}).get("triggers", []):
            if trigger.get("type") == "prometheus":
                yield Expression(f"{logical_id}: ScaledObject/{name}", str(trigger["metadata"]["query"]))


def _exprs_in(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key == "expr" and isinstance(item, str):
                yield item
            else:
                yield from _exprs_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from _exprs_in(item)


def _json_documents(logical_id: str, properties: Mapping[str, Any]) -> Iterator[Expression]:
    def strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
        text = flatten(value)
        if text is not None:
            yield path, text
        elif isinstance(value, Mapping):
            for key, item in value.items():
                yield from strings(item, f"{path}.{key}" if path else str(key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from strings(item, f"{path}[{i}]")

    for path, text in strings(properties, ""):
        if '"expr"' not in text:
            continue
        try:
            document = json.loads(text)
        except ValueError:
            continue
        for expr in _exprs_in(document):
            yield Expression(f"{logical_id}: {path}", expr)


Extractor = Callable[[str, Mapping[str, Any]], Iterator[Expression]]

EXTRACTORS: dict[str, Extractor] = {
    RULE_GROUPS_NAMESPACE: _rule_groups,
    KUBERNETES_RESOURCE: _scaled_objects,
}
"""Resource type -> what reads its PromQL. Every other resource's JSON string properties are
searched for `expr` keys (:func:`template_expressions`)."""


def template_expressions(template: Mapping[str, Any]) -> list[Expression]:
    """Every PromQL expression of a synthesized template, in template order."""
    found: list[Expression] = []
    for logical_id, resource in (template.get("Resources") or {}).items():
        properties = resource.get("Properties") or {}
        extractor = EXTRACTORS.get(resource.get("Type", ""), _json_documents)
        found.extend(extractor(logical_id, properties))
    return found


# --------------------------------------------------------------------------- metric names

_KEYWORDS = frozenset(
    {
        "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
        "and", "or", "unless", "atan2", "inf", "nan",
    }
)  # fmt: skip
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_LABEL_LIST = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENTIFIER = re.compile(r"(?<![\w:.])([A-Za-z_:][\w:]*)(\s*\()?")
_NAME_MATCHER = re.compile(r'__name__\s*=\s*"([^"]+)"')


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (vector selectors, and `__name__="..."`).

    A lexer over the expression: strings, label matchers, ranges and label lists are removed,
    then every identifier not followed by `(` (a function or aggregation) and not a keyword is
    a metric name. The expression must already parse (promtool checks that).
    """
    names = set(_NAME_MATCHER.findall(expr))
    text = _MATCHERS.sub(" ", _STRING.sub('""', expr))
    text = _RANGE.sub(" ", _LABEL_LIST.sub(" ", text))
    for match in _IDENTIFIER.finditer(text):
        word, call = match.group(1), match.group(2)
        if call or word.lower() in _KEYWORDS:
            continue
        names.add(word)
    return names
