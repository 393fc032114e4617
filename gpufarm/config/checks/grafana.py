"""Checks of the Amazon Managed Grafana workspace (`observability.grafana`).

The rules are those `AWS::Grafana::Workspace` and the Amazon Managed Grafana API state:
https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-grafana-workspace.html
(AuthenticationProviders, SamlConfiguration) and
https://docs.aws.amazon.com/grafana/latest/APIReference/API_CreateWorkspace.html.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpufarm.config.checks.common import _quoted
from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import TierConfig
from gpufarm.config.sections.grafana import GRAFANA_VERSIONS, GrafanaAuthentication

_PATH = "observability.grafana"


def _grafana(cfg: TierConfig) -> Iterator[ConfigIssue]:
    grafana = cfg.observability.grafana
    if not grafana.enabled:
        return
    if not cfg.observability.prometheus.enabled:
        yield ConfigIssue(
            path=f"{_PATH}.enabled",
            message="needs observability.prometheus.enabled: true (the workspace's dashboards read "
            "the tier's Amazon Managed Service for Prometheus workspace), got true without it",
        )
    if grafana.grafana_version not in GRAFANA_VERSIONS:
        yield ConfigIssue(
            path=f"{_PATH}.grafana_version",
            message=f"must be one of {_quoted(GRAFANA_VERSIONS)} (Amazon Managed Grafana versions "
            f"with workspace service accounts), got {grafana.grafana_version!r}",
        )
    providers = [p.value for p in grafana.authentication]
    if len(set(providers)) != len(providers):
        yield ConfigIssue(
            path=f"{_PATH}.authentication",
            message=f"must not list a provider twice, got {providers}",
        )
    saml_listed = GrafanaAuthentication.SAML in grafana.authentication
    if saml_listed and grafana.saml is None:
        yield ConfigIssue(
            path=f"{_PATH}.saml",
            message="must describe the identity provider (idp_metadata_url or idp_metadata_xml, and "
            "admin_role_values) while authentication lists 'SAML'; it is not set",
        )
    if grafana.saml is not None:
        if not saml_listed:
            yield ConfigIssue(
                path=f"{_PATH}.saml",
                message=f"is only read with 'SAML' in authentication, got authentication {providers}",
            )
        given = [
            name
            for name, value in (
                ("idp_metadata_url", grafana.saml.idp_metadata_url),
                ("idp_metadata_xml", grafana.saml.idp_metadata_xml),
            )
            if value
        ]
        if len(given) != 1:
            yield ConfigIssue(
                path=f"{_PATH}.saml",
                message="must set exactly one of idp_metadata_url and idp_metadata_xml (the "
                f"workspace's IdpMetadata takes a URL or the XML), got {given or 'neither'}",
            )
