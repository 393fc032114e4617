"""Amazon Managed Grafana on the tier's Prometheus workspace, with its dashboards provisioned.

:class:`ManagedGrafana`: an `AWS::Grafana::Workspace`, the IAM role it reads the AMP workspace
and CloudWatch with, and a custom resource that puts the data sources, a folder and the
dashboards of :mod:`gpufarm.constructs.grafana_dashboards` into it on every deploy. See
docs/decisions/0047-grafana-dashboards-as-code.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_grafana as grafana
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from gpufarm.config.sections.grafana import GRAFANA_VERSIONS, GrafanaAuthentication, GrafanaConfig
from gpufarm.constructs._util import acknowledge_all
from gpufarm.constructs.grafana_dashboards import CLOUDWATCH_UID, FOLDER_UID, PROMETHEUS_UID
from gpufarm.constructs.network import log_retention

PROVISIONER_CODE = Path(__file__).resolve().parent / "grafana_provisioner"
PROVISIONER_RUNTIME = lambda_.Runtime.PYTHON_3_14
GRAFANA_SERVICE = "grafana.amazonaws.com"

AMP_QUERY_ACTIONS = ("aps:GetLabels", "aps:GetMetricMetadata", "aps:GetSeries", "aps:QueryMetrics")
"""The actions of the AWS managed policy AmazonPrometheusQueryAccess, scoped here to one workspace
(https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AmazonPrometheusQueryAccess.html)."""

CLOUDWATCH_READ_ACTIONS = (
    "cloudwatch:DescribeAlarmsForMetric",
    "cloudwatch:GetMetricData",
    "cloudwatch:GetMetricStatistics",
    "cloudwatch:ListMetrics",
)
"""What Grafana's CloudWatch data source needs to read metrics (Grafana documentation, "Configure
the CloudWatch data source", IAM policies); the dashboards use no logs or alarms queries."""

SERVICE_ACCOUNT_ACTIONS = (
    "grafana:CreateWorkspaceServiceAccount",
    "grafana:CreateWorkspaceServiceAccountToken",
    "grafana:DeleteWorkspaceServiceAccount",
    "grafana:DeleteWorkspaceServiceAccountToken",
    "grafana:ListWorkspaceServiceAccounts",
)

WORKSPACE_NAME_MAX = 255

PROVISIONER_TIMEOUT = cdk.Duration.minutes(5)
PROVISIONING_SERVICE_TIMEOUT = cdk.Duration.seconds(1200)
"""How long CloudFormation waits for the provisioner's answer (`ServiceTimeout`, 1 to 3600 s,
default 3600: https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-requests.html).
The handler answers before its 300 s Lambda timeout; if it dies without answering, Lambda runs the
request twice more, one and then two minutes apart
(https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html): 3 x 300 s
+ 180 s = 1080 s fit in 1200 s, and a lost answer fails the deploy after 20 minutes, not an hour."""


