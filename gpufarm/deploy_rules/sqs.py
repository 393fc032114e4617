"""Amazon SQS: what CreateQueue and SetQueueAttributes refuse."""

from __future__ import annotations

from typing import Any

from gpufarm.deploy_rules.rule import Rule
from gpufarm.deploy_rules.shapes import fifo_name_check, ref_list_check, resource

QUEUE = "AWS::SQS::Queue"
QUEUE_POLICY = "AWS::SQS::QueuePolicy"

_CREATE_QUEUE = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_CreateQueue.html"
_QUEUE_POLICY = (
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-sqs-queuepolicy.html"
)

MAX_NAME = 80


_POLICY: dict[str, Any] = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": "*",
        }
    ],
}

RULES: tuple[Rule, ...] = (
    # CreateQueue, QueueName: "A queue name can have up to 80 characters. Valid values:
    # alphanumeric characters, hyphens (-), and underscores (_). A FIFO queue name must end with
    # the .fifo suffix."
    Rule(
        id="SQS-QUEUE-NAME",
        resource_type=QUEUE,
        title="A queue name has at most 80 letters, digits, '_' and '-', and a FIFO queue's ends with .fifo",
        doc_url=_CREATE_QUEUE,
        check=fifo_name_check("QueueName", "FifoQueue", max_length=MAX_NAME, kind="queue"),
        bad={"Q": resource(QUEUE, QueueName="gpufarm-poc.interruptions")},
        good={"Q": resource(QUEUE, QueueName="gpufarm-poc-interruptions")},
    ),
    # AWS::SQS::QueuePolicy, Queues: "The URLs of the queues to which you want to add the policy.
    # You can use the Ref function to specify an AWS::SQS::Queue resource." Its ARN is refused.
    Rule(
        id="SQS-QUEUE-POLICY-URLS",
        resource_type=QUEUE_POLICY,
        title="A queue policy names its queues by URL",
        doc_url=_QUEUE_POLICY,
        check=ref_list_check("Queues", QUEUE, literal_prefix="https://", wanted="queue URL"),
        bad={
            "Q": resource(QUEUE),
            "P": resource(QUEUE_POLICY, PolicyDocument=_POLICY, Queues=[{"Fn::GetAtt": ["Q", "Arn"]}]),
        },
        good={
            "Q": resource(QUEUE),
            "P": resource(QUEUE_POLICY, PolicyDocument=_POLICY, Queues=[{"Ref": "Q"}]),
        },
    ),
)
