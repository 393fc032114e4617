"""Alerting rules on the Amazon Managed Prometheus workspace, and its alert manager sending to SNS.

:class:`PrometheusAlerts`: an `AWS::APS::RuleGroupsNamespace` with gpufarm's rule groups
(:func:`gpufarm.k8s.alerting.alert_rule_groups`) and the workspace's `AlertManagerDefinition`,
routing every alert to the tier's alarm topic. See docs/operations.md ("On call").
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_aps as aps
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from gpufarm.k8s.alerting import (
    RULES_NAMESPACE,
    GatewayObjective,
    ModelObjective,
    alert_manager_definition,
    alert_rule_groups,
    rules_document,
)

APS_SERVICE = "aps.amazonaws.com"


class PrometheusAlerts(Construct):
    """Alerting rules and an alert manager on an AMP workspace, notifying an SNS topic.

    The rules (time to first token per model against its objective, queue depth per replica,
    engine error percentage, availability burn rate against 99.9%, KV-cache use, prefix-cache
    hit rate, GPU utilization outside 70-90%, XID errors by node) go into one rule groups
    namespace (:data:`~gpufarm.k8s.alerting.RULES_NAMESPACE`). The workspace's alert manager
    definition is set on `workspace` (an `AWS::APS::Workspace` property: a workspace has one).

    The topic policy lets AMP publish (`sns:Publish`, `sns:GetTopicAttributes`) for this
    workspace in this account only, the statement of the AMP user guide
    (https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-alertmanager-receiver-AMPpermission.html).
    With `key` (the topic's customer managed key, defined in this app) AMP may also use it
    (`kms:GenerateDataKey*`, `kms:Decrypt`), which an encrypted topic needs, same page.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        workspace: aps.CfnWorkspace,
        topic: sns.ITopic,
        models: Sequence[ModelObjective],
        error_rate_percent: float,
        gateway: GatewayObjective | None = None,
        key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        self.groups = alert_rule_groups(models, error_rate_percent=error_rate_percent, gateway=gateway)
        self.rules = aps.CfnRuleGroupsNamespace(
            self,
            "Rules",
            name=RULES_NAMESPACE,
            workspace=workspace.attr_arn,
            data=rules_document(self.groups),
        )
        workspace.alert_manager_definition = alert_manager_definition(
            topic_arn=topic.topic_arn, region=stack.region
        )
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="PrometheusAlertsPublish",
                principals=[iam.ServicePrincipal(APS_SERVICE)],
                actions=["sns:Publish", "sns:GetTopicAttributes"],
                resources=[topic.topic_arn],
                conditions={
                    "ArnEquals": {"aws:SourceArn": workspace.attr_arn},
                    "StringEquals": {"aws:SourceAccount": stack.account},
                },
            )
        )
        if key is not None:
            # The AMP guide's key statement for an encrypted topic has no condition; its
            # confused-deputy advice (aws:SourceArn, aws:SourceAccount) is for the topic policy
            # above (https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-alertmanager-receiver-AMPpermission.html).
            # A condition AMP's KMS calls may not carry would drop every alert silently.
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="PrometheusAlertsEncrypt",
                    principals=[iam.ServicePrincipal(APS_SERVICE)],
                    actions=["kms:GenerateDataKey*", "kms:Decrypt"],
                    resources=["*"],
                )
            )
