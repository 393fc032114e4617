"""End-to-end fixtures: the real LiteLLM proxy and loopback stand-ins for vLLM and Bedrock, as processes.

The proxy runs from its own virtualenv (`.venv-gateway`, installed from the hashed
`gateway/requirements.lock`) with the config, command-line arguments and environment that gpufarm
generates for the gateway pods. Only hosts and ports change: each vLLM `api_base` points at the
vLLM stand-in, the Bedrock runtime endpoint at the Bedrock stand-in, and the proxy listens on a
free loopback port. AWS credentials are fake; nothing leaves the machine.

Every process starts in its own session and is killed with its whole process group when its
fixture ends, whatever the test did.
"""

from __future__ import annotations

import contextlib
import copy
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from gpufarm.config import TierConfig, build_tier, merge
from gpufarm.config.loader import PRESET_DIR
from gpufarm.k8s import demand
from gpufarm.k8s.gateway import (
    BACKEND_HEADER,
    FALLBACKS_HEADER,
    config_yaml,
    gateway_deployment,
    guardrail_env_refs,
    litellm_config,
    vllm_deployment_id,
)

REPO = Path(__file__).resolve().parents[2]
GATEWAY_VENV = REPO / ".venv-gateway"
GATEWAY_LOCK = REPO / "gateway" / "requirements.lock"
STAND_INS = Path(__file__).with_name("stand_ins.py")
SETUP_COMMAND = (
    "python3 -m venv .venv-gateway && "
    ".venv-gateway/bin/pip install --require-hashes -r gateway/requirements.lock"
)

LOOPBACK = "127.0.0.1"
COOLDOWN_SECONDS = 3
"""The tier's `fallback.cooldown_seconds` in these tests (the presets' 30 s would only slow them)."""
GATEWAY_START_TIMEOUT = 120.0
"""The proxy imports for about 5 s on an idle machine; a busy 2-core CI machine takes longer."""
STAND_IN_START_TIMEOUT = 15.0
REQUEST_TIMEOUT = 60.0
"""A request that has no answer after this long counts as lost."""

FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    # Never look for other credentials: no instance metadata, no profile files.
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


# --------------------------------------------------------------------------- the gateway's venv


def _locked_version(package: str) -> str:
    for line in GATEWAY_LOCK.read_text(encoding="utf-8").splitlines():
        name, sep, version = line.partition("==")
        if sep and name.split("[")[0].strip() == package:
            return version.split()[0].rstrip("\\").strip()
    raise AssertionError(f"{GATEWAY_LOCK} pins no {package}")


def installed_version(package: str) -> str | None:
    """The version of `package` installed in `.venv-gateway` (None: not installed)."""
    found = sorted(GATEWAY_VENV.glob(f"lib/python*/site-packages/{package}-*.dist-info"))
    return found[-1].name.removesuffix(".dist-info").split("-", 1)[1] if found else None


def litellm_executable() -> Path:
    """The `litellm` command of `.venv-gateway`; fails (never skips) when the venv is missing or stale."""
    exe = GATEWAY_VENV / "bin" / "litellm"
    if not exe.exists():
        pytest.fail(
            f"{exe} not found: the gateway's virtualenv is not set up. `make test` creates it; "
            f"by hand, from {REPO}: {SETUP_COMMAND}",
            pytrace=False,
        )
    pinned, installed = _locked_version("litellm"), installed_version("litellm")
    if installed != pinned:
        pytest.fail(
            f"{GATEWAY_VENV} has litellm {installed}, gateway/requirements.lock pins {pinned}: "
            f"recreate it: rm -rf .venv-gateway && {SETUP_COMMAND}",
            pytrace=False,
        )
    return exe


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