class ManagedGrafana(Construct):
    """An Amazon Managed Grafana workspace reading one AMP workspace, with dashboards as code.

    The workspace (`Resource`) is `CURRENT_ACCOUNT` and `CUSTOMER_MANAGED`: its role (`Role`)
    may query only `prometheus_workspace_arn` and read CloudWatch metrics. CloudFormation's
    `DataSources` list is not used: it is read only for workspaces created in the console with
    service-managed permissions (AWS::Grafana::Workspace, DataSources). People sign in through
    `config.authentication` (IAM Identity Center by default; users and groups are then assigned
    in the console or with `UpdatePermissions`, which CloudFormation does not cover).

    The handler runs in `subnets` of `vpc` (private, with a route out through NAT) with
    a security group that allows HTTPS out and nothing in.

    `dashboards` (JSON, from :func:`~gpufarm.constructs.grafana_dashboards.tier_dashboards`) go
    into the folder `gpufarm` on every deploy through the custom resource `Provisioning`. Its
    `ServiceToken` is the handler (`Provisioner`) itself, which answers CloudFormation (no provider
    framework); it holds a workspace service account and a token that lives
    `config.provisioning_token_seconds` at most and is deleted at the end of each run.

    Defaults: `name` is the workspace name (the stack name); the provisioner's log group keeps
    `log_retention_days` (365) days, encrypted with `logs_key` when given, removed per
    `removal_policy` (RETAIN).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: GrafanaConfig,
        prometheus_workspace_arn: str,
        prometheus_query_endpoint: str,
        region: str,
        dashboards: Sequence[Mapping[str, Any]],
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        name: str | None = None,
        logs_key: kms.IKey | None = None,
        log_retention_days: int = 365,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        if not config.enabled:
            raise ValueError("'config.enabled' must be true to build ManagedGrafana, got False")
        if config.grafana_version not in GRAFANA_VERSIONS:
            raise ValueError(
                f"'config.grafana_version' must be one of {', '.join(GRAFANA_VERSIONS)}, "
                f"got {config.grafana_version!r}"
            )
        stack = cdk.Stack.of(self)
        workspace_name = (name or stack.stack_name)[:WORKSPACE_NAME_MAX]
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(GRAFANA_SERVICE),
            description=f"{workspace_name}: Grafana reads the AMP workspace and CloudWatch metrics",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(actions=list(AMP_QUERY_ACTIONS), resources=[prometheus_workspace_arn])
        )
        self.role.add_to_policy(iam.PolicyStatement(actions=list(CLOUDWATCH_READ_ACTIONS), resources=["*"]))
        self.workspace = grafana.CfnWorkspace(
            self,
            "Resource",
            name=workspace_name,
            description=f"gpufarm {workspace_name}: models, GPU fleet and gateway dashboards",
            account_access_type="CURRENT_ACCOUNT",
            permission_type="CUSTOMER_MANAGED",
            role_arn=self.role.role_arn,
            authentication_providers=[p.value for p in config.authentication],
            grafana_version=config.grafana_version,
            saml_configuration=self._saml(config),
        )
        self.workspace.apply_removal_policy(removal_policy)
        self._provisioning(
            config=config,
            prometheus_query_endpoint=prometheus_query_endpoint,
            region=region,
            dashboards=dashboards,
            vpc=vpc,
            subnets=subnets,
            logs_key=logs_key,
            log_retention_days=log_retention_days,
            removal_policy=removal_policy,
        )
        self._acknowledge()

    @property
    def workspace_id(self) -> str:
        """ID of the workspace (`g-` and ten hex digits)."""
        return self.workspace.attr_id

    @property
    def url(self) -> str:
        """The URL people open to sign in to the workspace."""
        return f"https://{self.workspace.attr_endpoint}"

    @staticmethod
    def _saml(config: GrafanaConfig) -> grafana.CfnWorkspace.SamlConfigurationProperty | None:
        saml = config.saml
        if saml is None or GrafanaAuthentication.SAML not in config.authentication:
            return None
        return grafana.CfnWorkspace.SamlConfigurationProperty(
            idp_metadata=grafana.CfnWorkspace.IdpMetadataProperty(
                url=saml.idp_metadata_url, xml=saml.idp_metadata_xml
            ),
            assertion_attributes=grafana.CfnWorkspace.AssertionAttributesProperty(role=saml.role_attribute),
            role_values=grafana.CfnWorkspace.RoleValuesProperty(
                admin=list(saml.admin_role_values), editor=list(saml.editor_role_values) or None
            ),
            login_validity_duration=saml.login_validity_minutes,
        )

    def _provisioning(
        self,
        *,
        config: GrafanaConfig,
        prometheus_query_endpoint: str,
        region: str,
        dashboards: Sequence[Mapping[str, Any]],
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        logs_key: kms.IKey | None,
        log_retention_days: int,
        removal_policy: cdk.RemovalPolicy,
    ) -> None:
        self.log_group = logs.LogGroup(
            self,
            "ProvisionerLogs",
            retention=log_retention(log_retention_days),
            encryption_key=logs_key,
            removal_policy=removal_policy,
        )
        # Egress only, HTTPS only: the Amazon Managed Grafana API and the workspace's Grafana API.
        self.security_group = ec2.SecurityGroup(
            self,
            "ProvisionerSecurityGroup",
            vpc=vpc,
            description="gpufarm Grafana provisioner: HTTPS to the Grafana APIs only",
            allow_all_outbound=False,
        )
        self.security_group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "Grafana APIs over HTTPS")
        in_vpc = {
            "vpc": vpc,
            "vpc_subnets": ec2.SubnetSelection(subnets=list(subnets)),
            "security_groups": [self.security_group],
        }
        self.handler = lambda_.Function(
            self,
            "Provisioner",
            description="Puts gpufarm's Grafana data sources and dashboards into the workspace",
            runtime=PROVISIONER_RUNTIME,
            handler="index.on_event",
            code=lambda_.Code.from_asset(
                str(PROVISIONER_CODE), exclude=["__pycache__", "*.pyc", "__init__.py"]
            ),
            timeout=PROVISIONER_TIMEOUT,
            memory_size=256,
            log_group=self.log_group,
            **in_vpc,  # type: ignore[arg-type]
        )
        workspace_arn = stack_arn(self, self.workspace.attr_id)
        self.handler.add_to_role_policy(
            iam.PolicyStatement(actions=list(SERVICE_ACCOUNT_ACTIONS), resources=[workspace_arn])
        )
        _drop_role_dependency(self.handler)
        # CloudFormation invokes the handler itself and the handler answers it (no provider
        # framework). No Lambda permission is added: aws-cdk-lib's own CustomResourceProvider uses
        # its handler's Arn as the service token the same way (aws-cdk-lib 2.275.0,
        # core/lib/custom-resource-provider/custom-resource-provider-base.ts).
        self.provisioning = cdk.CustomResource(
            self,
            "Provisioning",
            service_token=self.handler.function_arn,
            service_timeout=PROVISIONING_SERVICE_TIMEOUT,
            resource_type="Custom::GrafanaDashboards",
            properties={
                "WorkspaceId": self.workspace.attr_id,
                "WorkspaceEndpoint": self.workspace.attr_endpoint,
                "Region": region,
                "PrometheusUrl": f"{prometheus_query_endpoint}/",
                "PrometheusUid": PROMETHEUS_UID,
                "CloudWatchUid": CLOUDWATCH_UID,
                "FolderUid": FOLDER_UID,
                "FolderTitle": "gpufarm",
                "TokenSeconds": str(config.provisioning_token_seconds),
                "Dashboards": cdk.Stack.of(self).to_json_string(list(dashboards)),
            },
        )

    def _acknowledge(self) -> None:
        managed = "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/{}]"
        basic = managed.format("AWSLambdaBasicExecutionRole")
        vpc_access = managed.format("AWSLambdaVPCAccessExecutionRole")
        acknowledge_all(
            self.handler,
            {
                basic: "The provisioner writes its log lines with AWSLambdaBasicExecutionRole, the "
                "managed policy aws_lambda gives every function; its log group is its own.",
                vpc_access: "The provisioner runs in the tier's private subnets; aws_lambda attaches "
                "AWSLambdaVPCAccessExecutionRole so Lambda can manage its network interfaces.",
            },
        )
        concurrency = (
            "{} runs only while CloudFormation deploys this stack, once per deploy of the "
            "dashboards: a concurrency cap could only fail a deploy, and reserved concurrency "
            "would hold back part of the account's pool for a function idle between deploys."
        )
        dlq = (
            "{} answers every CloudFormation request itself, failures included, and CloudFormation "
            "fails the deploy with them; a dead-letter queue would only keep requests that "
            "CloudFormation already has an answer for."
        )
        acknowledge_all(
            self.handler,
            {
                "NIST.800.53.R5-IAMNoInlinePolicy": "aws_lambda grants the provisioner's role the "
                "service-account actions on this one workspace through the role's default inline "
                "policy, next to the function it serves.",
                "NIST.800.53.R5-LambdaConcurrency": concurrency.format("The provisioner"),
                "NIST.800.53.R5-LambdaDLQ": dlq.format("The provisioner"),
            },
        )
        acknowledge_all(
            self.role,
            {
                "NIST.800.53.R5-IAMNoInlinePolicy": "The workspace role's read-only grants (one AMP "
                "workspace, CloudWatch metrics) sit in its default inline policy, created and "
                "removed with the role and the workspace.",
                "AwsSolutions-IAM5[Resource::*]": "CloudWatch's GetMetricData, GetMetricStatistics, "
                "ListMetrics and DescribeAlarmsForMetric take no resource ARN (Service "
                "Authorization Reference, Amazon CloudWatch); the role reads metrics only.",
            },
        )


def stack_arn(scope: Construct, workspace_id: str) -> str:
    """ARN of a Grafana workspace of this stack's account and region, `.../workspaces/<id>`.

    The Service Authorization Reference gives Amazon Managed Grafana's workspace resource as
    `arn:${Partition}:grafana:${Region}:${Account}:/workspaces/${ResourceId}`.
    """
    stack = cdk.Stack.of(scope)
    return f"arn:{stack.partition}:grafana:{stack.region}:{stack.account}:/workspaces/{workspace_id}"


@jsii.implements(cdk.IResolvable)
class _DependenciesWithoutRole:
    """A function's `DependsOn` without its role, which the function's `Role` GetAtt already orders.

    aws_lambda makes every function depend on its role and the role's default policy; cfn-lint
    flags the first as redundant (W3005). The policy stays: CloudFormation may invoke the function
    only once the grants it needs exist. Resolved at synth, so dependencies added later are kept.
    """

    def __init__(self, function: cdk.CfnResource, role: cdk.CfnResource) -> None:
        self.function = function
        self.role = role

    @property
    def creation_stack(self) -> list[str]:
        return []

    def resolve(self, _context: cdk.IResolveContext) -> Any:
        stack = cdk.Stack.of(self.function)
        role_id = stack.resolve(self.role.logical_id)
        kept = sorted(
            {
                str(stack.resolve(dep.logical_id))
                for dep in self.function.obtain_dependencies()
                if isinstance(dep, cdk.CfnResource) and stack.resolve(dep.logical_id) != role_id
            }
        )
        return kept or None

    def to_string(self) -> str:
        return "<DependsOn without the role>"


def _drop_role_dependency(function: lambda_.Function) -> None:
    resource = function.node.default_child
    role = function.role.node.default_child if function.role is not None else None
    if isinstance(resource, cdk.CfnResource) and isinstance(role, cdk.CfnResource):
        resource.add_override("DependsOn", _DependenciesWithoutRole(resource, role))
