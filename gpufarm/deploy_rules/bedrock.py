"""Amazon Bedrock guardrails: what CreateGuardrail and CreateGuardrailVersion refuse."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_str
from gpufarm.deploy_rules.shapes import each, referenced, resource, value_at

GUARDRAIL = "AWS::Bedrock::Guardrail"
GUARDRAIL_VERSION = "AWS::Bedrock::GuardrailVersion"

_TIERS = "https://docs.aws.amazon.com/bedrock/latest/userguide/guardrails-tiers.html"
_CREATE_GUARDRAIL_VERSION = (
    "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_CreateGuardrailVersion.html"
)

IDENTIFIER_ATTRIBUTES = ("GuardrailId", "GuardrailArn")
TOPIC_DEFINITION_CHARS = {"CLASSIC": 200, "STANDARD": 1_000}


def _topic_definitions(res: Resource, _template: Template) -> Iterator[str]:
    # Safeguard tiers, key differences: denied topics have a "Maximum of 1,000 characters per
    # definition" in the Standard tier and a "Maximum of 200 characters per definition" in the
    # Classic tier (the default). The CloudFormation schema allows 1,000 whatever the tier.
    policy = value_at(res, ("TopicPolicyConfig",))
    tier = literal_str(value_at(res, ("TopicPolicyConfig", "TopicsTierConfig", "TierName")) or "CLASSIC")
    if not isinstance(policy, dict) or tier not in TOPIC_DEFINITION_CHARS:
        return
    limit = TOPIC_DEFINITION_CHARS[tier]
    for topic in each(policy.get("TopicsConfig")):
        definition = literal_str(topic.get("Definition"))
        if definition is not None and len(definition) > limit:
            yield (
                f"topic {topic.get('Name')!r}: definition has {len(definition)} "
                f"characters; the {tier} tier allows {limit}"
            )


def _version_identifier(res: Resource, template: Template) -> Iterator[str]:
    # CreateGuardrailVersion, guardrailIdentifier: "The unique identifier of the guardrail. This
    # can be an ID or the ARN." Pattern (([a-z0-9]+)|(arn:...:guardrail/[a-z0-9]+)): another
    # attribute of the guardrail, such as its Version ("DRAFT"), is refused.
    value = value_at(res, ("GuardrailIdentifier",))
    guardrail = referenced(value, template, GUARDRAIL)
    getatt = value.get("Fn::GetAtt") if isinstance(value, dict) else None
    if (
        guardrail is not None
        and isinstance(getatt, list)
        and len(getatt) == 2
        and getatt[1] not in IDENTIFIER_ATTRIBUTES
    ):
        yield (
            f"GuardrailIdentifier is {guardrail.logical_id}.{getatt[1]}; use its GuardrailId or GuardrailArn"
        )


def _guardrail(**properties: Any) -> dict[str, Any]:
    return resource(
        GUARDRAIL,
        Name="gpufarm-poc",
        BlockedInputMessaging="Blocked.",
        BlockedOutputsMessaging="Blocked.",
        ContentPolicyConfig={
            "FiltersConfig": [{"Type": "HATE", "InputStrength": "HIGH", "OutputStrength": "HIGH"}]
        },
        **properties,
    )


def _topics(definition_chars: int, tier: str | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "TopicsConfig": [{"Name": "investment-advice", "Type": "DENY", "Definition": "d" * definition_chars}]
    }
    if tier:
        config["TopicsTierConfig"] = {"TierName": tier}
    return config


def _version(attribute: str) -> dict[str, Any]:
    return resource(GUARDRAIL_VERSION, GuardrailIdentifier={"Fn::GetAtt": ["Guardrail", attribute]})


RULES: tuple[Rule, ...] = (
    Rule(
        id="BEDROCK-GUARDRAIL-TOPIC-DEFINITION",
        resource_type=GUARDRAIL,
        title="A denied topic's definition has at most 200 characters in the Classic tier, 1,000 in Standard",
        doc_url=_TIERS,
        check=_topic_definitions,
        bad={"Guardrail": _guardrail(TopicPolicyConfig=_topics(300))},
        good={"Guardrail": _guardrail(TopicPolicyConfig=_topics(300, tier="STANDARD"))},
    ),
    Rule(
        id="BEDROCK-GUARDRAIL-VERSION-IDENTIFIER",
        resource_type=GUARDRAIL_VERSION,
        title="A guardrail version names its guardrail by ID or ARN",
        doc_url=_CREATE_GUARDRAIL_VERSION,
        check=_version_identifier,
        bad={"Guardrail": _guardrail(), "V": _version("Version")},
        good={"Guardrail": _guardrail(), "V": _version("GuardrailId")},
    ),
)
