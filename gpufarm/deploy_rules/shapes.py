"""Shapes that many deploy rules share: a name format, a policy's size, a rendered `Fn::Join`.

The rule modules describe what each API enforces; these helpers do the reading of the template,
so that a rule stays a few lines and skips what only CloudFormation can resolve.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from gpufarm.deploy_rules.checks import name_check
from gpufarm.deploy_rules.rule import Check, Resource, Rule, Template, is_unresolved, literal_str, ref_target

KMS_KEY = "AWS::KMS::Key"

TOKEN = "\x00"
"""What an unresolved value becomes in a rendered string: one character that no format allows."""


def resource(resource_type: str, **properties: Any) -> dict[str, Any]:
    """A template resource body, for a rule's `bad` and `good` examples."""
    return {"Type": resource_type, "Properties": properties}


def kms_key(**properties: Any) -> dict[str, Any]:
    """An AWS::KMS::Key for examples, with a key policy that lets the account administer it."""
    statement = {
        "Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
        "Action": "kms:*",
        "Resource": "*",
    }
    return resource(KMS_KEY, KeyPolicy={"Version": "2012-10-17", "Statement": [statement]}, **properties)


def render(value: Any) -> str | None:
    """A string value with every unresolved part replaced by :data:`TOKEN`, else None.

    A literal string is itself; `Fn::Join` and `Fn::Sub` are rendered around their tokens, so a
    rule can still read the literal structure (a JSON body, a name prefix) CloudFormation keeps.
    """
    text = literal_str(value)
    if text is not None:
        return text
    if not isinstance(value, Mapping) or len(value) != 1:
        return None
    if "Fn::Join" in value:
        args = value["Fn::Join"]
        if not (isinstance(args, list) and len(args) == 2 and isinstance(args[1], list)):
            return None
        separator = literal_str(args[0])
        if separator is None:
            return None
        parts = [render(part) for part in args[1]]
        return separator.join(TOKEN if part is None else part for part in parts)
    if "Fn::Sub" in value:
        body = value["Fn::Sub"]
        template = body[0] if isinstance(body, list) and body else body
        if isinstance(template, str):
            return re.sub(r"\$\{[^!][^}]*\}", TOKEN, template)
        return None
    return TOKEN if is_unresolved(value) else None


