"""Chat-completion probe, run as a Lambda function inside the tier's VPC by the integration tests.

It sends one chat completion to the model's direct route and one through the gateway and
returns, per route, the HTTP status and whether `choices[0].message.content` is a non-empty
string. The gateway is only tried once the direct route answers, so a gateway answer cannot
come from the Bedrock fallback while the model is still loading.
"""

import json
import os
import ssl
import urllib.error
import urllib.request

# An https route carries the tier's certificate, issued for the tier's own DNS name and not for
# the load balancer's: the probe checks that the model answers, not the certificate.
_TLS = ssl.create_default_context()
_TLS.check_hostname = False
_TLS.verify_mode = ssl.CERT_NONE
# Both calls together stay under the 120 s the assertion's invoking function has.
_TIMEOUT_SECONDS = 40


def _chat(base_url, model):
    body = json.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": "Reply with one word: ready"}],
            "max_tokens": 16,
        }
    ).encode()
    request = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_SECONDS, context=_TLS) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode(errors="replace")
    except OSError as exc:
        return {"status": 0, "content": False}, str(exc)
    try:
        content = json.loads(text)["choices"][0]["message"]["content"]
    except (ValueError, LookupError, TypeError):
        content = None
    return {"status": status, "content": isinstance(content, str) and content.strip() != ""}, text[:500]


def handler(event, context):
    model = os.environ["MODEL"]
    result = {}
    result["direct"], detail = _chat(os.environ["DIRECT_URL"], model)
    print("direct", json.dumps(result["direct"]), detail)
    if result["direct"]["status"] == 200:
        result["gateway"], detail = _chat(os.environ["GATEWAY_URL"], model)
        print("gateway", json.dumps(result["gateway"]), detail)
    else:
        result["gateway"] = {"status": 0, "content": False}
    return result
