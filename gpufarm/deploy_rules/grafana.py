"""Amazon Managed Grafana: what CreateWorkspace refuses, and what a workspace needs to be usable
and provisioned (the dashboards' custom resource)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_int, literal_str
from gpufarm.deploy_rules.shapes import name_rule, resource

WORKSPACE = "AWS::Grafana::Workspace"
DASHBOARDS = "Custom::GrafanaDashboards"

_WORKSPACE_DOC = "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-grafana-workspace.html"
_TOKEN_DOC = (
    "https://docs.aws.amazon.com/grafana/latest/APIReference/API_CreateWorkspaceServiceAccountToken.html"
)
_SERVICE_ACCOUNT_DOC = (
    "https://docs.aws.amazon.com/grafana/latest/APIReference/API_CreateWorkspaceServiceAccount.html"
)

MAX_TOKEN_SECONDS = 30 * 24 * 3600
SERVICE_ACCOUNT_VERSIONS = ("9.4", "10.4", "12.4")
"""Workspace versions with service accounts ("compatible with Grafana version 9 and above")."""

_BASE: dict[str, Any] = {
    "AccountAccessType": "CURRENT_ACCOUNT",
    "AuthenticationProviders": ["AWS_SSO"],
    "PermissionType": "CUSTOMER_MANAGED",
    "RoleArn": "arn:aws:iam::123456789012:role/grafana",
}


def _workspace(**properties: Any) -> dict[str, Any]:
    merged = {**_BASE, **properties}
    return resource(WORKSPACE, **{k: v for k, v in merged.items() if v is not None})


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _saml(res: Resource, _template: Template) -> Iterator[str]:
    # AuthenticationProviders: SAML, AWS_SSO or both; SamlConfiguration: "If the workspace uses
    # SAML, use this structure to map SAML assertion attributes ...". IdpMetadata is a union:
    # "A structure containing the identity provider (IdP) metadata ... Url or Xml" (one of them).
    providers = _list(res.prop("AuthenticationProviders"))
    saml = res.prop("SamlConfiguration")
    if "SAML" in providers and not isinstance(saml, Mapping):
        yield "AuthenticationProviders lists SAML without SamlConfiguration: nobody can sign in with SAML"
        return
    if isinstance(saml, Mapping):
        metadata = saml.get("IdpMetadata")
        given = [k for k in ("Url", "Xml") if isinstance(metadata, Mapping) and metadata.get(k)]
        if len(given) != 1:
            yield f"SamlConfiguration.IdpMetadata sets {given or 'neither Url nor Xml'}; it takes exactly one"


def _customer_role(res: Resource, _template: Template) -> Iterator[str]:
    # PermissionType: "If this is CUSTOMER_MANAGED, you must manage those roles and permissions
    # yourself"; RoleArn: "The IAM role that grants permissions to the AWS resources that the
    # workspace will view data from". DataSources: "only used when the workspace was created
    # through the AWS console, and the permissionType is SERVICE_MANAGED".
    if literal_str(res.prop("PermissionType")) == "CUSTOMER_MANAGED":
        if res.prop("RoleArn") is None:
            yield "PermissionType CUSTOMER_MANAGED without RoleArn: the workspace can read no data source"
        if _list(res.prop("DataSources")):
            yield "DataSources is ignored with PermissionType CUSTOMER_MANAGED; grant the role instead"


def _organization(res: Resource, _template: Template) -> Iterator[str]:
    # AccountAccessType: "If this is ORGANIZATION, the OrganizationalUnits parameter specifies
    # which organizational units the workspace can access."
    units = _list(res.prop("OrganizationalUnits"))
    if units and literal_str(res.prop("AccountAccessType")) == "CURRENT_ACCOUNT":
        yield "OrganizationalUnits set with AccountAccessType CURRENT_ACCOUNT; they need ORGANIZATION"


def _version(res: Resource, template: Template) -> Iterator[str]:
    # CreateWorkspaceServiceAccount: "You can only create service accounts for workspaces that
    # are compatible with Grafana version 9 and above." The dashboards' provisioner uses one.
    version = literal_str(res.prop("GrafanaVersion"))
    provisioned = any(_mentions(other.properties, res.logical_id) for other in template.of_type(DASHBOARDS))
    if provisioned and version is not None and version not in SERVICE_ACCOUNT_VERSIONS:
        yield (
            f"GrafanaVersion {version!r} has no service accounts, which the dashboards' provisioner "
            f"needs; use one of {', '.join(SERVICE_ACCOUNT_VERSIONS)}"
        )


def _mentions(value: Any, logical_id: str) -> bool:
    if isinstance(value, Mapping):
        if value.get("Ref") == logical_id:
            return True
        getatt = value.get("Fn::GetAtt")
        if isinstance(getatt, list) and getatt and getatt[0] == logical_id:
            return True
        return any(_mentions(v, logical_id) for v in value.values())
    if isinstance(value, list):
        return any(_mentions(v, logical_id) for v in value)
    return False


def _token_seconds(res: Resource, _template: Template) -> Iterator[str]:
    # CreateWorkspaceServiceAccountToken, secondsToLive: "Valid Range: Minimum value of 1";
    # "You can set the time up to 30 days in the future".
    seconds = literal_int(res.prop("TokenSeconds"))
    if seconds is not None and not 1 <= seconds <= MAX_TOKEN_SECONDS:
        yield f"TokenSeconds {seconds}; a service-account token lives 1 to {MAX_TOKEN_SECONDS} s (30 days)"


def _dashboards(workspace: str, seconds: Any) -> dict[str, Any]:
    return resource(
        DASHBOARDS,
        ServiceToken="arn:aws:lambda:us-east-1:123456789012:function:provider",
        WorkspaceId={"Fn::GetAtt": [workspace, "Id"]},
        TokenSeconds=seconds,
    )


RULES: tuple[Rule, ...] = (
    name_rule(
        id="GRAFANA-WORKSPACE-NAME",
        resource_type=WORKSPACE,
        prop="Name",
        # Name: "Pattern: ^[a-zA-Z0-9-._~]{1,255}$".
        pattern=r"[a-zA-Z0-9\-._~]{1,255}",
        max_length=255,
        allowed="letters, digits and -._~",
        doc_url=_WORKSPACE_DOC,
        bad="gpufarm production",
        good="gpufarm-production",
        **_BASE,
    ),
    Rule(
        id="GRAFANA-WORKSPACE-SAML",
        resource_type=WORKSPACE,
        title="A SAML workspace has a SamlConfiguration with one IdP metadata source",
        doc_url=_WORKSPACE_DOC,
        check=_saml,
        bad={"W": _workspace(AuthenticationProviders=["SAML"])},
        good={
            "W": _workspace(
                AuthenticationProviders=["SAML"],
                SamlConfiguration={
                    "IdpMetadata": {"Url": "https://idp.example.com/metadata"},
                    "RoleValues": {"Admin": ["admins"]},
                },
            )
        },
    ),
    Rule(
        id="GRAFANA-WORKSPACE-CUSTOMER-ROLE",
        resource_type=WORKSPACE,
        title="A customer-managed workspace names its role and no console-only DataSources",
        doc_url=_WORKSPACE_DOC,
        check=_customer_role,
        bad={"W": _workspace(RoleArn=None, DataSources=["PROMETHEUS"])},
        good={"W": _workspace()},
    ),
    Rule(
        id="GRAFANA-WORKSPACE-ORGANIZATIONAL-UNITS",
        resource_type=WORKSPACE,
        title="OrganizationalUnits only with AccountAccessType ORGANIZATION",
        doc_url=_WORKSPACE_DOC,
        check=_organization,
        bad={"W": _workspace(OrganizationalUnits=["ou-ab12-cdef3456"])},
        good={"W": _workspace(AccountAccessType="ORGANIZATION", OrganizationalUnits=["ou-ab12-cdef3456"])},
    ),
    Rule(
        id="GRAFANA-WORKSPACE-SERVICE-ACCOUNTS",
        resource_type=WORKSPACE,
        title="A provisioned workspace runs a Grafana version with service accounts",
        doc_url=_SERVICE_ACCOUNT_DOC,
        check=_version,
        bad={"W": _workspace(GrafanaVersion="8.4"), "D": _dashboards("W", "900")},
        good={"W": _workspace(GrafanaVersion="10.4"), "D": _dashboards("W", "900")},
    ),
    Rule(
        id="GRAFANA-DASHBOARDS-TOKEN-LIFETIME",
        resource_type=DASHBOARDS,
        title="The provisioning token lives 1 s to 30 days",
        doc_url=_TOKEN_DOC,
        check=_token_seconds,
        bad={"W": _workspace(), "D": _dashboards("W", "2592001")},
        good={"W": _workspace(), "D": _dashboards("W", "900")},
    ),
)
