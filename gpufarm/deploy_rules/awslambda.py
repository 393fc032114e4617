"""AWS Lambda: what CreateFunction refuses that the CloudFormation schema lets through.

The CloudFormation schema allows the limits of Lambda Managed Instances (32,768 MB of memory); a
function without a capacity provider keeps the standard limits. (cfn-lint checks the standard
timeout itself, rule E3717.)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_int, literal_str
from gpufarm.deploy_rules.shapes import resource

FUNCTION = "AWS::Lambda::Function"
LAYER_VERSION = "AWS::Lambda::LayerVersion"

_QUOTAS = "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"
_LOG_LEVEL = "https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-log-level.html"
_PUBLISH_LAYER_VERSION = "https://docs.aws.amazon.com/lambda/latest/api/API_PublishLayerVersion.html"

MAX_MEMORY_MB = 10_240
LICENSE_INFO_CHARS = 512


def _standard(res: Resource) -> bool:
    """A function on Lambda's standard compute (no Managed Instances capacity provider)."""
    return res.prop("CapacityProviderConfig") is None


def _memory(res: Resource, _template: Template) -> Iterator[str]:
    # Lambda quotas: "a single function can use up to 10,240 MB of memory" (Lambda Managed
    # Instances functions, with a capacity provider, are sized differently).
    memory = literal_int(res.prop("MemorySize"))
    if _standard(res) and memory is not None and memory > MAX_MEMORY_MB:
        yield f"MemorySize {memory} MB; a function has at most {MAX_MEMORY_MB} MB"


def _log_levels_need_json(res: Resource, _template: Template) -> Iterator[str]:
    # Log-level filtering: "To use log-level filtering, your function must be configured to use
    # the JSON log format. The default log format for all Lambda managed runtimes is currently
    # plain text."
    config = res.prop("LoggingConfig")
    if not isinstance(config, Mapping):
        return
    levels = [key for key in ("ApplicationLogLevel", "SystemLogLevel") if config.get(key) is not None]
    log_format = literal_str(config.get("LogFormat", "Text"))
    if levels and log_format is not None and log_format != "JSON":
        yield (
            f"{' and '.join(levels)} set with LogFormat {log_format}; log-level "
            "filtering needs LogFormat JSON"
        )


def _license_info(res: Resource, _template: Template) -> Iterator[str]:
    # PublishLayerVersion, LicenseInfo: "Length Constraints: Maximum length of 512." (cfn-lint's
    # schema has the same limit; kept so that the layer type has its rule in this catalogue.)
    info = literal_str(res.prop("LicenseInfo"))
    if info is not None and len(info) > LICENSE_INFO_CHARS:
        yield f"LicenseInfo has {len(info)} characters; the maximum is {LICENSE_INFO_CHARS}"


def _function(**properties: Any) -> dict[str, Any]:
    return resource(
        FUNCTION,
        Code={"ZipFile": "def handler(event, context):\n    return None\n"},
        Handler="index.handler",
        Role="arn:aws:iam::123456789012:role/fn",
        Runtime="python3.13",
        **properties,
    )


def _layer(license_info: str) -> dict[str, Any]:
    return resource(
        LAYER_VERSION, Content={"S3Bucket": "assets", "S3Key": "layer.zip"}, LicenseInfo=license_info
    )


RULES: tuple[Rule, ...] = (
    Rule(
        id="LAMBDA-MEMORY",
        resource_type=FUNCTION,
        title="A function on standard compute has at most 10,240 MB of memory",
        doc_url=_QUOTAS,
        check=_memory,
        bad={"Fn": _function(MemorySize=16_384)},
        good={"Fn": _function(MemorySize=10_240)},
    ),
    Rule(
        id="LAMBDA-LOG-LEVEL-JSON",
        resource_type=FUNCTION,
        title="Application and system log levels need the JSON log format",
        doc_url=_LOG_LEVEL,
        check=_log_levels_need_json,
        bad={"Fn": _function(LoggingConfig={"ApplicationLogLevel": "FATAL"})},
        good={"Fn": _function(LoggingConfig={"ApplicationLogLevel": "FATAL", "LogFormat": "JSON"})},
    ),
    Rule(
        id="LAMBDA-LAYER-LICENSE-INFO",
        resource_type=LAYER_VERSION,
        title="A layer's license information has at most 512 characters",
        doc_url=_PUBLISH_LAYER_VERSION,
        check=_license_info,
        bad={"L": _layer("Apache-2.0 " * 50)},
        good={"L": _layer("Apache-2.0")},
    ),
)
