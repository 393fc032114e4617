"""Provisions an Amazon Managed Grafana workspace: data sources, a folder and dashboards.

CloudFormation has no resource for what lives inside a Grafana workspace, so a custom resource
invokes this handler directly (its `ServiceToken` is this function's ARN) and the handler answers
CloudFormation itself (:func:`answer`). Each run:

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

Answering CloudFormation. CloudFormation invokes the function asynchronously
(https://docs.aws.amazon.com/lambda/latest/dg/services-cloudformation.html) and waits for a JSON
response PUT to the request's pre-signed `ResponseURL`: `Status` (SUCCESS or FAILED), `Reason`
(required when FAILED), `PhysicalResourceId`, and `StackId`, `RequestId`, `LogicalResourceId`
copied from the request, optionally `NoEcho` and `Data`; the whole body at most 4096 bytes
(https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html; the
request fields: https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-requests.html).
The PUT carries an empty `Content-Type`, as AWS's own `cfn-response` module sends it
(https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cfn-lambda-function-code-cfnresponsemodule.html).

The handler always answers: an exception becomes FAILED with its message as the reason, and a
run still going `ANSWER_MARGIN_SECONDS` before the Lambda timeout is answered FAILED and left
behind, so the function returns before Lambda stops it. A function error (a raised exception or
a timeout) would make Lambda run the same request up to twice more
(https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html), answering a
request CloudFormation already has an answer for. A failed Create answers with the physical ID
`CREATE_FAILED`; CloudFormation then sends a Delete with that ID, which is answered SUCCESS with
nothing to remove (the rule aws-cdk's provider framework follows, aws/aws-cdk pull request 5525).
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

SERVICE_ACCOUNT = "gpufarm-provisioner"
SERVICE_ACCOUNT_ROLE = "ADMIN"
TIMEOUT_SECONDS = 30
ANSWER_MARGIN_SECONDS = 20
"""How long before the Lambda timeout a run still going is answered FAILED."""
RESPONSE_MAX_BYTES = 4096
"""CloudFormation's limit on the whole response body (crpg-ref-responses)."""
CREATE_FAILED = "gpufarm-grafana-create-failed"
"""The physical ID of a Create that failed; the Delete that follows it has nothing to remove."""

LOG = logging.getLogger(__name__)


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

    `client` is a boto3 `grafana` client. Returns the resource's physical ID and `Data`.
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


def response_body(
    event: Mapping[str, Any],
    *,
    status: str,
    physical_id: str,
    reason: str = "",
    data: Mapping[str, str] | None = None,
) -> bytes:
    """The JSON response to one CloudFormation request; `reason` is cut to keep it in 4096 bytes."""
    body: dict[str, Any] = {
        "Status": status,
        "Reason": "",
        "PhysicalResourceId": physical_id,
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "NoEcho": False,
        "Data": dict(data or {}),
    }
    body["Reason"] = _fit(reason, RESPONSE_MAX_BYTES - len(json.dumps(body).encode()))
    return json.dumps(body).encode()


def _fit(text: str, room: int) -> str:
    """The longest start of `text` (then "...") whose JSON encoding takes at most `room` bytes."""

    def size(part: str) -> int:  # json.dumps escapes non-ASCII, so its length is the byte count
        return len(json.dumps(part)) - 2

    if size(text) <= room:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if size(text[:middle]) + 3 <= room:
            low = middle
        else:
            high = middle - 1
    return text[:low] + "..." if room >= 3 else ""


def send(url: str, body: bytes) -> None:
    """PUT `body` to CloudFormation's pre-signed response URL (an empty Content-Type, as signed)."""
    request = urllib.request.Request(
        url, data=body, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(body))}
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
        response.read()


def answer(
    event: Mapping[str, Any],
    work: Callable[[], Mapping[str, Any]],
    *,
    seconds: float,
    log_stream: str = "",
) -> dict[str, Any]:
    """Run `work` (:func:`provision`) for one request and PUT CloudFormation's response; return it.

    `work` returns the physical ID and `Data`. An exception it raises, or a run still going after
    `seconds`, is answered FAILED with the reason (and `log_stream`, where the traceback is).
    """
    request = event["RequestType"]
    failed_id = (
        CREATE_FAILED if request == "Create" else str(event.get("PhysicalResourceId") or CREATE_FAILED)
    )
    where = f" (log stream {log_stream})" if log_stream else ""
    response: dict[str, Any]
    if request == "Delete" and event.get("PhysicalResourceId") == CREATE_FAILED:
        response = {
            "Status": "SUCCESS",
            "PhysicalResourceId": CREATE_FAILED,
            "Reason": "the create had failed",
        }
    else:
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["result"] = work()
            except Exception as error:  # every failure is CloudFormation's answer
                LOG.exception("%s request %s failed", request, event.get("RequestId"))
                outcome["error"] = error

        worker = threading.Thread(target=run, name="provision", daemon=True)
        worker.start()
        worker.join(max(seconds, 0.0))
        if worker.is_alive():
            response = {
                "Status": "FAILED",
                "PhysicalResourceId": failed_id,
                "Reason": f"no result within {seconds:.0f} s, before the Lambda timeout{where}",
            }
        elif "error" in outcome:
            error = outcome["error"]
            response = {
                "Status": "FAILED",
                "PhysicalResourceId": failed_id,
                "Reason": f"{type(error).__name__}: {error}{where}",
            }
        else:
            result = outcome["result"]
            response = {
                "Status": "SUCCESS",
                "PhysicalResourceId": str(result["PhysicalResourceId"]),
                "Data": dict(result.get("Data") or {}),
            }
    send(
        str(event["ResponseURL"]),
        response_body(
            event,
            status=response["Status"],
            physical_id=response["PhysicalResourceId"],
            reason=response.get("Reason", ""),
            data=response.get("Data"),
        ),
    )
    return response


def on_event(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """The Lambda entry point: provision the workspace named by the event's properties, and answer.

    A failure to PUT the answer is raised, so that Lambda runs the request again.
    """

    def work() -> dict[str, Any]:
        import boto3  # the Lambda runtime's; imported here so tests need no credentials to import

        return provision(
            boto3.client("grafana"),
            base_url=f"https://{event['ResourceProperties']['WorkspaceEndpoint']}",
            event=event,
        )

    seconds = context.get_remaining_time_in_millis() / 1000 - ANSWER_MARGIN_SECONDS
    return answer(event, work, seconds=seconds, log_stream=str(getattr(context, "log_stream_name", "")))
