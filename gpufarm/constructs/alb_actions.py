"""The listener actions of the inference ALB: forward (to one or weighted target groups) and authenticate.

Written as CloudFormation properties (`CfnListenerRule.ActionProperty`) so a model's rule and the
listener's default action (:func:`action_json`) are built the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_elasticloadbalancingv2 as elbv2

from gpufarm.config.model import CognitoAuthConfig, OidcAuthConfig

UNAUTHENTICATED_REQUEST = "deny"
"""API clients cannot follow a login redirect: without a valid session cookie the ALB answers 401."""


def secret_reference(secret: str) -> str:
    """A CloudFormation dynamic reference to a Secrets Manager secret's string (name or ARN).

    CloudFormation resolves it at deploy time: the secret never appears in the template.
    """
    return f"{{{{resolve:secretsmanager:{secret}:SecretString}}}}"


def forward(
    target_group: elbv2.CfnTargetGroup | None,
    weighted: Sequence[tuple[elbv2.CfnTargetGroup, int]],
    *,
    order: int | None,
) -> elbv2.CfnListenerRule.ActionProperty:
    """A forward action to `target_group`, else to the `weighted` target groups by weight."""
    if target_group is not None:
        return elbv2.CfnListenerRule.ActionProperty(
            type="forward", order=order, target_group_arn=target_group.ref
        )
    return elbv2.CfnListenerRule.ActionProperty(
        type="forward",
        order=order,
        forward_config=elbv2.CfnListenerRule.ForwardConfigProperty(
            target_groups=[
                elbv2.CfnListenerRule.TargetGroupTupleProperty(target_group_arn=tg.ref, weight=weight)
                for tg, weight in weighted
            ]
        ),
    )


def action_json(action: elbv2.CfnListenerRule.ActionProperty) -> dict[str, object]:
    """A listener-rule action as the CloudFormation JSON a listener's DefaultActions takes."""
    out: dict[str, object] = {"Type": action.type}
    if action.order is not None:
        out["Order"] = action.order
    if action.target_group_arn is not None:
        out["TargetGroupArn"] = action.target_group_arn
    if action.authenticate_oidc_config is not None:
        oidc = action.authenticate_oidc_config
        assert isinstance(oidc, elbv2.CfnListenerRule.AuthenticateOidcConfigProperty)
        out["AuthenticateOidcConfig"] = {
            "Issuer": oidc.issuer,
            "AuthorizationEndpoint": oidc.authorization_endpoint,
            "TokenEndpoint": oidc.token_endpoint,
            "UserInfoEndpoint": oidc.user_info_endpoint,
            "ClientId": oidc.client_id,
            "ClientSecret": oidc.client_secret,
            "OnUnauthenticatedRequest": oidc.on_unauthenticated_request,
        }
    if action.authenticate_cognito_config is not None:
        cognito = action.authenticate_cognito_config
        assert isinstance(cognito, elbv2.CfnListenerRule.AuthenticateCognitoConfigProperty)
        out["AuthenticateCognitoConfig"] = {
            "UserPoolArn": cognito.user_pool_arn,
            "UserPoolClientId": cognito.user_pool_client_id,
            "UserPoolDomain": cognito.user_pool_domain,
            "OnUnauthenticatedRequest": cognito.on_unauthenticated_request,
        }
    return out


def oidc_config(cfg: OidcAuthConfig) -> elbv2.CfnListenerRule.AuthenticateOidcConfigProperty:
    return elbv2.CfnListenerRule.AuthenticateOidcConfigProperty(
        issuer=cfg.issuer,
        authorization_endpoint=cfg.authorization_endpoint,
        token_endpoint=cfg.token_endpoint,
        user_info_endpoint=cfg.user_info_endpoint,
        client_id=cfg.client_id,
        client_secret=secret_reference(cfg.client_secret),
        on_unauthenticated_request=UNAUTHENTICATED_REQUEST,
    )


def cognito_config(cfg: CognitoAuthConfig) -> elbv2.CfnListenerRule.AuthenticateCognitoConfigProperty:
    return elbv2.CfnListenerRule.AuthenticateCognitoConfigProperty(
        user_pool_arn=cfg.user_pool_arn,
        user_pool_client_id=cfg.user_pool_client_id,
        user_pool_domain=cfg.user_pool_domain,
        on_unauthenticated_request=UNAUTHENTICATED_REQUEST,
    )
