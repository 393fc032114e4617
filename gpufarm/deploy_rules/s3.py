"""Amazon S3: what CreateBucket, PutBucketLifecycleConfiguration and PutBucketPolicy refuse."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_str
from gpufarm.deploy_rules.shapes import each, policy_bytes, resource

BUCKET = "AWS::S3::Bucket"
BUCKET_POLICY = "AWS::S3::BucketPolicy"

_NAMING = "https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html#general-purpose-bucket-names"
_LIFECYCLE = "https://docs.aws.amazon.com/AmazonS3/latest/API/API_LifecycleConfiguration.html"
_BUCKET_POLICY = "https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-iam-policies.html"

MAX_LIFECYCLE_RULES = 1_000
BUCKET_POLICY_BYTES = 20 * 1024

_IP_ADDRESS = re.compile(r"\d{1,3}(\.\d{1,3}){3}")
_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap")


def bucket_name_problems(name: str) -> list[str]:
    """What the S3 general purpose bucket naming rules say is wrong with `name` (nothing if valid)."""
    problems: list[str] = []
    if not 3 <= len(name) <= 63:
        problems.append(f"has {len(name)} characters, not 3 to 63")
    if not re.fullmatch(r"[a-z0-9.-]*", name):
        problems.append("has characters other than lowercase letters, digits, '.' and '-'")
    if name and not (name[0].isalnum() and name[-1].isalnum()):
        problems.append("does not begin and end with a letter or digit")
    if ".." in name:
        problems.append("has two adjacent periods")
    if _IP_ADDRESS.fullmatch(name):
        problems.append("is formatted as an IP address")
    problems += [f"starts with the reserved prefix {p!r}" for p in _RESERVED_PREFIXES if name.startswith(p)]
    problems += [f"ends with the reserved suffix {s!r}" for s in _RESERVED_SUFFIXES if name.endswith(s)]
    return problems


def _bucket_name(res: Resource, _template: Template) -> Iterator[str]:
    # S3 user guide, general purpose bucket naming rules (3-63 characters; lowercase letters,
    # numbers, dots and hyphens; begin and end with a letter or number; no two adjacent periods;
    # not an IP address; reserved prefixes xn--, sthree-, amzn-s3-demo-; reserved suffixes
    # -s3alias, --ol-s3, .mrap).
    name = literal_str(res.prop("BucketName"))
    if name is not None:
        yield from (f"BucketName {name!r} {problem}" for problem in bucket_name_problems(name))


def _lifecycle_rule_count(res: Resource, _template: Template) -> Iterator[str]:
    # LifecycleConfiguration: "Container for lifecycle rules. You can add as many as 1000 rules."
    config = res.prop("LifecycleConfiguration")
    rules = list(each(config.get("Rules"))) if isinstance(config, Mapping) else []
    if len(rules) > MAX_LIFECYCLE_RULES:
        yield (
            f"{len(rules)} lifecycle rules; a bucket's lifecycle configuration "
            f"holds at most {MAX_LIFECYCLE_RULES}"
        )


def _policy_size(res: Resource, _template: Template) -> Iterator[str]:
    # S3 user guide, bucket policies and user policies: "Bucket policies are limited to 20 KB in
    # size."
    size = policy_bytes(res.prop("PolicyDocument"))
    if size > BUCKET_POLICY_BYTES:
        yield (
            f"the policy has at least {size} bytes; a bucket policy is limited to "
            f"20 KB ({BUCKET_POLICY_BYTES} bytes)"
        )


def _lifecycle(count: int) -> dict[str, Any]:
    return {
        "Rules": [
            {"Id": f"r{i}", "Prefix": f"p{i}/", "ExpirationInDays": 30, "Status": "Enabled"}
            for i in range(count)
        ]
    }


def _policy(statements: int) -> dict[str, Any]:
    statement = {
        "Effect": "Deny",
        "Principal": {"AWS": "*"},
        "Action": "s3:*",
        "Resource": ["arn:aws:s3:::gpufarm-logs", "arn:aws:s3:::gpufarm-logs/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }
    return {"Version": "2012-10-17", "Statement": [{**statement, "Sid": f"S{i}"} for i in range(statements)]}


def _bucket_policy(statements: int) -> dict[str, Any]:
    return resource(BUCKET_POLICY, Bucket="gpufarm-logs", PolicyDocument=_policy(statements))


RULES: tuple[Rule, ...] = (
    Rule(
        id="S3-BUCKET-NAME",
        resource_type=BUCKET,
        title="A bucket name follows the general purpose bucket naming rules",
        doc_url=_NAMING,
        check=_bucket_name,
        bad={"B": resource(BUCKET, BucketName="gpufarm-logs-s3alias")},
        good={"B": resource(BUCKET, BucketName="gpufarm-logs")},
    ),
    Rule(
        id="S3-LIFECYCLE-RULES",
        resource_type=BUCKET,
        title="A lifecycle configuration has at most 1,000 rules",
        doc_url=_LIFECYCLE,
        check=_lifecycle_rule_count,
        bad={"B": resource(BUCKET, LifecycleConfiguration=_lifecycle(MAX_LIFECYCLE_RULES + 1))},
        good={"B": resource(BUCKET, LifecycleConfiguration=_lifecycle(3))},
    ),
    Rule(
        id="S3-BUCKET-POLICY-SIZE",
        resource_type=BUCKET_POLICY,
        title="A bucket policy is at most 20 KB",
        doc_url=_BUCKET_POLICY,
        check=_policy_size,
        bad={"P": _bucket_policy(120)},
        good={"P": _bucket_policy(2)},
    ),
)
