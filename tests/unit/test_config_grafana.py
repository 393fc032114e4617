"""`observability.grafana`: the presets that turn it on, and every invalid input with its message."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import ConfigError, load_preset
from gpufarm.config.sections.grafana import GrafanaAuthentication

from .factories import make_production, make_tier

SAML = {"idp_metadata_url": "https://idp.example.com/metadata", "admin_role_values": ["grafana-admins"]}


def grafana(**fields: Any) -> dict[str, Any]:
    return {"observability": {"grafana": {"enabled": True, **fields}}}


def issues_of(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make_production(*parts)
    return [str(issue) for issue in caught.value.issues]


def test_production_and_enterprise_have_grafana_and_poc_does_not() -> None:
    assert load_preset("production").observability.grafana.enabled
    assert load_preset("enterprise").observability.grafana.enabled
    assert not load_preset("poc").observability.grafana.enabled


def test_defaults_sign_in_with_identity_center_on_10_4() -> None:
    config = load_preset("production").observability.grafana
    assert config.authentication == [GrafanaAuthentication.AWS_SSO]
    assert config.grafana_version == "10.4"
    assert config.provisioning_token_seconds == 900
    assert config.saml is None


def test_saml_with_identity_center_is_accepted() -> None:
    tier = make_production(grafana(authentication=["AWS_SSO", "SAML"], saml=SAML))
    assert tier.observability.grafana.saml is not None
    assert tier.observability.grafana.saml.admin_role_values == ["grafana-admins"]


INVALID: list[Any] = [
    pytest.param(
        grafana(grafana_version="8.4"),
        [
            "observability.grafana.grafana_version: must be one of '9.4', '10.4', '12.4' (Amazon "
            "Managed Grafana versions with workspace service accounts), got '8.4'"
        ],
        id="version-without-service-accounts",
    ),
    pytest.param(
        grafana(authentication=["AWS_SSO", "AWS_SSO"]),
        ["observability.grafana.authentication: must not list a provider twice, got ['AWS_SSO', 'AWS_SSO']"],
        id="provider-twice",
    ),
    pytest.param(
        grafana(authentication=["SAML"]),
        [
            "observability.grafana.saml: must describe the identity provider (idp_metadata_url or "
            "idp_metadata_xml, and admin_role_values) while authentication lists 'SAML'; it is not set"
        ],
        id="saml-without-idp",
    ),
    pytest.param(
        grafana(saml=SAML),
        [
            "observability.grafana.saml: is only read with 'SAML' in authentication, got "
            "authentication ['AWS_SSO']"
        ],
        id="idp-without-saml",
    ),
    pytest.param(
        grafana(authentication=["SAML"], saml={**SAML, "idp_metadata_xml": "<md:EntityDescriptor/>"}),
        [
            "observability.grafana.saml: must set exactly one of idp_metadata_url and "
            "idp_metadata_xml (the workspace's IdpMetadata takes a URL or the XML), got "
            "['idp_metadata_url', 'idp_metadata_xml']"
        ],
        id="idp-url-and-xml",
    ),
    pytest.param(
        grafana(authentication=["SAML"], saml={"admin_role_values": ["admins"]}),
        [
            "observability.grafana.saml: must set exactly one of idp_metadata_url and "
            "idp_metadata_xml (the workspace's IdpMetadata takes a URL or the XML), got neither"
        ],
        id="idp-neither",
    ),
]


@pytest.mark.parametrize(("override", "expected"), INVALID)
def test_invalid_input_message(override: dict[str, Any], expected: list[str]) -> None:
    assert issues_of(override) == expected


SCHEMA_INVALID: list[Any] = [
    pytest.param(
        grafana(authentication=["OKTA"]),
        "observability.grafana.authentication[0]: must be one of 'AWS_SSO' or 'SAML', got 'OKTA'",
        id="unknown-provider",
    ),
    pytest.param(
        grafana(authentication=[]),
        "observability.grafana.authentication: must have at least 1 item(s), got 0",
        id="no-provider",
    ),
    pytest.param(
        grafana(provisioning_token_seconds=2592001),
        "observability.grafana.provisioning_token_seconds: must be <= 2592000, got 2592001",
        id="token-over-30-days",
    ),
    pytest.param(
        grafana(provisioning_token_seconds=59),
        "observability.grafana.provisioning_token_seconds: must be >= 60, got 59",
        id="token-under-a-minute",
    ),
    pytest.param(
        grafana(
            authentication=["SAML"],
            saml={"idp_metadata_url": "https://idp.example.com/m", "admin_role_values": []},
        ),
        "observability.grafana.saml.admin_role_values: must have at least 1 item(s), got 0",
        id="saml-no-admins",
    ),
]


@pytest.mark.parametrize(("override", "expected"), SCHEMA_INVALID)
def test_schema_refusals(override: dict[str, Any], expected: str) -> None:
    assert issues_of(override) == [expected]


def test_grafana_needs_prometheus() -> None:
    """poc has no Prometheus workspace: Grafana alone is refused, with one message."""
    with pytest.raises(ConfigError) as caught:
        make_tier(grafana())
    assert [str(i) for i in caught.value.issues] == [
        "observability.grafana.enabled: needs observability.prometheus.enabled: true (the "
        "workspace's dashboards read the tier's Amazon Managed Service for Prometheus "
        "workspace), got true without it"
    ]
