"""Documentation values left in a tier file, and choices that open a tier to the whole internet.

A tier file copied from a preset or a guide can keep values that were only ever examples: an
AWS documentation account, an address range reserved for documentation, an all-zero resource
ID, an example bucket. They synthesize, and then fail at deploy (or, worse, point at someone
else's resource). :func:`find_placeholders` recognises them in every string field of the parts
a tier builds, from the tables below; `gpufarm synth` and `cdk synth` warn about each,
`gpufarm preflight` fails a row per field, and the stack gets a CloudFormation rule that refuses
to deploy (:mod:`gpufarm.stacks.tier`).

What counts as a documentation value (the rules, and their sources):

- **Accounts**: the IDs AWS's own documentation uses in examples: 123456789012 (the IAM and
  most service guides, e.g. https://docs.aws.amazon.com/r53recovery/latest/dg/security_iam_region_switch_cross_account.html),
  012345678901 (https://docs.aws.amazon.com/accounts/latest/reference/manage-acct-identifiers.html),
  111122223333 and 444455556666 (awsdocs/amazon-eks-user-guide
  latest/ug/manage-access/aws-access/cross-account-access.adoc and across the service guides);
  more generally three blocks of one repeated digit each (111122223333, 444455556666,
  777788889999), and twelve equal digits (000000000000). AWS publishes no single list of its
  example accounts that could be found; the rule above covers every form seen in its guides.
- **Address ranges**: the IPv4 blocks RFC 5737 reserves for documentation, 192.0.2.0/24
  (TEST-NET-1), 198.51.100.0/24 (TEST-NET-2) and 203.0.113.0/24 (TEST-NET-3)
  (https://www.rfc-editor.org/rfc/rfc5737#section-3), and the IPv6 prefix RFC 3849 reserves,
  2001:db8::/32 (https://www.rfc-editor.org/rfc/rfc3849). A CIDR inside or around one counts.
- **Resource IDs**: an ID whose hex digits are all 0, apart from at most two (a UUID's version
  and variant digits, as in `00000000-0000-4000-8000-000000000000`), after its type prefix
  (`cr-`, `sg-`) or as the last part of an ARN.
- **Buckets**: an `s3://` bucket with a label (between dots or hyphens) `example` or `examples`,
  after the names RFC 2606 reserves for documentation (https://www.rfc-editor.org/rfc/rfc2606),
  and the buckets the shipped presets name as examples (:data:`PRESET_EXAMPLE_BUCKETS`). S3
  bucket names are global, so a preset's example name can only ever be one account's bucket.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpufarm.config.errors import ConfigIssue
from gpufarm.config.image_pins import unpinned_images
from gpufarm.config.model import ModelStoreKind, OpenChoiceConfig, TierConfig

DOCUMENTATION_ACCOUNTS = frozenset({"123456789012", "012345678901", "111122223333", "444455556666"})
"""Account IDs AWS's guides use in examples (sources in the module docstring)."""

_BLOCK_ACCOUNT = re.compile(r"^(\d)\1{3}(\d)\2{3}(\d)\3{3}$")
"""Three blocks of four equal digits: the pattern of AWS's second- and third-party examples."""

DOCUMENTATION_NETWORKS: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...] = (
    (ipaddress.ip_network("192.0.2.0/24"), "RFC 5737 TEST-NET-1"),
    (ipaddress.ip_network("198.51.100.0/24"), "RFC 5737 TEST-NET-2"),
    (ipaddress.ip_network("203.0.113.0/24"), "RFC 5737 TEST-NET-3"),
    (ipaddress.ip_network("2001:db8::/32"), "RFC 3849 documentation prefix"),
)
"""Address blocks reserved for documentation, with the name their RFC gives them."""

PRESET_EXAMPLE_BUCKETS = frozenset({"gpufarm-production-models", "gpufarm-enterprise-models"})
"""The buckets the production and enterprise presets name as examples to replace."""

EXAMPLE_BUCKET_LABELS = frozenset({"example", "examples"})
"""A bucket with one of these labels (split at '.' and '-') is an example bucket."""

