"""AWS Systems Manager Parameter Store: what PutParameter refuses."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_str
from gpufarm.deploy_rules.shapes import TOKEN, render, resource

PARAMETER = "AWS::SSM::Parameter"

_PUT_PARAMETER = "https://docs.aws.amazon.com/systems-manager/latest/APIReference/API_PutParameter.html"
_TIERS = (
    "https://docs.aws.amazon.com/systems-manager/latest/userguide/parameter-store-advanced-parameters.html"
)

MAX_NAME = 1_011
MAX_DEPTH = 15
VALUE_CHARS = {"Standard": 4_096, "Advanced": 8_192}


def _name(res: Resource, _template: Template) -> Iterator[str]:
    # PutParameter, Name: "A parameter name can't be prefixed with "aws" or "ssm"
    # (case-insensitive)"; "Parameter names can include only the following symbols and letters:
    # a-zA-Z0-9_.-" and "/" for hierarchies; "Parameter hierarchies are limited to a maximum depth
    # of fifteen levels"; 2048 characters "includes 1037 characters that are reserved".
    name = literal_str(res.prop("Name"))
    if name is None:
        return
    if len(name) > MAX_NAME:
        yield f"Name has {len(name)} characters; the maximum is {MAX_NAME}"
    if name.lower().startswith(("aws", "ssm")):
        yield f"Name {name!r} starts with the reserved prefix 'aws' or 'ssm'"
    if not re.fullmatch(r"[a-zA-Z0-9_./-]+", name):
        yield f"Name {name!r} has characters other than a-zA-Z0-9_.- and '/'"
    depth = len([level for level in name.split("/") if level])
    if depth > MAX_DEPTH:
        yield f"Name {name!r} has {depth} levels; a hierarchy has at most {MAX_DEPTH}"


def _value_size(res: Resource, _template: Template) -> Iterator[str]:
    # PutParameter refuses a larger Standard value with "Standard tier parameters support a
    # maximum parameter value of 4096 characters. To create a larger parameter value, upgrade the
    # parameter to use the advanced-parameter tier" (Advanced: 8 KB). Tokens count as nothing.
    tier = literal_str(res.prop("Tier", "Standard"))
    value = render(res.prop("Value"))
    if tier not in VALUE_CHARS or value is None:
        return
    size = len(value.replace(TOKEN, ""))
    if size > VALUE_CHARS[tier]:
        yield f"Value has at least {size} characters; a {tier} parameter holds at most {VALUE_CHARS[tier]}"


RULES: tuple[Rule, ...] = (
    Rule(
        id="SSM-PARAMETER-NAME",
        resource_type=PARAMETER,
        title="A parameter name has no reserved prefix, allowed characters, at most 15 levels",
        doc_url=_PUT_PARAMETER,
        check=_name,
        bad={"P": resource(PARAMETER, Name="ssm-gpufarm-poc-ready", Type="String", Value="v")},
        good={"P": resource(PARAMETER, Name="/gpufarm/poc/ready", Type="String", Value="v")},
    ),
    Rule(
        id="SSM-PARAMETER-VALUE-SIZE",
        resource_type=PARAMETER,
        title="A Standard parameter's value has at most 4,096 characters, an Advanced one's 8 KB",
        doc_url=_TIERS,
        check=_value_size,
        bad={"P": resource(PARAMETER, Type="String", Value="x" * 5_000)},
        good={"P": resource(PARAMETER, Type="String", Tier="Advanced", Value="x" * 5_000)},
    ),
)