def without_tokens(value: Any) -> Any:
    """`value` with every unresolved part replaced by an empty string (a lower bound on its size)."""
    if is_unresolved(value):
        return ""
    if isinstance(value, Mapping):
        return {k: without_tokens(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_tokens(v) for v in value]
    return value


def policy_size(document: Any) -> int:
    """Non-whitespace characters of a policy document, counting nothing for unresolved values.

    IAM counts a policy's characters without white space; a token resolves to at least nothing,
    so the count is a lower bound: above a limit, the resolved policy is above it too.
    """
    if isinstance(document, str):
        text = document
    else:
        text = json.dumps(without_tokens(document), separators=(",", ":"), ensure_ascii=False)
    return sum(1 for c in text if not c.isspace())


def policy_bytes(document: Any) -> int:
    """UTF-8 bytes of a policy document in compact JSON, counting nothing for unresolved values."""
    text = (
        document if isinstance(document, str) else json.dumps(without_tokens(document), separators=(",", ":"))
    )
    return len(text.encode("utf-8"))


def name_rule(
    *,
    id: str,
    resource_type: str,
    prop: str,
    pattern: str,
    max_length: int,
    allowed: str,
    doc_url: str,
    bad: str,
    good: str,
    title: str | None = None,
    **other: Any,
) -> Rule:
    """A rule on the format and length of one name property, with examples built from two names.

    `other` holds the other properties the examples need to keep every other rule.
    """
    return Rule(
        id=id,
        resource_type=resource_type,
        title=title or f"{prop} format and length",
        doc_url=doc_url,
        check=name_check(prop, pattern=pattern, max_len=max_length, allowed=allowed),
        bad={"R": resource(resource_type, **{prop: bad}, **other)},
        good={"R": resource(resource_type, **{prop: good}, **other)},
    )


def each(items: Any) -> Iterator[Mapping[str, Any]]:
    """The mappings of a literal list (a property list of objects); nothing for a token."""
    if isinstance(items, list):
        yield from (item for item in items if isinstance(item, Mapping))


def referenced(value: Any, template: Template, resource_type: str) -> Resource | None:
    """The resource of `resource_type` that a `Ref`/`Fn::GetAtt` value points at, if any."""
    target = template.get(ref_target(value))
    return target if target is not None and target.type == resource_type else None


def value_at(res: Resource, path: tuple[str, ...]) -> Any:
    """The value at a property path (`("Source", "EksConfiguration", "ClusterArn")`), or None."""
    value: Any = res.properties
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def arn_check(path: tuple[str, ...], target_type: str, ref_gives: str) -> Check:
    """A check that the property at `path` is an ARN, not a `Ref` to `target_type` (which gives `ref_gives`).

    A literal that does not start with `arn:` is refused too; `Fn::GetAtt ... Arn` passes.
    """
    where = ".".join(path)

    def check(res: Resource, template: Template) -> Iterator[str]:
        value = value_at(res, path)
        literal = literal_str(value)
        if literal is not None and not literal.startswith("arn:"):
            yield f"{where} {literal!r} is not an ARN"
        elif isinstance(value, Mapping) and "Ref" in value and referenced(value, template, target_type):
            yield (
                f"{where} is Ref {value['Ref']}, which gives the {ref_gives}; use "
                f"Fn::GetAtt {value['Ref']}.Arn"
            )

    return check


def getatt_text(value: Any) -> str:
    """`Fn::GetAtt` as `Logical.Attribute`, whichever of its two forms the template uses."""
    getatt = value.get("Fn::GetAtt") if isinstance(value, Mapping) else None
    if isinstance(getatt, list):
        return ".".join(str(part) for part in getatt)
    return str(getatt)


FIFO_SUFFIX = ".fifo"


def fifo_name_check(prop: str, fifo_prop: str, *, max_length: int, kind: str) -> Check:
    """A check on an SNS topic or SQS queue name: letters, digits, '_' and '-', at most
    `max_length` characters, and the `.fifo` suffix exactly when `fifo_prop` is true.
    """

    def check(res: Resource, _template: Template) -> Iterator[str]:
        name = literal_str(res.prop(prop))
        fifo_value = literal_str(res.prop(fifo_prop, False))
        if name is None or fifo_value is None:
            return
        fifo = fifo_value == "true"
        if len(name) > max_length:
            yield f"{prop} {name!r} has {len(name)} characters; the maximum is {max_length}"
        if fifo and not name.endswith(FIFO_SUFFIX):
            yield f"{prop} {name!r} of a FIFO {kind} does not end with {FIFO_SUFFIX!r}"
        stem = name.removesuffix(FIFO_SUFFIX) if fifo else name
        if not re.fullmatch(r"[A-Za-z0-9_-]+", stem):
            suffix = f" (and the {FIFO_SUFFIX!r} suffix of a FIFO {kind})" if fifo else ""
            yield f"{prop} {name!r} is not accepted: letters, digits, '_' and '-' only{suffix}"

    return check


def ref_list_check(prop: str, target_type: str, *, literal_prefix: str, wanted: str) -> Check:
    """A check that each entry of the list `prop` is what `Ref` on `target_type` gives (`wanted`):
    a literal starting with `literal_prefix`, or a `Ref`, never an `Fn::GetAtt` of that type.
    """

    def check(res: Resource, template: Template) -> Iterator[str]:
        entries = res.prop(prop)
        for entry in entries if isinstance(entries, list) else []:
            literal = literal_str(entry)
            if literal is not None and not literal.startswith(literal_prefix):
                yield f"{prop} entry {literal!r} is not a {wanted}"
            elif (
                isinstance(entry, Mapping)
                and "Fn::GetAtt" in entry
                and referenced(entry, template, target_type)
            ):
                yield f"{prop} entry {getatt_text(entry)} is not the {wanted}; use Ref"

    return check
