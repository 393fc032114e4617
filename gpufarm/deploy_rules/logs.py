"""Amazon CloudWatch Logs: what CreateLogGroup refuses."""

from __future__ import annotations

from gpufarm.deploy_rules.rule import Rule
from gpufarm.deploy_rules.shapes import KMS_KEY, arn_check, kms_key, resource

LOG_GROUP = "AWS::Logs::LogGroup"

_CREATE_LOG_GROUP = (
    "https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_CreateLogGroup.html"
)


# CreateLogGroup, kmsKeyId: "The Amazon Resource Name (ARN) of the KMS key to use when encrypting
# log data." `Ref` on AWS::KMS::Key gives the key ID, which is refused.

RULES: tuple[Rule, ...] = (
    Rule(
        id="LOGS-KMS-KEY-ARN",
        resource_type=LOG_GROUP,
        title="A log group's KmsKeyId is the key's ARN",
        doc_url=_CREATE_LOG_GROUP,
        check=arn_check(("KmsKeyId",), KMS_KEY, "key ID"),
        bad={"Key": kms_key(), "Logs": resource(LOG_GROUP, RetentionInDays=30, KmsKeyId={"Ref": "Key"})},
        good={
            "Key": kms_key(),
            "Logs": resource(LOG_GROUP, RetentionInDays=30, KmsKeyId={"Fn::GetAtt": ["Key", "Arn"]}),
        },
    ),
)