class Process:
    """A process in its own session, its output appended to `log`; killed with its process group."""

    def __init__(self, name: str, argv: list[str], *, env: dict[str, str], log: Path) -> None:
        self.name, self.argv, self.env, self.log = name, argv, env, log
        self._popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the process (again, after a kill)."""
        with self.log.open("ab") as out:
            self._popen = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=self.log.parent,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def alive(self) -> bool:
        """Whether the process runs."""
        return self._popen is not None and self._popen.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process group, as a node that vanishes would, and reap it."""
        self._signal(signal.SIGKILL)
        if self._popen is not None:
            self._popen.wait(timeout=10)

    def stop(self, grace_seconds: float = 5.0) -> None:
        """SIGTERM the process group, then SIGKILL what is left after `grace_seconds`."""
        if not self.alive:
            self._signal(signal.SIGKILL)  # children may outlive a leader that exited
            return
        self._signal(signal.SIGTERM)
        assert self._popen is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout=grace_seconds)
        self.kill()

    def _signal(self, sig: signal.Signals) -> None:
        if self._popen is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._popen.pid, sig)  # the session leader's pid is its group id

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the process's output, for failure messages."""
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_until_ready(self, port: int, path: str, timeout_seconds: float) -> None:
        """Poll `GET path` on loopback until it answers 200; stop and fail with the log if it does not."""
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            if not self.alive:
                raise AssertionError(f"{self.name} exited at start:\n{self.log_tail()}")
            try:
                if get(port, path, timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"{self.name} was not ready in {timeout_seconds:.0f} s:\n{self.log_tail()}")


class StandIn(Process):
    """A stand-in from stand_ins.py under this interpreter; `port` is known once it is ready."""

    def __init__(self, kind: str, workdir: Path, *extra: str) -> None:
        argv = [sys.executable, str(STAND_INS), kind, *extra]
        super().__init__(kind, argv, env={"PATH": os.environ.get("PATH", "")}, log=workdir / f"{kind}.log")
        self.port = 0
        self.other_ports: list[int] = []
        """Further ports its ready line names (an `alb` stand-in's gateway listener)."""

    def start(self) -> None:
        """Start on `port` (any free port the first time) and wait until it accepts connections."""
        offset = self.log.stat().st_size if self.log.exists() else 0
        self.argv = [*[a for a in self.argv if not a.startswith("--port=")], f"--port={self.port}"]
        super().start()
        deadline = time.monotonic() + STAND_IN_START_TIMEOUT
        while time.monotonic() < deadline:
            with self.log.open("rb") as out:
                out.seek(offset)
                for line in out.read().decode(errors="replace").splitlines():
                    if line.startswith("ready "):
                        self.port, *self.other_ports = (int(p) for p in line.split()[1:])
                        return
            if not self.alive:
                break
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"the {self.name} stand-in did not start:\n{self.log_tail()}")

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:<port>"""
        return f"http://{LOOPBACK}:{self.port}"

    def stats(self) -> dict[str, Any]:
        """What the stand-in answered so far: {'counts': {...}, 'models': {...}}."""
        status, body = get(self.port, "/_stand_in/stats")
        assert status == 200, body
        data: dict[str, Any] = json.loads(body)
        return data

    def fail(self, status: int | None) -> None:
        """Make the vLLM stand-in answer completions with HTTP `status`; None heals it."""
        conn = http.client.HTTPConnection(LOOPBACK, self.port, timeout=10)
        try:
            conn.request("POST", "/_stand_in/fail", json.dumps({"status": status}))
            assert conn.getresponse().status == 200
        finally:
            conn.close()

    def count(self, key: str) -> int:
        """One counter of `stats()` (0 when never incremented)."""
        value: int = self.stats()["counts"].get(key, 0)
        return value


# --------------------------------------------------------------------------- HTTP client


@dataclass(frozen=True)
class Reply:
    """One chat completion as the client saw it."""

    status: int
    """HTTP status; 0 when no response arrived (connection failed or timed out)."""
    text: str
    """The answer: the message content, or the concatenated deltas of a stream (an error otherwise)."""
    backend: str | None
    """The backend header (`gpufarm.k8s.gateway.BACKEND_HEADER`)."""
    fallbacks: int
    """The fallbacks header (`FALLBACKS_HEADER`): how many fallbacks the gateway tried (0: none)."""
    chunks: int
    """Stream events that carried content (0 for a JSON answer)."""
    done: bool
    """Whether a stream ended with `data: [DONE]`."""
    sent: float
    received: float
    """`time.monotonic()` when the request was sent and when its answer was complete."""

    @property
    def seconds(self) -> float:
        """Latency: send to last byte."""
        return self.received - self.sent


def get(port: int, path: str, timeout: float = 10.0) -> tuple[int, str]:
    """GET `path` on loopback `port`: (status, body)."""
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    finally:
        conn.close()


def chat(port: int, model: str, *, stream: bool = False, timeout: float = REQUEST_TIMEOUT) -> Reply:
    """POST one chat completion to loopback `port`; failures come back as a Reply, never raise."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "Which backend answers?"}],
    }
    if stream:
        body["stream"] = True
    sent = time.monotonic()
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        backend = resp.getheader(BACKEND_HEADER)
        fallbacks = int(resp.getheader(FALLBACKS_HEADER) or 0)
        if resp.status != 200 or not stream:
            raw = resp.read().decode(errors="replace")
            text = json.loads(raw)["choices"][0]["message"]["content"] if resp.status == 200 else raw
            return Reply(resp.status, text, backend, fallbacks, 0, False, sent, time.monotonic())
        parts: list[str] = []
        done = False
        for line in resp:
            data = line.decode().strip()
            if not data.startswith("data:"):
                continue
            data = data.removeprefix("data:").strip()
            if data == "[DONE]":
                done = True
                break
            for choice in json.loads(data).get("choices", []):
                content = (choice.get("delta") or {}).get("content")
                if content:
                    parts.append(content)
        return Reply(200, "".join(parts), backend, fallbacks, len(parts), done, sent, time.monotonic())
    except (OSError, http.client.HTTPException, ValueError, KeyError) as exc:
        return Reply(0, f"{type(exc).__name__}: {exc}", None, 0, 0, False, sent, time.monotonic())
    finally:
        conn.close()