OPEN_CIDRS = frozenset({"0.0.0.0/0", "::/0"})
"""Every address: a list holding one of these admits the whole internet."""

MIN_REASON_CHARS = 20
"""The shortest reason an open choice may give."""

PLACEHOLDER_WORDS = frozenset({"todo", "tbd", "fixme", "placeholder", "xxx", "lorem", "changeme"})
"""Words that mark a reason as still to be written (matched as whole words, any case)."""

UNPINNED_IMAGE = "an image not pinned by digest"
"""The kind of a :class:`Placeholder` that names an image the tier runs without a digest."""

_ARN = re.compile(r"^arn:[^:]+:[^:]*:[^:]*:(?P<account>[^:]*):(?P<resource>.+)$")
_CIDR_SHAPE = re.compile(r"^[0-9a-fA-F.:]+/\d{1,3}$")
_PREFIXED_ID = re.compile(r"^[a-z]{1,12}-(?P<id>[0-9a-f-]{8,})$")
_HEX_ID = re.compile(r"^[0-9a-f-]{8,}$")


@dataclass(frozen=True, kw_only=True)
class Placeholder:
    """A documentation value in a tier field: where it is, the value and which rule matched."""

    path: str
    value: str
    why: str
    kind: str = "a documentation value"
    """What the value is: a documentation value, or an image not pinned by digest."""

    def describe(self) -> str:
        """The warning synth prints: the field, the value, the rule it matched and what to do."""
        return f"{self.path} = {self.value!r} is {self.kind} ({self.why}): replace it before deploying"


def documentation_account(account: str) -> str | None:
    """Why `account` is an AWS documentation account ID, or None when it is not one."""
    if account in DOCUMENTATION_ACCOUNTS:
        return f"AWS documentation account {account}"
    if len(account) == 12 and account.isdigit() and len(set(account)) == 1:
        return f"all-{account[0]} account {account}"
    if _BLOCK_ACCOUNT.match(account):
        return f"AWS documentation-style account {account}"
    return None


def documentation_network(value: str) -> str | None:
    """Why CIDR `value` is (or overlaps) a documentation range, or None."""
    if not _CIDR_SHAPE.match(value):
        return None
    try:
        network = ipaddress.ip_network(value, strict=False)
    except ValueError:
        return None
    if network.prefixlen == 0:
        return None  # every address, an open choice rather than a placeholder
    for reserved, name in DOCUMENTATION_NETWORKS:
        if network.version == reserved.version and network.overlaps(reserved):
            return f"{name}, {reserved}"
    return None


def zero_id(value: str) -> bool:
    """True when hex ID `value` is all zeros but for at most two digits (a UUID's version, variant)."""
    digits = value.replace("-", "")
    return len(digits) >= 8 and sum(1 for c in digits if c != "0") <= 2


def example_bucket(bucket: str) -> str | None:
    """Why `bucket` is an example bucket name, or None."""
    if bucket in PRESET_EXAMPLE_BUCKETS:
        return "the preset's example model bucket"
    if EXAMPLE_BUCKET_LABELS & set(re.split(r"[.-]", bucket)):
        return "an 'example' bucket name"
    return None


def classify(value: str) -> str | None:
    """Why string `value` is a documentation value, or None when no rule matches."""
    if arn := _ARN.match(value):
        last = re.split(r"[/:]", arn["resource"])[-1]
        reasons = [
            documentation_account(arn["account"]),
            f"all-zero resource ID {last}" if _HEX_ID.match(last) and zero_id(last) else None,
        ]
        return ", ".join(r for r in reasons if r) or None
    if value.startswith("s3://"):
        return example_bucket(value[len("s3://") :].split("/", 1)[0])
    if why := documentation_network(value):
        return why
    if len(value) == 12 and value.isdigit():
        return documentation_account(value)
    if (prefixed := _PREFIXED_ID.match(value)) and zero_id(prefixed["id"]):
        return f"all-zero resource ID {value}"
    return None


def _walk(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]")
    elif isinstance(value, str):
        yield path, value


