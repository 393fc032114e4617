"""Amazon EventBridge: what PutTargets refuses in a rule's targets."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_str
from gpufarm.deploy_rules.shapes import each, referenced, resource

EVENTS_RULE = "AWS::Events::Rule"
QUEUE = "AWS::SQS::Queue"

_TARGET = "https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_Target.html"


def _fifo_targets(res: Resource, template: Template) -> Iterator[str]:
    # Target, SqsParameters: "Contains the message group ID to use when the target is a FIFO
    # queue. If you specify an SQS FIFO queue as a target, the queue must have content-based
    # deduplication enabled."
    for target in each(res.prop("Targets")):
        queue = referenced(target.get("Arn"), template, QUEUE)
        if queue is None or literal_str(queue.prop("FifoQueue")) != "true":
            continue
        target_id = literal_str(target.get("Id")) or "?"
        if literal_str(queue.prop("ContentBasedDeduplication")) != "true":
            yield f"target {target_id}: FIFO queue {queue.logical_id} needs ContentBasedDeduplication enabled"
        parameters = target.get("SqsParameters")
        if not (isinstance(parameters, Mapping) and parameters.get("MessageGroupId")):
            yield f"target {target_id}: a FIFO queue target needs SqsParameters.MessageGroupId"


def _fifo_example(deduplication: bool, group: bool) -> dict[str, Any]:
    target: dict[str, Any] = {"Id": "Interruptions", "Arn": {"Fn::GetAtt": ["Queue", "Arn"]}}
    if group:
        target["SqsParameters"] = {"MessageGroupId": "interruptions"}
    return {
        "Queue": resource(
            QUEUE,
            QueueName="gpufarm-interruptions.fifo",
            FifoQueue=True,
            ContentBasedDeduplication=deduplication,
        ),
        "Rule": resource(EVENTS_RULE, EventPattern={"source": ["aws.ec2"]}, Targets=[target]),
    }


RULES: tuple[Rule, ...] = (
    Rule(
        id="EVENTS-RULE-FIFO-TARGET",
        resource_type=EVENTS_RULE,
        title="A FIFO queue target has content-based deduplication and a message group ID",
        doc_url=_TARGET,
        check=_fifo_targets,
        bad=_fifo_example(deduplication=False, group=False),
        good=_fifo_example(deduplication=True, group=True),
    ),
)