# --------------------------------------------------------------------------- the gateway


def poc_document() -> dict[str, Any]:
    """The poc preset as a plain document."""
    data: dict[str, Any] = yaml.safe_load((PRESET_DIR / "poc.yaml").read_text(encoding="utf-8"))
    return data


def e2e_tier(cooldown_seconds: int = COOLDOWN_SECONDS) -> TierConfig:
    """The poc tier, with a short gateway cooldown so a test sees traffic return within seconds."""
    return build_tier(merge(poc_document(), {"fallback": {"cooldown_seconds": cooldown_seconds}}))


def to_loopback(
    config: dict[str, Any], vllm: str, services: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """`config` with every vLLM `api_base` (and any Bedrock runtime endpoint) moved to loopback.

    Scheme, host and port change; paths and everything else stay as gpufarm generated them.
    `services` maps a Service name (the api_base's first host label) to its own stand-in's URL;
    every other Service goes to `vllm`.
    """
    out = copy.deepcopy(config)
    for entry in out["model_list"]:
        params = entry["litellm_params"]
        # A load-balanced api_base is read from the pod environment ('os.environ/...'), whose
        # loopback value the Gateway's `load_balancer_url` sets.
        if "api_base" in params and not params["api_base"].startswith("os.environ/"):
            url = urlsplit(params["api_base"])
            target = (services or {}).get((url.hostname or "").split(".")[0], vllm)
            params["api_base"] = url._replace(scheme="http", netloc=urlsplit(target).netloc).geturl()
    return out


class Gateway(Process):
    """The LiteLLM proxy as a gateway pod runs it, on loopback.

    `guardrail` `(identifier, version)`: the config reads it from the pod's environment
    (`guardrail_env_refs()`), as the construct wires it. `vllm_services` sends named Services to
    stand-ins of their own (see :func:`to_loopback`). `load_balancer_url` builds the config the
    construct builds for a tier whose gateway calls the load balancer (`load_balanced=True`) and
    sets the pod environment it reads each model's route from to that (loopback) URL.
    `sagemaker_url` is the SageMaker runtime's base URL for a `sagemaker` tier (in the VPC:
    the regional runtime host, answered by the `sagemaker.runtime` interface endpoint). Default: no
    guardrail, one vLLM stand-in, the Services' route.
    """

    def __init__(
        self,
        tier: TierConfig,
        workdir: Path,
        *,
        litellm: Path,
        vllm_url: str,
        bedrock_url: str,
        guardrail: tuple[str, str] | None = None,
        vllm_services: Mapping[str, str] | None = None,
        load_balancer_url: str | None = None,
        sagemaker_url: str | None = None,
    ) -> None:
        self.tier = tier
        self.config = litellm_config(
            tier,
            guardrail=guardrail_env_refs() if guardrail else None,
            load_balanced=load_balancer_url is not None,
            sagemaker_runtime_url=sagemaker_url,
        )
        self.loopback_config = to_loopback(self.config, vllm_url, vllm_services)
        config_file = workdir / "config.yaml"
        config_file.write_text(config_yaml(self.loopback_config), encoding="utf-8")
        # The ConfigMap's other files (the demand counter's callback module) sit beside the config.
        for name, text in demand.config_files(tier).items():
            (workdir / name).write_text(text, encoding="utf-8")
        pod = gateway_deployment(
            tier,
            config=self.config,
            namespace="gpufarm",
            region=tier.environment.region,
            master_key_secret_arn=None,
            guardrail=guardrail,
            load_balancer_url=load_balancer_url,
        )
        container = pod["spec"]["template"]["spec"]["containers"][0]
        self.port = free_port()
        args = list(container["args"])
        for flag, value in (("--config", str(config_file)), ("--host", LOOPBACK), ("--port", str(self.port))):
            args[args.index(flag) + 1] = value
        self.metrics_port: int | None = None
        """The metrics server's loopback port, when the tier's gateway counts demand (else None)."""
        if "--prometheus_metrics_port" in args:
            self.metrics_port = free_port()
            args[args.index("--prometheus_metrics_port") + 1] = str(self.metrics_port)
        assert container["command"] == ["litellm"], container["command"]
        env = {e["name"]: e["value"] for e in container["env"]}
        env.update(
            FAKE_AWS_ENV,
            HOME=str(workdir),
            PATH=f"{GATEWAY_VENV / 'bin'}:/usr/bin:/bin",
            # In the cluster: bedrock-runtime.<region>.amazonaws.com (the VPC endpoint's private DNS).
            AWS_BEDROCK_RUNTIME_ENDPOINT=bedrock_url,
        )
        if demand.MULTIPROC_DIR_ENV in env:
            # The pod's /tmp is its own; here the samples' folder must be this gateway's alone.
            samples = workdir / "prometheus-multiproc"
            samples.mkdir(exist_ok=True)
            env[demand.MULTIPROC_DIR_ENV] = str(samples)
        super().__init__("gateway", [str(litellm), *args], env=env, log=workdir / "gateway.log")

    def start(self) -> None:
        """Start the proxy and wait until `/health/readiness` answers 200."""
        super().start()
        self.wait_until_ready(self.port, "/health/readiness", GATEWAY_START_TIMEOUT)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def litellm() -> Path:
    """The pinned `litellm` command of `.venv-gateway` (the test fails if the venv is not set up)."""
    return litellm_executable()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder of the config file and the processes' logs."""
    return tmp_path_factory.mktemp("gateway-e2e")


@pytest.fixture(scope="module")
def bedrock(workdir: Path) -> Iterator[StandIn]:
    """The Bedrock runtime stand-in, for the whole module."""
    stand_in = StandIn("bedrock", workdir)
    stand_in.start()
    try:
        yield stand_in
    finally:
        stand_in.stop()


@pytest.fixture(scope="module")
def vllm(workdir: Path) -> Iterator[StandIn]:
    """The vLLM stand-in (tests kill and restart it: it comes back on the same port)."""
    # Each answer takes 100 ms, so the kill finds requests half answered.
    stand_in = StandIn("vllm", workdir, "--model=qwen3-8b", "--delay-ms=100")
    stand_in.start()
    try:
        yield stand_in
    finally:
        stand_in.stop()


@pytest.fixture(scope="module")
def gateway(litellm: Path, workdir: Path, vllm: StandIn, bedrock: StandIn) -> Iterator[Gateway]:
    """The real LiteLLM proxy with the poc tier's generated config, hosts and ports on loopback."""
    proxy = Gateway(
        e2e_tier(), workdir, litellm=litellm, vllm_url=vllm.base_url, bedrock_url=bedrock.base_url
    )
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


def service_host(config: dict[str, Any], deployment_id: str) -> str:
    """The Service name (first host label) of a vLLM deployment's `api_base` in the gateway config."""
    (entry,) = [e for e in config["model_list"] if e["model_info"]["id"] == deployment_id]
    host = urlsplit(entry["litellm_params"]["api_base"]).hostname or ""
    return host.split(".")[0]


def gateway_with_refusing_models(
    tier: TierConfig,
    workdir: Path,
    *,
    litellm: Path,
    vllm: StandIn,
    bedrock: StandIn,
    refusing: list[str],
    refusing_url: str,
) -> Gateway:
    """The real proxy with `tier`'s config; the `refusing` models' Services point at `refusing_url`."""
    config = litellm_config(tier)
    by_name = {m.name: m for m in tier.models}
    services = {service_host(config, vllm_deployment_id(by_name[name])): refusing_url for name in refusing}
    return Gateway(
        tier,
        workdir,
        litellm=litellm,
        vllm_url=vllm.base_url,
        bedrock_url=bedrock.base_url,
        vllm_services=services,
    )
