"""integ/probe.py against a loopback server: what it reports for each answer of the routes."""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import pytest

PROBE = Path(__file__).resolve().parents[2] / "integ" / "probe.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("probe", PROBE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Routes(BaseHTTPRequestHandler):
    answers: ClassVar[dict[str, tuple[int, str]]] = {}
    requests: ClassVar[list[tuple[str, dict[str, Any]]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append((self.path, body))
        status, text = type(self).answers.get(self.path, (404, "{}"))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(text.encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _completion(content: Any) -> str:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]})


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Routes]]:
    httpd = HTTPServer(("127.0.0.1", 0), _Routes)
    base = f"http://127.0.0.1:{httpd.server_port}"
    monkeypatch.setenv("MODEL", "Qwen/Qwen3-0.6B")
    monkeypatch.setenv("DIRECT_URL", f"{base}/qwen3-0-6b/v1")
    monkeypatch.setenv("GATEWAY_URL", f"{base}/v1")
    _Routes.answers, _Routes.requests = {}, []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield _Routes
    httpd.shutdown()


def test_both_routes_answering_match_what_the_assertion_expects(server: type[_Routes]) -> None:
    server.answers = {
        "/qwen3-0-6b/v1/chat/completions": (200, _completion("ready")),
        "/v1/chat/completions": (200, _completion("Ready.")),
    }
    result = _load().handler({}, None)

    assert result == {"direct": {"status": 200, "content": True}, "gateway": {"status": 200, "content": True}}
    assert [path for path, _ in server.requests] == [
        "/qwen3-0-6b/v1/chat/completions",
        "/v1/chat/completions",
    ]
    assert all(body["model"] == "Qwen/Qwen3-0.6B" for _, body in server.requests)


def test_the_gateway_is_not_asked_while_the_model_is_not_ready(server: type[_Routes]) -> None:
    server.answers = {"/qwen3-0-6b/v1/chat/completions": (503, "no healthy targets")}
    result = _load().handler({}, None)

    assert result == {"direct": {"status": 503, "content": False}, "gateway": {"status": 0, "content": False}}
    assert len(server.requests) == 1


@pytest.mark.parametrize("content", ["", "   ", None, 42])
def test_an_empty_or_missing_content_is_not_an_answer(server: type[_Routes], content: Any) -> None:
    server.answers = {
        "/qwen3-0-6b/v1/chat/completions": (200, _completion("ready")),
        "/v1/chat/completions": (200, _completion(content)),
    }
    assert _load().handler({}, None)["gateway"] == {"status": 200, "content": False}


def test_a_body_that_is_not_a_completion_is_not_an_answer(server: type[_Routes]) -> None:
    server.answers = {"/qwen3-0-6b/v1/chat/completions": (200, "<html>ok</html>")}
    assert _load().handler({}, None)["direct"] == {"status": 200, "content": False}


def test_an_unreachable_route_reports_status_0(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODEL", "m")
    monkeypatch.setenv("DIRECT_URL", "http://127.0.0.1:9/m/v1")  # nothing listens on port 9
    monkeypatch.setenv("GATEWAY_URL", "http://127.0.0.1:9/v1")
    assert _load().handler({}, None) == {
        "direct": {"status": 0, "content": False},
        "gateway": {"status": 0, "content": False},
    }
