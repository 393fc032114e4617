"""What a deploy rule is: a check an AWS API (or Kubernetes, or Helm) makes when CloudFormation
creates or updates a resource, and which no schema-based linter sees.

Each rule names the one resource type it checks, the AWS documentation that states it, and two
minimal templates: one that breaks it and one that keeps it. The tests run every rule on both,
so a rule that cannot fail, or that fails on a correct resource, does not pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

INTRINSIC_KEYS = frozenset({"Ref", "Condition"})
"""Keys that, alone in a mapping, make it an unresolved CloudFormation value (with any `Fn::`)."""


def is_unresolved(value: Any) -> bool:
    """True for a CloudFormation intrinsic (`{"Ref": ...}`, `{"Fn::GetAtt": ...}`, ...).

    A rule skips what it cannot know at synth, as the CDK's own validation skips tokens.
    """
    if not isinstance(value, Mapping) or len(value) != 1:
        return False
    (key,) = value
    return key in INTRINSIC_KEYS or str(key).startswith("Fn::")


def literal_str(value: Any) -> str | None:
    """`value` as a string when it is a literal string or number, else None (unresolved or absent)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str | int | float):
        return str(value)
    return None


def literal_int(value: Any) -> int | None:
    """`value` as an integer when it is a literal integer (or a string of one), else None."""
    text = literal_str(value)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def ref_target(value: Any) -> str | None:
    """The logical ID a `Ref` or `Fn::GetAtt` points at, else None."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return None
    if "Ref" in value and isinstance(value["Ref"], str):
        return value["Ref"]
    getatt = value.get("Fn::GetAtt")
    if isinstance(getatt, list) and getatt and isinstance(getatt[0], str):
        return getatt[0]
    if isinstance(getatt, str):
        return getatt.split(".", 1)[0]
    return None


def key_values(items: Any, *, key: str = "Key", value: str = "Value") -> dict[str, Any]:
    """A list of `{Key, Value}` mappings (attributes, tags) as a dict; unresolved keys are left out."""
    out: dict[str, Any] = {}
    if not isinstance(items, list):
        return out
    for item in items:
        if isinstance(item, Mapping):
            name = literal_str(item.get(key))
            if name is not None:
                out[name] = item.get(value)
    return out


@dataclass(frozen=True)
class Resource:
    """One resource of a template, as the rules see it."""

    logical_id: str
    type: str
    properties: Mapping[str, Any]
    depends_on: tuple[str, ...] = ()
    """The logical IDs in the resource's `DependsOn`."""

    def prop(self, name: str, default: Any = None) -> Any:
        """A top-level property, or `default` when the template leaves it out."""
        return self.properties.get(name, default)


@dataclass(frozen=True)
class Template:
    """A synthesized template, for rules that look beyond one resource (counts per parent, refs)."""

    resources: Mapping[str, Resource]

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> Template:
        """The rules' view of a template document (its `Resources`)."""
        raw = document.get("Resources", {}) or {}
        return cls(
            resources={
                lid: Resource(
                    logical_id=lid,
                    type=str(body.get("Type", "")),
                    properties=body.get("Properties", {}) or {},
                    depends_on=_depends_on(body.get("DependsOn")),
                )
                for lid, body in raw.items()
                if isinstance(body, Mapping)
            }
        )

    def of_type(self, resource_type: str) -> Iterator[Resource]:
        """The resources of one type, in template order."""
        return (r for r in self.resources.values() if r.type == resource_type)

    def get(self, logical_id: str | None) -> Resource | None:
        """The resource with this logical ID, if the template has it."""
        return self.resources.get(logical_id) if logical_id else None


def _depends_on(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(v for v in value if isinstance(v, str))
    return ()


Check = Callable[[Resource, Template], Iterator[str]]
"""Yields one message per breach of the rule by `resource` (nothing when it keeps it)."""


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One rule an AWS API enforces on one resource type at create or update time.

    `bad` and `good` are the `Resources` of two minimal templates: the first breaks this rule,
    the second keeps it (and every other rule).
    """

    id: str
    resource_type: str
    title: str
    doc_url: str
    check: Check
    bad: Mapping[str, Any] = field(repr=False)
    good: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True, kw_only=True)
class Violation:
    """A breach of a rule by one resource of one template."""

    rule: Rule
    logical_id: str
    message: str

    def render(self) -> str:
        """One line: the resource, the rule and what is wrong, with the documentation link."""
        rule = self.rule
        return f"{self.logical_id} ({rule.resource_type}): [{rule.id}] {self.message} -- {rule.doc_url}"
