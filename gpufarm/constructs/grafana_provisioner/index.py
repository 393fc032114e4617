"""Provisions an Amazon Managed Grafana workspace: data sources, a folder and dashboards.

CloudFormation has no resource for what lives inside a Grafana workspace, so a custom resource
runs this handler (under the CDK provider framework, which answers CloudFormation). Each run:

1. finds or creates the workspace service account `gpufarm-provisioner` (Grafana role ADMIN:
   data sources need an organization admin) with `CreateWorkspaceServiceAccount`;
2. creates a short-lived token for it with `CreateWorkspaceServiceAccountToken`
   (`secondsToLive` at most 30 days);
3. calls the workspace's Grafana HTTP API with that token: data sources (create, or update by
   UID), the folder, and every dashboard (`POST /api/dashboards/db` with `overwrite`); on an
   update, dashboards no longer listed are deleted; on delete, everything it created goes;
4. deletes the token, whatever happened (and on delete, the service account).

Amazon Managed Grafana documents service accounts as the way automation calls the Grafana HTTP
API: https://docs.aws.amazon.com/grafana/latest/userguide/service-accounts.html and
https://docs.aws.amazon.com/grafana/latest/APIReference/API_CreateWorkspaceServiceAccountToken.html.
The Grafana HTTP API paths are Grafana's: https://grafana.com/docs/grafana/latest/developers/http_api/.

Standard library and boto3 only: the Lambda Python runtime provides both.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

SERVICE_ACCOUNT = "gpufarm-provisioner"
SERVICE_ACCOUNT_ROLE = "ADMIN"
TIMEOUT_SECONDS = 30


class GrafanaApiError(RuntimeError):
    """The Grafana HTTP API answered with an unexpected status."""


class GrafanaApi:
    """A minimal client of the Grafana HTTP API at `base_url`, authenticated by `token`."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token

    def call(self, method: str, path: str, body: Any = None, *, missing_ok: bool = False) -> Any:
        """`method` `path` with a JSON `body`; the JSON answer, or None for a 404 when `missing_ok`."""
        data = None if body is None else json.dumps(body, sort_keys=True).encode()
        request = urllib.request.Request(
            f"{self.base_url}{path}",
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as error:
            if error.code == 404 and missing_ok:
                return None
            detail = error.read().decode(errors="replace")[:500]
            raise GrafanaApiError(f"{method} {path}: HTTP {error.code}: {detail}") from error
        return json.loads(text) if text else {}


def data_sources(props: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The data sources of the workspace: the tier's AMP workspace and CloudWatch.

    Both sign their requests with the workspace's IAM role: `ec2_iam_role` is the AWS SDK
    credentials chain of the Grafana server, shown as "Workspace IAM Role" in Amazon Managed
    Grafana (https://grafana.com/docs/grafana/latest/datasources/aws-cloudwatch/aws-authentication/).
    """
    region = props["Region"]
    return [
        {
            "uid": props["PrometheusUid"],
            "name": "Amazon Managed Service for Prometheus",
            "type": "prometheus",
            "access": "proxy",
            "url": props["PrometheusUrl"],
            "isDefault": True,
            "jsonData": {
                "httpMethod": "POST",
                "sigV4Auth": True,
                "sigV4AuthType": "ec2_iam_role",
                "sigV4Region": region,
            },
        },
        {
            "uid": props["CloudWatchUid"],
            "name": "Amazon CloudWatch",
            "type": "cloudwatch",
            "access": "proxy",
            "jsonData": {"authType": "ec2_iam_role", "defaultRegion": region},
        },
    ]


def dashboards_of(props: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The dashboards a set of resource properties lists (a JSON string, as CloudFormation passes it)."""
    if not props or "Dashboards" not in props:
        return []
    boards: list[dict[str, Any]] = json.loads(props["Dashboards"])
    return boards


def apply(api: GrafanaApi, props: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
    """Create or update the data sources, the folder and the dashboards of `props`."""
    for source in data_sources(props):
        uid = source["uid"]
        if api.call("GET", f"/api/datasources/uid/{uid}", missing_ok=True) is None:
            api.call("POST", "/api/datasources", source)
        else:
            api.call("PUT", f"/api/datasources/uid/{uid}", source)
    folder = props["FolderUid"]
    if api.call("GET", f"/api/folders/{folder}", missing_ok=True) is None:
        api.call("POST", "/api/folders", {"uid": folder, "title": props["FolderTitle"]})
    boards = dashboards_of(props)
    for board in boards:
        api.call(
            "POST",
            "/api/dashboards/db",
            {"dashboard": board, "folderUid": folder, "overwrite": True, "message": "gpufarm deploy"},
        )
    kept = {board["uid"] for board in boards}
    for board in dashboards_of(old):
        if board["uid"] not in kept:
            api.call("DELETE", f"/api/dashboards/uid/{board['uid']}", missing_ok=True)


def remove(api: GrafanaApi, props: Mapping[str, Any]) -> None:
    """Delete what :func:`apply` created; what is already gone is no error."""
    for board in dashboards_of(props):
        api.call("DELETE", f"/api/dashboards/uid/{board['uid']}", missing_ok=True)
    api.call("DELETE", f"/api/folders/{props['FolderUid']}", missing_ok=True)
    for source in data_sources(props):
        api.call("DELETE", f"/api/datasources/uid/{source['uid']}", missing_ok=True)


def _service_account(client: Any, workspace_id: str) -> str:
    """The ID of the provisioner's service account, created when missing."""
    paginator = client.get_paginator("list_workspace_service_accounts")
    for page in paginator.paginate(workspaceId=workspace_id):
        for account in page["serviceAccounts"]:
            if account["name"] == SERVICE_ACCOUNT:
                return str(account["id"])
    created = client.create_workspace_service_account(
        workspaceId=workspace_id, name=SERVICE_ACCOUNT, grafanaRole=SERVICE_ACCOUNT_ROLE
    )
    return str(created["id"])


def provision(client: Any, *, base_url: str, event: Mapping[str, Any]) -> dict[str, Any]:
    """Run one CloudFormation request (`event`) against the workspace at `base_url`.

    `client` is a boto3 `grafana` client. Returns the provider framework's answer.
    """
    props = event["ResourceProperties"]
    workspace_id = props["WorkspaceId"]
    request = event["RequestType"]
    account_id = _service_account(client, workspace_id)
    token = client.create_workspace_service_account_token(
        workspaceId=workspace_id,
        serviceAccountId=account_id,
        name=f"deploy-{event['RequestId']}"[:128],
        secondsToLive=int(props["TokenSeconds"]),
    )["serviceAccountToken"]
    try:
        api = GrafanaApi(base_url, token["key"])
        if request == "Delete":
            remove(api, props)
        else:
            apply(api, props, event.get("OldResourceProperties") if request == "Update" else None)
    finally:
        client.delete_workspace_service_account_token(
            workspaceId=workspace_id, serviceAccountId=account_id, tokenId=token["id"]
        )
        if request == "Delete":
            client.delete_workspace_service_account(workspaceId=workspace_id, serviceAccountId=account_id)
    return {
        "PhysicalResourceId": f"{workspace_id}/{props['FolderUid']}",
        "Data": {"Dashboards": ",".join(b["uid"] for b in dashboards_of(props))},
    }


def on_event(event: Mapping[str, Any], _context: object) -> dict[str, Any]:
    """The Lambda entry point: provision the workspace named by the event's properties."""
    import boto3  # the Lambda runtime's; imported here so tests need no credentials to import

    client = boto3.client("grafana")
    return provision(
        client, base_url=f"https://{event['ResourceProperties']['WorkspaceEndpoint']}", event=event
    )
