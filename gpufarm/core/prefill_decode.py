"""Ports and vLLM flags of prefill/decode disaggregation that config validation and the manifests share."""

from __future__ import annotations

DECODE_ENGINE_PORT = 8200
"""Where a decode pod's vLLM listens; the sidecar takes the serving port (the sidecar's default)."""

NIXL_SIDE_CHANNEL_PORT = 5600
"""vLLM's NIXL side channel (handshake and KV metadata between prefill and decode pods)."""

PREFILL_DECODE_RESERVED_VLLM_FLAGS = ("--kv-transfer-config", "--block-size")
"""vLLM flags gpufarm sets on both roles from `prefill_decode`."""
