"""Amazon SNS: what CreateTopic and SetTopicAttributes refuse."""

from __future__ import annotations

from typing import Any

from gpufarm.deploy_rules.rule import Rule
from gpufarm.deploy_rules.shapes import fifo_name_check, ref_list_check, resource

TOPIC = "AWS::SNS::Topic"
TOPIC_POLICY = "AWS::SNS::TopicPolicy"

_CREATE_TOPIC = "https://docs.aws.amazon.com/sns/latest/api/API_CreateTopic.html"
_TOPIC_POLICY = (
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-sns-topicpolicy.html"
)

MAX_NAME = 256


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
    # CreateTopic, Name: "Topic names must be made up of only uppercase and lowercase ASCII
    # letters, numbers, underscores, and hyphens, and must be between 1 and 256 characters long.
    # For a FIFO (first-in-first-out) topic, the name must end with the .fifo suffix."
    Rule(
        id="SNS-TOPIC-NAME",
        resource_type=TOPIC,
        title="A topic name has letters, digits, '_' and '-', and a FIFO topic's ends with .fifo",
        doc_url=_CREATE_TOPIC,
        check=fifo_name_check("TopicName", "FifoTopic", max_length=MAX_NAME, kind="topic"),
        bad={"T": resource(TOPIC, TopicName="gpufarm-alarms", FifoTopic=True)},
        good={"T": resource(TOPIC, TopicName="gpufarm-alarms.fifo", FifoTopic=True)},
    ),
    # AWS::SNS::TopicPolicy, Topics: "The Amazon Resource Names (ARN) of the topics to which you
    # want to add the policy." `Ref` on AWS::SNS::Topic gives the ARN; its TopicName does not.
    Rule(
        id="SNS-TOPIC-POLICY-ARNS",
        resource_type=TOPIC_POLICY,
        title="A topic policy names its topics by ARN",
        doc_url=_TOPIC_POLICY,
        check=ref_list_check("Topics", TOPIC, literal_prefix="arn:", wanted="topic ARN"),
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
