"""Amazon SNS: what CreateTopic and SetTopicAttributes refuse."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_str
from gpufarm.deploy_rules.shapes import getatt_text, referenced, resource

TOPIC = "AWS::SNS::Topic"
TOPIC_POLICY = "AWS::SNS::TopicPolicy"

_CREATE_TOPIC = "https://docs.aws.amazon.com/sns/latest/api/API_CreateTopic.html"
_TOPIC_POLICY = (
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-sns-topicpolicy.html"
)

FIFO_SUFFIX = ".fifo"
MAX_NAME = 256


def _topic_name(res: Resource, _template: Template) -> Iterator[str]:
    # CreateTopic, Name: "Topic names must be made up of only uppercase and lowercase ASCII
    # letters, numbers, underscores, and hyphens, and must be between 1 and 256 characters long.
    # For a FIFO (first-in-first-out) topic, the name must end with the .fifo suffix."
    name = literal_str(res.prop("TopicName"))
    fifo = literal_str(res.prop("FifoTopic", False))
    if name is None or fifo is None:
        return
    stem = name.removesuffix(FIFO_SUFFIX) if fifo == "true" else name
    if len(name) > MAX_NAME:
        yield f"TopicName {name!r} has {len(name)} characters; the maximum is {MAX_NAME}"
    if fifo == "true" and not name.endswith(FIFO_SUFFIX):
        yield f"TopicName {name!r} of a FIFO topic does not end with {FIFO_SUFFIX!r}"
    if not re.fullmatch(r"[A-Za-z0-9_-]+", stem):
        suffix = f" (and the {FIFO_SUFFIX!r} suffix of a FIFO topic)" if fifo == "true" else ""
        yield f"TopicName {name!r} is not accepted: letters, digits, '_' and '-' only{suffix}"


def _topic_arns(res: Resource, template: Template) -> Iterator[str]:
    # AWS::SNS::TopicPolicy, Topics: "The Amazon Resource Names (ARN) of the topics to which you
    # want to add the policy." `Ref` on AWS::SNS::Topic gives the ARN; its TopicName does not.
    topics = res.prop("Topics")
    for topic in topics if isinstance(topics, list) else []:
        literal = literal_str(topic)
        if literal is not None and not literal.startswith("arn:"):
            yield f"Topics entry {literal!r} is not a topic ARN"
        elif isinstance(topic, dict) and "Fn::GetAtt" in topic and referenced(topic, template, TOPIC):
            yield f"Topics entry {getatt_text(topic)} is not the topic ARN; use Ref on the topic"


_POLICY: dict[str, Any] = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": "sns:Publish",
            "Resource": "*",
        }
    ],
}

RULES: tuple[Rule, ...] = (
    Rule(
        id="SNS-TOPIC-NAME",
        resource_type=TOPIC,
        title="A topic name has letters, digits, '_' and '-', and a FIFO topic's ends with .fifo",
        doc_url=_CREATE_TOPIC,
        check=_topic_name,
        bad={"T": resource(TOPIC, TopicName="gpufarm-alarms", FifoTopic=True)},
        good={"T": resource(TOPIC, TopicName="gpufarm-alarms.fifo", FifoTopic=True)},
    ),
    Rule(
        id="SNS-TOPIC-POLICY-ARNS",
        resource_type=TOPIC_POLICY,
        title="A topic policy names its topics by ARN",
        doc_url=_TOPIC_POLICY,
        check=_topic_arns,
        bad={
            "T": resource(TOPIC),
            "P": resource(TOPIC_POLICY, PolicyDocument=_POLICY, Topics=[{"Fn::GetAtt": ["T", "TopicName"]}]),
        },
        good={
            "T": resource(TOPIC),
            "P": resource(TOPIC_POLICY, PolicyDocument=_POLICY, Topics=[{"Ref": "T"}]),
        },
    ),
)
