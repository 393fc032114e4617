"""Amazon Managed Grafana: a workspace on the tier's Prometheus workspace, with its dashboards.

The rules of the fields come from `AWS::Grafana::Workspace` and the Amazon Managed Grafana API:
https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-grafana-workspace.html
https://docs.aws.amazon.com/grafana/latest/APIReference/API_CreateWorkspaceServiceAccountToken.html
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from gpufarm.config.sections.values import HttpsUrl, _Model

GRAFANA_VERSIONS = ("9.4", "10.4", "12.4")
"""Workspace versions gpufarm accepts. Amazon Managed Grafana offers 8.4, 9.4, 10.4 and 12.4
(ListVersions names what a region offers; 10.4: What's New, 2024-05-15, "Amazon Managed Grafana
supports version 10.4"; 12.4: the user guide's "Grafana version 12 API reference"). 8.4 is left
out: workspace service accounts, which the dashboards are provisioned with, need version 9 or
later (CreateWorkspaceServiceAccount: "You can only create service accounts for workspaces that
are compatible with Grafana version 9 and above")."""

MAX_TOKEN_SECONDS = 30 * 24 * 3600
"""CreateWorkspaceServiceAccountToken `secondsToLive`: "You can set the time up to 30 days in the
future" (minimum 1)."""


class GrafanaAuthentication(StrEnum):
    """How people sign in to the workspace (`AuthenticationProviders`)."""

    AWS_SSO = "AWS_SSO"
    """AWS IAM Identity Center: must be enabled in the account or its organization."""
    SAML = "SAML"
    """A SAML 2.0 identity provider: needs `saml`."""


class GrafanaSamlConfig(_Model):
    """The SAML identity provider (`SamlConfiguration`); exactly one of the metadata fields."""

    idp_metadata_url: HttpsUrl | None = Field(None, description="URL of the IdP's SAML metadata.")
    idp_metadata_xml: str | None = Field(None, description="The IdP's SAML metadata document itself.")
    role_attribute: str = Field(
        "role", min_length=1, max_length=256, description="SAML assertion attribute that carries the role."
    )
    admin_role_values: list[str] = Field(
        min_length=1, description="Values of the role attribute that make a user a workspace Admin."
    )
    editor_role_values: list[str] = Field(
        [], description="Values of the role attribute that make a user an Editor (others are Viewers)."
    )
    login_validity_minutes: int = Field(
        60, ge=1, description="How long a SAML sign-in lasts before the user signs in again, minutes."
    )


class GrafanaConfig(_Model):
    """An Amazon Managed Grafana workspace reading the tier's Prometheus workspace, with dashboards."""

    enabled: bool = Field(
        False, description="Create the workspace, its data sources and the model, GPU and gateway dashboards."
    )
    authentication: list[GrafanaAuthentication] = Field(
        [GrafanaAuthentication.AWS_SSO],
        min_length=1,
        max_length=2,
        description="How people sign in: `AWS_SSO` (IAM Identity Center), `SAML`, or both.",
    )
    saml: GrafanaSamlConfig | None = Field(None, description="The SAML identity provider, with `SAML`.")
    grafana_version: str = Field(
        "10.4", description="Grafana version of the workspace (the dashboards are built for 10.4)."
    )
    provisioning_token_seconds: int = Field(
        900,
        ge=60,
        le=MAX_TOKEN_SECONDS,
        description="Lifetime of the service-account token each deploy provisions the dashboards "
        "with, seconds; the token is deleted when provisioning ends.",
    )
