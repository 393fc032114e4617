"""The customer-managed KMS key that encrypts a tier's CloudWatch Logs log groups."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from gpufarm.constructs._util import limit_grants_to_aws_services

LOGS_KEY_ACTIONS = (
    "kms:Encrypt*",
    "kms:Decrypt*",
    "kms:ReEncrypt*",
    "kms:GenerateDataKey*",
    "kms:Describe*",
)
"""What the regional CloudWatch Logs service principal may do with the key. The CloudWatch Logs
guide has the key policy name that principal and restricts it with the encryption context
`kms:EncryptionContext:aws:logs:arn` (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html)."""


class LogsKey(kms.Key):
    """A rotating KMS key that CloudWatch Logs of the stack's account and region may use.

    The key policy lets the regional CloudWatch Logs service principal use the key only for log
    groups of this account and region (`kms:EncryptionContext:aws:logs:arn` like
    `arn:<partition>:logs:<region>:<account>:*`), and denies `kms:CreateGrant` to anyone but an
    AWS service. Pass it as `logs_key` to the network (flow logs), the cluster (kubectl provider
    logs), the ALB (its WAF's logs) and traffic inspection (its flow logs).

    It is a `kms.Key` (not a wrapper around one), so its construct path, and with it the key's
    logical ID, is the one a plain `kms.Key(scope, id)` would have: replacing a key would orphan
    every log group it encrypts. Defaults: description "CloudWatch Logs encryption", rotation on,
    removal policy RETAIN.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        description: str = "CloudWatch Logs encryption",
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(
            scope, id, description=description, enable_key_rotation=True, removal_policy=removal_policy
        )
        limit_grants_to_aws_services(self)
        stack = cdk.Stack.of(self)
        logs_arn = f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:*"
        self.add_to_resource_policy(
            iam.PolicyStatement(
                actions=list(LOGS_KEY_ACTIONS),
                principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
                resources=["*"],
                conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": logs_arn}},
            )
        )
