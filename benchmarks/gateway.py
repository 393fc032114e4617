#!/usr/bin/env python3
"""Latency the fallback gateway adds: the vLLM stand-in called directly against through LiteLLM.

Starts the same processes as the end-to-end test (tests/e2e): the vLLM and Bedrock stand-ins and
the real LiteLLM proxy from `.venv-gateway` with the poc tier's generated config, hosts and ports
on loopback. Sends --requests chat completions one after another (after --warmup unmeasured ones)
to each path, JSON and streamed, and prints p50/p99 of the time to the last byte and the
difference. The stand-in answers at once, so the difference is the gateway's own cost. Figures
are printed, never asserted.

    .venv/bin/python benchmarks/gateway.py [--requests 300] [--warmup 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _percentiles(seconds: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(seconds, n=100, method="inclusive")
    return statistics.median(seconds) * 1000, cuts[98] * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="measured requests per path and mode")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured requests first, per path and mode")
    args = parser.parse_args()

    sys.path.insert(0, str(REPO))
    import pytest

    from gpufarm.config import load_preset
    from gpufarm.k8s.gateway import vllm_deployment_id
    from tests.e2e.conftest import Gateway, StandIn, chat, installed_version, litellm_executable

    try:
        litellm = litellm_executable()
    except pytest.fail.Exception as exc:
        print(exc.msg, file=sys.stderr)
        return 1

    tier = load_preset("poc")
    model = tier.models[0].api_model_name
    served_by_vllm = (None, vllm_deployment_id(tier.models[0]))  # direct: no header
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        vllm, bedrock = StandIn("vllm", workdir, f"--model={model}"), StandIn("bedrock", workdir)
        processes: list[StandIn | Gateway] = [vllm, bedrock]
        try:
            vllm.start()
            bedrock.start()
            gateway = Gateway(
                tier, workdir, litellm=litellm, vllm_url=vllm.base_url, bedrock_url=bedrock.base_url
            )
            processes.append(gateway)
            gateway.start()
            rows = []
            for stream in (False, True):
                timings: dict[str, list[float]] = {}
                for label, port in (
                    ("vLLM stand-in, direct", vllm.port),
                    ("through the gateway", gateway.port),
                ):
                    for _ in range(args.warmup):
                        chat(port, model, stream=stream)
                    replies = [chat(port, model, stream=stream) for _ in range(args.requests)]
                    failed = [r for r in replies if r.status != 200 or r.backend not in served_by_vllm]
                    if failed:
                        print(f"{label}: {len(failed)} requests failed, first: {failed[0]}", file=sys.stderr)
                        return 1
                    timings[label] = [r.seconds for r in replies]
                direct = _percentiles(timings["vLLM stand-in, direct"])
                for label, seconds in timings.items():
                    p50, p99 = _percentiles(seconds)
                    rows.append(
                        ("stream" if stream else "json", label, p50, p99, p50 - direct[0], p99 - direct[1])
                    )
        finally:
            for process in reversed(processes):
                process.stop()

    print(f"chat completions, {args.requests} sequential requests per row after {args.warmup} warm-up")
    print(f"time to last byte, ms; litellm {installed_version('litellm')} (gateway/requirements.lock)")
    print(f"{'mode':<8}{'path':<26}{'p50':>9}{'p99':>9}{'+p50':>9}{'+p99':>9}")
    for mode, label, p50, p99, added50, added99 in rows:
        print(f"{mode:<8}{label:<26}{p50:>9.2f}{p99:>9.2f}{added50:>9.2f}{added99:>9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
