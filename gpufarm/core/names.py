"""Names of the Kubernetes objects serving a model, shared by config validation and the manifests."""

from __future__ import annotations

BEDROCK_SUFFIX = "@bedrock"
"""Appended to a model's client-facing name to name its Bedrock deployment ('<name>@bedrock').

Hugging Face repo ids and DNS labels never contain '@', so no served model can collide with it.
"""


def workload_name(model_name: str, share: str | None = None) -> str:
    """Name of a model's Deployment and Service, `vllm-<model>` (a share's: `vllm-<model>-<share>`)."""
    return f"vllm-{model_name}" if share is None else f"vllm-{model_name}-{share}"


def leader_service_name(model_name: str) -> str:
    """Name of the Service in front of a multi-node model's leaders (`vllm-<model>-leader`).

    Not `vllm-<model>`: the LeaderWorkerSet controller gives that name to its headless Service,
    which resolves to every pod of the model, workers included.
    """
    return f"{workload_name(model_name)}-leader"


def router_name(model_name: str) -> str:
    """Name of a model's router Deployment, Service, service account and config maps."""
    return f"{workload_name(model_name)}-router"
