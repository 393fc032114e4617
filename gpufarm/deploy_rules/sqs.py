"""Amazon SQS: what CreateQueue and SetQueueAttributes refuse."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_str
from gpufarm.deploy_rules.shapes import getatt_text, referenced, resource

QUEUE = "AWS::SQS::Queue"
QUEUE_POLICY = "AWS::SQS::QueuePolicy"

_CREATE_QUEUE = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_CreateQueue.html"
_QUEUE_POLICY = (
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-sqs-queuepolicy.html"
)

FIFO_SUFFIX = ".fifo"
MAX_NAME = 80


def _queue_name(res: Resource, _template: Template) -> Iterator[str]:
    # CreateQueue, QueueName: "A queue name can have up to 80 characters. Valid values:
    # alphanumeric characters, hyphens (-), and underscores (_). A FIFO queue name must end with
    # the .fifo suffix."
    name = literal_str(res.prop("QueueName"))
    fifo = literal_str(res.prop("FifoQueue", False))
    if name is None or fifo is None:
        return
    stem = name.removesuffix(FIFO_SUFFIX) if fifo == "true" else name
    if len(name) > MAX_NAME:
        yield f"QueueName {name!r} has {len(name)} characters; the maximum is {MAX_NAME}"
    if fifo == "true" and not name.endswith(FIFO_SUFFIX):
        yield f"QueueName {name!r} of a FIFO queue does not end with {FIFO_SUFFIX!r}"
    if not re.fullmatch(r"[A-Za-z0-9_-]+", stem):
        suffix = f" (and the {FIFO_SUFFIX!r} suffix of a FIFO queue)" if fifo == "true" else ""
        yield f"QueueName {name!r} is not accepted: letters, digits, '_' and '-' only{suffix}"


def _queue_urls(res: Resource, template: Template) -> Iterator[str]:
    # AWS::SQS::QueuePolicy, Queues: "The URLs of the queues to which you want to add the policy.
    # You can use the Ref function to specify an AWS::SQS::Queue resource." Its ARN is refused.
    queues = res.prop("Queues")
    for queue in queues if isinstance(queues, list) else []:
        literal = literal_str(queue)
        if literal is not None and not literal.startswith("https://"):
            yield f"Queues entry {literal!r} is not a queue URL"
        elif isinstance(queue, dict) and "Fn::GetAtt" in queue and referenced(queue, template, QUEUE):
            yield f"Queues entry {getatt_text(queue)} is not the queue URL; use Ref on the queue"


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
    Rule(
        id="SQS-QUEUE-NAME",
        resource_type=QUEUE,
        title="A queue name has at most 80 letters, digits, '_' and '-', and a FIFO queue's ends with .fifo",
        doc_url=_CREATE_QUEUE,
        check=_queue_name,
        bad={"Q": resource(QUEUE, QueueName="gpufarm-poc.interruptions")},
        good={"Q": resource(QUEUE, QueueName="gpufarm-poc-interruptions")},
    ),
    Rule(
        id="SQS-QUEUE-POLICY-URLS",
        resource_type=QUEUE_POLICY,
        title="A queue policy names its queues by URL",
        doc_url=_QUEUE_POLICY,
        check=_queue_urls,
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