def _active(document: dict[str, Any]) -> dict[str, Any]:
    """The tier document without the parts that build nothing: a section with `enabled: false`,
    `model_store.fsx` unless the model store is FSx for Lustre, and the image cache's credentials
    unless `images.pull_through_cache` is on. An example value inherited
    into a part that is off reaches no resource, so it is not reported."""

    def prune(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: prune(v)
                for k, v in value.items()
                if not (isinstance(v, dict) and v.get("enabled") is False)
            }
        if isinstance(value, list):
            return [prune(v) for v in value]
        return value

    pruned: dict[str, Any] = prune(document)
    store = pruned.get("model_store", {})
    if store.get("kind") != ModelStoreKind.FSX_LUSTRE.value:
        store.pop("fsx", None)
    images = pruned.get("images", {})
    if not images.get("pull_through_cache"):
        # The cache rules' credentials reach no resource without the cache.
        images.pop("docker_hub_credential_arn", None)
        images.pop("github_credential_arn", None)
    return pruned


def find_placeholders(config: TierConfig) -> list[Placeholder]:
    """Every documentation value in the string fields of a tier's active parts (see
    :func:`_active`), in field order, then every image the tier runs without a digest
    (:func:`gpufarm.config.image_pins.unpinned_images`); empty when none."""
    document = _active(config.model_dump(mode="json", by_alias=True))
    found = []
    for path, value in _walk(document, ""):
        if why := classify(value):
            found.append(Placeholder(path=path, value=value, why=why))
    found += [
        Placeholder(path=u.path, value=u.value, why=u.why, kind=UNPINNED_IMAGE)
        for u in unpinned_images(config)
    ]
    return found


def reason_issue(path: str, reason: str) -> ConfigIssue | None:
    """The problem with an open choice's reason at `path`, or None when it is a reason."""
    text = reason.strip()
    if PLACEHOLDER_WORDS & set(re.findall(r"[a-z]+", text.lower())) or classify(text):
        return ConfigIssue(path=path, message=f"must be a reason, not a placeholder, got {reason!r}")
    if len(text) < MIN_REASON_CHARS:
        return ConfigIssue(
            path=path, message=f"must say why, in at least {MIN_REASON_CHARS} characters, got {reason!r}"
        )
    return None


def _open_issues(
    section: str, field: str, what: str, cidrs: list[str], choice: OpenChoiceConfig | None
) -> list[ConfigIssue]:
    open_at = [i for i, cidr in enumerate(cidrs) if cidr in OPEN_CIDRS]
    if choice is None:
        return [
            ConfigIssue(
                path=f"{section}.{field}[{i}]",
                message=f"{cidrs[i]!r} opens {what} to the whole internet; list the networks that need it, "
                f'or state the choice with `{section}.open_to_internet: {{reason: "..."}}` '
                f"(at least {MIN_REASON_CHARS} characters)",
            )
            for i in open_at
        ]
    if not open_at:
        return [
            ConfigIssue(
                path=f"{section}.open_to_internet",
                message=f"states an open choice, but {section}.{field} ({cidrs!r}) holds no "
                f"{' or '.join(sorted(OPEN_CIDRS))}; remove it",
            )
        ]
    issue = reason_issue(f"{section}.open_to_internet.reason", choice.reason)
    return [issue] if issue else []


def open_choice_issues(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """Problems with the tier's internet-open choices: a 0.0.0.0/0 (or ::/0) in
    `cluster.public_access_cidrs` or `ingress.allowed_cidrs` needs that section's
    `open_to_internet.reason`; a reason needs the open CIDR and must be a reason."""
    cluster, ingress = cfg.cluster, cfg.ingress
    yield from _open_issues(
        "cluster",
        "public_access_cidrs",
        "the Kubernetes API endpoint",
        list(cluster.public_access_cidrs),
        cluster.open_to_internet,
    )
    yield from _open_issues(
        "ingress", "allowed_cidrs", "the load balancer", list(ingress.allowed_cidrs), ingress.open_to_internet
    )
