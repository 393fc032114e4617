"""The shipped `vllm serve` flag list and how gpufarm reads `extra_args` against it."""

from __future__ import annotations

import json

import pytest

from gpufarm.config.model import ServingConfig
from gpufarm.config.vllm_flags import (
    applies_to,
    flag_args,
    is_known_flag,
    known_flags,
    nearest_flag,
    vllm_flags_version,
)
from tests.conftest import REPO

UPSTREAM_VLLM = REPO.parent / "shared" / "upstream-ref" / f"vllm@{vllm_flags_version()}.json"


@pytest.mark.skipif(not UPSTREAM_VLLM.exists(), reason="../shared/upstream-ref is not beside the repo")
def test_shipped_flags_are_the_upstream_reference_list() -> None:
    upstream = json.loads(UPSTREAM_VLLM.read_text())
    assert upstream["version"] == vllm_flags_version()
    assert known_flags() == frozenset(upstream["flags"])


def test_the_list_describes_the_pinned_vllm_image() -> None:
    assert applies_to(ServingConfig().vllm_image)


@pytest.mark.parametrize(
    ("image", "applies"),
    [
        ("vllm/vllm-openai:v0.31.0", True),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-efa:v0.31.0", True),
        ("registry.local:5000/vllm/vllm-openai:0.31.0", True),
        ("vllm/vllm-openai:v0.32.0", False),
        ("vllm/vllm-openai@sha256:" + "a" * 64, False),
    ],
)
def test_applies_only_to_images_of_the_listed_release(image: str, applies: bool) -> None:
    assert applies_to(image) is applies


def test_removed_flags_are_unknown() -> None:
    assert not is_known_flag("--swap-space")
    assert not is_known_flag("--disable-log-requests")
    assert is_known_flag("--enable-log-requests")


def test_a_boolean_negation_is_known_only_for_a_known_flag() -> None:
    assert is_known_flag("--no-enable-prefix-caching")
    assert not is_known_flag("--no-such-flag")


def test_flags_are_read_as_vllm_reads_them() -> None:
    args = [
        "--max_model_len=4096",
        "--kv-cache-dtype",
        "fp8",
        "--compilation_config.cudagraph_mode=FULL",
        "-O3",
        "-tp",
        "2",
        "--seed",
        "-1",
        "-q=fp8",
    ]
    assert [(f.index, f.flag) for f in flag_args(args)] == [
        (0, "--max-model-len"),
        (1, "--kv-cache-dtype"),
        (3, "--compilation-config"),
        (4, "--optimization-level"),
        (5, "-tp"),
        (7, "--seed"),
        (9, "-q"),
    ]


def test_nearest_flag_names_the_likely_intent() -> None:
    assert nearest_flag("--gpu-memory-utilisation") == "--gpu-memory-utilization"
    assert nearest_flag("--zzzzzzzz") is None
