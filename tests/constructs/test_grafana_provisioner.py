"""The Grafana provisioner's handler, against a local HTTP server standing for a workspace's
Grafana API, a stubbed Amazon Managed Grafana API, and a second local server standing for
CloudFormation's pre-signed response URL (the handler answers CloudFormation itself).

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
    ANSWER_MARGIN_SECONDS,
    CREATE_FAILED,
    RESPONSE_MAX_BYTES,
    SERVICE_ACCOUNT,
    GrafanaApiError,
    answer,
    on_event,
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


# --------------------------------------------------------------------------- answering CloudFormation


class ResponseUrl:
    """A local server standing for CloudFormation's pre-signed S3 response URL: every PUT it got."""

    def __init__(self) -> None:
        self.puts: list[tuple[str, dict[str, str], bytes]] = []


@pytest.fixture
def response_url() -> Iterator[tuple[ResponseUrl, str]]:
    seen = ResponseUrl()

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            seen.puts.append((self.path, dict(self.headers.items()), self.rfile.read(length)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield seen, f"http://127.0.0.1:{server.server_address[1]}/cfn-response?X-Amz-Signature=abc"
    finally:
        server.shutdown()
        server.server_close()


STACK_ID = "arn:aws:cloudformation:us-east-1:123456789012:stack/gpufarm-production/0a1b"


def cfn_request(
    request: str, url: str, new: dict[str, Any], *, physical_id: str | None = None, old: Any = None
) -> dict[str, Any]:
    """A CloudFormation custom-resource request as the Lambda receives it (crpg-ref-requests)."""
    found = event(request, new, old)
    found.update(
        ResponseURL=url,
        StackId=STACK_ID,
        LogicalResourceId="GrafanaProvisioning0E4345A6",
        ResourceType="Custom::GrafanaDashboards",
        ServiceToken=new["ServiceToken"],
    )
    if physical_id is not None:
        found["PhysicalResourceId"] = physical_id
    return found


def the_answer(seen: ResponseUrl) -> dict[str, Any]:
    """The one response PUT to the response URL, checked for the headers CloudFormation signs."""
    ((path, headers, body),) = seen.puts
    assert path == "/cfn-response?X-Amz-Signature=abc"
    assert headers["Content-Type"] == ""
    assert int(headers["Content-Length"]) == len(body) <= RESPONSE_MAX_BYTES
    answer_: dict[str, Any] = json.loads(body)
    return answer_


def test_a_create_answers_success_with_the_response_fields(
    grafana: tuple[FakeGrafana, str], response_url: tuple[ResponseUrl, str]
) -> None:
    fake, url = grafana
    seen, response = response_url
    client, stub = client_with(existing=False)
    request = cfn_request("Create", response, props("models", "fleet"))
    answer(request, lambda: provision(client, base_url=url, event=request), seconds=30)
    stub.assert_no_pending_responses()
    assert the_answer(seen) == {
        "Status": "SUCCESS",
        "Reason": "",
        "PhysicalResourceId": f"{WORKSPACE}/gpufarm",
        "StackId": STACK_ID,
        "RequestId": "req-1",
        "LogicalResourceId": "GrafanaProvisioning0E4345A6",
        "NoEcho": False,
        "Data": {"Dashboards": "models,fleet"},
    }
    assert set(fake.dashboards) == {"models", "fleet"}


def test_a_failure_answers_failed_with_the_reason_and_drops_the_token(
    grafana: tuple[FakeGrafana, str], response_url: tuple[ResponseUrl, str]
) -> None:
    fake, url = grafana
    fake.fail_dashboards = True
    seen, response = response_url
    client, stub = client_with(existing=False)
    request = cfn_request("Create", response, props("models"))
    sent = answer(
        request, lambda: provision(client, base_url=url, event=request), seconds=30, log_stream="s/1"
    )
    stub.assert_no_pending_responses()  # the token was deleted
    found = the_answer(seen)
    assert found["Status"] == "FAILED" == sent["Status"]
    assert found["Reason"].startswith("GrafanaApiError: POST /api/dashboards/db: HTTP 500: ")
    assert found["Reason"].endswith(" (log stream s/1)")
    # A failed create gets the marker its rollback Delete is recognised by.
    assert found["PhysicalResourceId"] == CREATE_FAILED


def test_a_failed_update_keeps_the_resources_physical_id(
    grafana: tuple[FakeGrafana, str], response_url: tuple[ResponseUrl, str]
) -> None:
    fake, url = grafana
    fake.fail_dashboards = True
    seen, response = response_url
    client, _ = client_with(existing=True)
    request = cfn_request(
        "Update", response, props("models"), physical_id=f"{WORKSPACE}/gpufarm", old=props("models")
    )
    answer(request, lambda: provision(client, base_url=url, event=request), seconds=30)
    found = the_answer(seen)
    assert (found["Status"], found["PhysicalResourceId"]) == ("FAILED", f"{WORKSPACE}/gpufarm")


def test_the_delete_of_a_failed_create_succeeds_without_touching_the_workspace(
    grafana: tuple[FakeGrafana, str], response_url: tuple[ResponseUrl, str]
) -> None:
    fake, _ = grafana
    seen, response = response_url

    def must_not_run() -> dict[str, Any]:
        raise AssertionError("the delete of a failed create must not provision")

    request = cfn_request("Delete", response, props("models"), physical_id=CREATE_FAILED)
    answer(request, must_not_run, seconds=30)
    found = the_answer(seen)
    assert (found["Status"], found["PhysicalResourceId"]) == ("SUCCESS", CREATE_FAILED)
    assert fake.requests == []


def test_a_delete_removes_everything_and_answers_success(
    grafana: tuple[FakeGrafana, str], response_url: tuple[ResponseUrl, str]
) -> None:
    fake, url = grafana
    seen, response = response_url
    client, _ = client_with(existing=False)
    provision(client, base_url=url, event=event("Create", props("models")))
    client, stub = client_with(existing=True, delete_account=True)
    request = cfn_request("Delete", response, props("models"), physical_id=f"{WORKSPACE}/gpufarm")
    answer(request, lambda: provision(client, base_url=url, event=request), seconds=30)
    stub.assert_no_pending_responses()
    assert the_answer(seen)["Status"] == "SUCCESS"
    assert fake.dashboards == {} and fake.folders == {} and fake.datasources == {}


def test_a_run_past_its_time_is_answered_failed_before_it_ends(response_url: tuple[ResponseUrl, str]) -> None:
    seen, response = response_url
    release = threading.Event()

    def hangs() -> dict[str, Any]:
        release.wait(30)
        return {"PhysicalResourceId": "late", "Data": {}}

    request = cfn_request("Update", response, props("models"), physical_id=f"{WORKSPACE}/gpufarm")
    try:
        sent = answer(request, hangs, seconds=1)
        assert not release.is_set()  # answered while the work was still going
    finally:
        release.set()
    found = the_answer(seen)
    assert found["Status"] == "FAILED" == sent["Status"]
    assert found["Reason"] == "no result within 1 s, before the Lambda timeout"
    assert found["PhysicalResourceId"] == f"{WORKSPACE}/gpufarm"


def test_a_long_reason_is_cut_to_fit_the_response_limit(response_url: tuple[ResponseUrl, str]) -> None:
    seen, response = response_url

    def fails() -> dict[str, Any]:
        raise RuntimeError("é" * 5000)

    answer(cfn_request("Create", response, props("models")), fails, seconds=30)
    found = the_answer(seen)  # the body is at most 4096 bytes
    assert found["Status"] == "FAILED"
    assert found["Reason"].startswith("RuntimeError: é") and found["Reason"].endswith("...")


def test_the_entry_point_answers_failed_when_the_client_cannot_be_built(
    response_url: tuple[ResponseUrl, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even an error outside the provisioning steps (here: no AWS Region) is answered."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    seen, response = response_url

    class Context:
        log_stream_name = "2026/12/02/[$LATEST]abc"

        @staticmethod
        def get_remaining_time_in_millis() -> int:
            return (ANSWER_MARGIN_SECONDS + 30) * 1000

    on_event(cfn_request("Create", response, props("models")), Context())
    found = the_answer(seen)
    assert found["Status"] == "FAILED"
    assert found["Reason"].startswith("NoRegionError: ")
    assert found["Reason"].endswith("(log stream 2026/12/02/[$LATEST]abc)")
