"""The Grafana provisioner's handler, against a local HTTP server standing for a workspace's
Grafana API and a stubbed Amazon Managed Grafana API.

moto has no Amazon Managed Grafana backend, so the AWS calls go through botocore's Stubber: it
checks every request against the service model (names and types of parameters) and the test
asserts the calls and their order, the token's deletion included.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from gpufarm.constructs.grafana_provisioner.index import (
    SERVICE_ACCOUNT,
    GrafanaApiError,
    provision,
)

WORKSPACE = "g-0123456789"
ACCOUNT = "42"
TOKEN = {"id": "7", "key": "glsa_secret", "name": "deploy-req-1"}


class FakeGrafana:
    """What the workspace holds, and every request it was sent."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any, str | None]] = []
        self.datasources: dict[str, Any] = {}
        self.folders: dict[str, Any] = {}
        self.dashboards: dict[str, Any] = {}
        self.fail_dashboards = False

    def handle(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        kind, _, uid = path.removeprefix("/api/").partition("/")
        if kind == "datasources":
            uid = uid.removeprefix("uid/")
            store = self.datasources
        elif kind == "folders":
            store = self.folders
        else:
            uid = uid.removeprefix("uid/").removeprefix("db")
            store = self.dashboards
        if method == "GET":
            return (200, store[uid]) if uid in store else (404, {"message": "not found"})
        if method in ("POST", "PUT"):
            if store is self.dashboards:
                if self.fail_dashboards:
                    return 500, {"message": "boom"}
                store[body["dashboard"]["uid"]] = body
            else:
                store[body["uid"]] = body
            return 200, {"status": "success"}
        if method == "DELETE":
            return (200, {}) if store.pop(uid, None) is not None else (404, {"message": "not found"})
        return 405, {}


@pytest.fixture
def grafana() -> Iterator[tuple[FakeGrafana, str]]:
    fake = FakeGrafana()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            fake.requests.append((self.command, self.path, body, self.headers.get("Authorization")))
            status, answer = fake.handle(self.command, self.path, body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_PUT(self) -> None:
            self._serve()

        def do_DELETE(self) -> None:
            self._serve()

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def props(*uids: str) -> dict[str, Any]:
    return {
        "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:provider",
        "WorkspaceId": WORKSPACE,
        "WorkspaceEndpoint": f"{WORKSPACE}.grafana-workspace.us-east-1.amazonaws.com",
        "Region": "us-east-1",
        "PrometheusUrl": "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1/",
        "PrometheusUid": "gpufarm-amp",
        "CloudWatchUid": "gpufarm-cloudwatch",
        "FolderUid": "gpufarm",
        "FolderTitle": "gpufarm",
        "TokenSeconds": "900",
        "Dashboards": json.dumps([{"uid": uid, "title": uid, "panels": []} for uid in uids]),
    }


def client_with(*, existing: bool, delete_account: bool = False) -> tuple[Any, Stubber]:
    client = boto3.client(
        "grafana", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stub = Stubber(client)
    accounts = [{"id": ACCOUNT, "name": SERVICE_ACCOUNT, "grafanaRole": "ADMIN", "isDisabled": "false"}]
    stub.add_response(
        "list_workspace_service_accounts",
        {"serviceAccounts": accounts if existing else [], "workspaceId": WORKSPACE},
        {"workspaceId": WORKSPACE},
    )
    if not existing:
        stub.add_response(
            "create_workspace_service_account",
            {"id": ACCOUNT, "name": SERVICE_ACCOUNT, "grafanaRole": "ADMIN", "workspaceId": WORKSPACE},
            {"workspaceId": WORKSPACE, "name": SERVICE_ACCOUNT, "grafanaRole": "ADMIN"},
        )
    stub.add_response(
        "create_workspace_service_account_token",
        {"serviceAccountId": ACCOUNT, "serviceAccountToken": TOKEN, "workspaceId": WORKSPACE},
        {"workspaceId": WORKSPACE, "serviceAccountId": ACCOUNT, "name": "deploy-req-1", "secondsToLive": 900},
    )
    stub.add_response(
        "delete_workspace_service_account_token",
        {"serviceAccountId": ACCOUNT, "tokenId": "7", "workspaceId": WORKSPACE},
        {"workspaceId": WORKSPACE, "serviceAccountId": ACCOUNT, "tokenId": "7"},
    )
    if delete_account:
        stub.add_response(
            "delete_workspace_service_account",
            {"serviceAccountId": ACCOUNT, "workspaceId": WORKSPACE},
            {"workspaceId": WORKSPACE, "serviceAccountId": ACCOUNT},
        )
    stub.activate()
    return client, stub


def event(request: str, new: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"RequestType": request, "RequestId": "req-1", "ResourceProperties": new}
    if old is not None:
        found["OldResourceProperties"] = old
    return found


def test_create_makes_data_sources_folder_and_dashboards_then_drops_the_token(
    grafana: tuple[FakeGrafana, str],
) -> None:
    fake, url = grafana
    client, stub = client_with(existing=False)
    answer = provision(client, base_url=url, event=event("Create", props("models", "fleet")))
    stub.assert_no_pending_responses()
    assert answer == {"PhysicalResourceId": f"{WORKSPACE}/gpufarm", "Data": {"Dashboards": "models,fleet"}}
    assert [(m, p) for m, p, _, _ in fake.requests] == [
        ("GET", "/api/datasources/uid/gpufarm-amp"),
        ("POST", "/api/datasources"),
        ("GET", "/api/datasources/uid/gpufarm-cloudwatch"),
        ("POST", "/api/datasources"),
        ("GET", "/api/folders/gpufarm"),
        ("POST", "/api/folders"),
        ("POST", "/api/dashboards/db"),
        ("POST", "/api/dashboards/db"),
    ]
    assert {auth for *_, auth in fake.requests} == {"Bearer glsa_secret"}
    amp = fake.datasources["gpufarm-amp"]
    assert amp["type"] == "prometheus"
    assert amp["url"] == "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1/"
    assert amp["jsonData"] == {
        "httpMethod": "POST",
        "sigV4Auth": True,
        "sigV4AuthType": "ec2_iam_role",
        "sigV4Region": "us-east-1",
    }
    assert fake.datasources["gpufarm-cloudwatch"]["jsonData"] == {
        "authType": "ec2_iam_role",
        "defaultRegion": "us-east-1",
    }
    assert fake.folders == {"gpufarm": {"uid": "gpufarm", "title": "gpufarm"}}
    posted = fake.dashboards["models"]
    assert posted["overwrite"] is True
    assert posted["folderUid"] == "gpufarm"
    assert posted["dashboard"] == {"uid": "models", "title": "models", "panels": []}


def test_update_overwrites_and_drops_dashboards_no_longer_listed(grafana: tuple[FakeGrafana, str]) -> None:
    fake, url = grafana
    client, stub = client_with(existing=False)
    provision(client, base_url=url, event=event("Create", props("models", "gateway")))
    fake.requests.clear()
    client, stub = client_with(existing=True)
    provision(client, base_url=url, event=event("Update", props("models"), old=props("models", "gateway")))
    stub.assert_no_pending_responses()
    assert [(m, p) for m, p, _, _ in fake.requests] == [
        ("GET", "/api/datasources/uid/gpufarm-amp"),
        ("PUT", "/api/datasources/uid/gpufarm-amp"),
        ("GET", "/api/datasources/uid/gpufarm-cloudwatch"),
        ("PUT", "/api/datasources/uid/gpufarm-cloudwatch"),
        ("GET", "/api/folders/gpufarm"),
        ("POST", "/api/dashboards/db"),
        ("DELETE", "/api/dashboards/uid/gateway"),
    ]
    assert set(fake.dashboards) == {"models"}


def test_delete_removes_everything_and_the_service_account(grafana: tuple[FakeGrafana, str]) -> None:
    fake, url = grafana
    client, _ = client_with(existing=False)
    provision(client, base_url=url, event=event("Create", props("models")))
    client, stub = client_with(existing=True, delete_account=True)
    provision(client, base_url=url, event=event("Delete", props("models", "gone")))
    stub.assert_no_pending_responses()
    assert fake.dashboards == {} and fake.folders == {} and fake.datasources == {}


def test_a_grafana_error_fails_the_deploy_and_still_deletes_the_token(
    grafana: tuple[FakeGrafana, str],
) -> None:
    fake, url = grafana
    fake.fail_dashboards = True
    client, stub = client_with(existing=False)
    with pytest.raises(GrafanaApiError, match=r"POST /api/dashboards/db: HTTP 500"):
        provision(client, base_url=url, event=event("Create", props("models")))
    stub.assert_no_pending_responses()
