"""Shapes the network and compute rules repeat: names, tags, "exactly one of", CIDRs, port ranges.

Each helper builds a `Check` (or reads a property) and skips what CloudFormation resolves at
deploy (`is_unresolved`), so a rule built from it never judges a token.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gpufarm.deploy_rules.rule import Check, Resource, Template, is_unresolved, literal_int, literal_str

NO_VALUE = {"Ref": "AWS::NoValue"}


def is_set(value: Any) -> bool:
    """True when a property is given (`AWS::NoValue` counts as absent)."""
    return value is not None and value != NO_VALUE


def items(value: Any) -> list[Any]:
    """A list property's items, or nothing when it is absent or unresolved."""
    return list(value) if isinstance(value, list) else []


def literal_strs(value: Any) -> list[str]:
    """The literal strings of a list property (tokens left out)."""
    return [s for s in (literal_str(v) for v in items(value)) if s is not None]


def network(value: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """A literal CIDR block as a network (host bits allowed), else None."""
    text = literal_str(value)
    if text is None or "/" not in text:
        return None
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def name_check(prop: str, *, max_len: int, pattern: str, allowed: str, min_len: int = 1) -> Check:
    """A name property: its length in characters and the characters the API accepts.

    `pattern` is matched against the whole value; `allowed` says it in words for the message.
    """
    compiled = re.compile(pattern)

    def check(resource: Resource, _: Template) -> Iterator[str]:
        value = literal_str(resource.prop(prop))
        if value is None:
            return
        if not min_len <= len(value) <= max_len:
            yield f"{prop} {value!r} is {len(value)} characters; the API accepts {min_len} to {max_len}"
        if not compiled.fullmatch(value):
            yield f"{prop} {value!r}: {allowed}"

    return check


def exactly_one_check(props: Sequence[str], *, what: str) -> Check:
    """Exactly one of `props` is set (`AWS::NoValue` counts as not set)."""

    def check(resource: Resource, _: Template) -> Iterator[str]:
        given = [p for p in props if is_set(resource.prop(p))]
        if len(given) != 1:
            found = ", ".join(given) if given else "none"
            yield f"{what}: give exactly one of {', '.join(props)} (found {found})"

    return check


TAG_LIMIT = 50
TAG_KEY_MAX = 128
TAG_VALUE_MAX = 256


def _tag_pairs(tags: Any) -> list[tuple[Any, Any]] | None:
    if isinstance(tags, list):
        return [(t.get("Key"), t.get("Value")) for t in tags if isinstance(t, dict)]
    if isinstance(tags, dict) and not is_unresolved(tags):
        return list(tags.items())
    return None


def tags_check(resource: Resource, _: Template) -> Iterator[str]:
    """At most 50 user tags; keys of 1-128 and values of up to 256 characters; no `aws:` keys."""
    pairs = _tag_pairs(resource.prop("Tags"))
    if pairs is None:
        return
    if len(pairs) > TAG_LIMIT:
        yield f"{len(pairs)} tags; a resource takes at most {TAG_LIMIT}"
    for key, value in pairs:
        k, v = literal_str(key), literal_str(value)
        if k is not None and not 1 <= len(k) <= TAG_KEY_MAX:
            yield f"tag key {k[:40]!r}... is {len(k)} characters; at most {TAG_KEY_MAX}"
        if k is not None and k.lower().startswith("aws:"):
            yield f"tag key {k!r}: the aws: prefix is reserved for AWS"
        if k is not None and v is not None and len(v) > TAG_VALUE_MAX:
            yield f"tag {k!r} has a value of {len(v)} characters; at most {TAG_VALUE_MAX}"


def size_order_problems(sizes: Any, names: tuple[str, str, str]) -> Iterator[str]:
    """A group's (minimum, desired, maximum) sizes, read from `sizes` under `names`: in order."""
    if not isinstance(sizes, Mapping):
        return
    low_name, want_name, high_name = names
    low, want, high = (literal_int(sizes.get(k)) for k in names)
    if low is not None and high is not None and low > high:
        yield f"{low_name} {low} is above {high_name} {high}"
    if want is not None and low is not None and want < low:
        yield f"{want_name} {want} is below {low_name} {low}"
    if want is not None and high is not None and want > high:
        yield f"{want_name} {want} is above {high_name} {high}"


def port_range_problems(rule: Any, where: str) -> Iterator[str]:
    """A tcp/udp security-group rule's port range: 0-65535, FromPort no higher than ToPort.

    API_IpPermission: FromPort/ToPort are "the start/end of the port range" for TCP and UDP; the
    API answers "TCP/UDP port (-1) out of range" outside 0-65535 (boto/boto3#336). cfn-lint
    already requires both ports for tcp/udp/icmp (E3687), so a missing port is not repeated here.
    """
    if not isinstance(rule, dict):
        return
    protocol = (literal_str(rule.get("IpProtocol")) or "").lower()
    low, high = literal_int(rule.get("FromPort")), literal_int(rule.get("ToPort"))
    if protocol not in {"tcp", "udp", "6", "17"} or low is None or high is None:
        return
    if not (0 <= low <= 65535 and 0 <= high <= 65535):
        yield f"{where}: {protocol} ports {low}-{high} out of 0-65535"
    elif low > high:
        yield f"{where}: FromPort {low} is above ToPort {high}"
