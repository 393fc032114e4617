"""Documentation values in a tier are recognised; internet-open CIDRs need a stated reason."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import ConfigError, build_tier, load_preset
from gpufarm.config.placeholders import Placeholder, classify, find_placeholders

from .factories import make_enterprise, make_tier, production_document

OWN_CIDR = "10.20.0.0/16"
OWN_CERT = "arn:aws:acm:us-east-1:210987654321:certificate/6f1c2d3e-4b5a-4c7d-9e8f-0a1b2c3d4e5f"
OWN_DIGEST = "sha256:" + "d" * 64
OWN_AGENT = f"210987654321.dkr.ecr.us-east-1.amazonaws.com/target-control-agent@{OWN_DIGEST}"
PRODUCTION_UNCONFIRMED = (
    "keda-operator",
    "keda-metrics-apiserver",
    "keda-admission-webhooks",
    "nvidia-device-plugin",
    "aws-load-balancer-controller",
)
"""The images of the production preset whose digest the table lacks."""
REASON = "public chat demo for the conference booth, no private data"


def issues_of(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make_tier(*parts)
    return [str(issue) for issue in caught.value.issues]


def own_cluster(**fields: Any) -> dict[str, Any]:
    """The poc's cluster with its documentation range replaced, and `fields` over it."""
    return {"cluster": {"public_access_cidrs": [OWN_CIDR], **fields}}


# --------------------------------------------------------------------------- the rules


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("arn:aws:iam::123456789012:role/admin", "AWS documentation account 123456789012"),
        ("arn:aws:iam::012345678901:role/admin", "AWS documentation account 012345678901"),
        ("arn:aws:iam::111122223333:role/admin", "AWS documentation account 111122223333"),
        ("arn:aws:iam::444455556666:root", "AWS documentation account 444455556666"),
        ("arn:aws:iam::777788889999:root", "AWS documentation-style account 777788889999"),
        ("arn:aws:iam::000000000000:root", "all-0 account 000000000000"),
        ("123456789012", "AWS documentation account 123456789012"),
        (
            "arn:aws:acm:us-east-1:111122223333:certificate/00000000-0000-4000-8000-000000000000",
            "AWS documentation account 111122223333, "
            "all-zero resource ID 00000000-0000-4000-8000-000000000000",
        ),
        (
            "arn:aws:acm:us-east-1:210987654321:certificate/00000000-0000-0000-0000-000000000000",
            "all-zero resource ID 00000000-0000-0000-0000-000000000000",
        ),
        ("cr-00000000000000000", "all-zero resource ID cr-00000000000000000"),
        ("192.0.2.0/24", "RFC 5737 TEST-NET-1, 192.0.2.0/24"),
        ("198.51.100.0/24", "RFC 5737 TEST-NET-2, 198.51.100.0/24"),
        ("203.0.113.7/32", "RFC 5737 TEST-NET-3, 203.0.113.0/24"),
        ("203.0.0.0/16", "RFC 5737 TEST-NET-3, 203.0.113.0/24"),
        ("2001:db8::/48", "RFC 3849 documentation prefix, 2001:db8::/32"),
        ("s3://gpufarm-production-models/llama/", "the preset's example model bucket"),
        ("s3://gpufarm-enterprise-models/", "the preset's example model bucket"),
        ("s3://my-example-bucket/weights/", "an 'example' bucket name"),
        ("s3://models.examples.acme/", "an 'example' bucket name"),
    ],
)
def test_documentation_values_are_recognised(value: str, why: str) -> None:
    assert classify(value) == why


@pytest.mark.parametrize(
    "value",
    [
        OWN_CERT,
        "arn:aws:iam::210987654321:role/admin",
        "210987654321",
        "10.0.0.0/16",
        "203.0.114.0/24",
        "0.0.0.0/0",  # every address: an open choice, checked on its own
        "s3://acme-models/example/",  # 'example' in the key, not the bucket
        "s3://counterexample-models/",
        "cr-0a1b2c3d4e5f60718",
        "Qwen/Qwen3-8B",
        "us.meta.llama3-1-8b-instruct-v1:0",
        "1",
    ],
)
def test_own_values_are_not_placeholders(value: str) -> None:
    assert classify(value) is None


def test_the_presets_example_values_are_found_by_field() -> None:
    assert find_placeholders(load_preset("poc")) == [
        Placeholder(
            path="cluster.public_access_cidrs[0]",
            value="198.51.100.0/24",
            why="RFC 5737 TEST-NET-2, 198.51.100.0/24",
        )
    ]
    assert [p.path for p in find_placeholders(load_preset("production"))] == [
        "models[0].weights",
        "models[1].weights",
        "model_store.fsx.import_path",
        "ingress.certificate_arn",
        "ingress.allowed_cidrs[0]",
        "images.docker_hub_credential_arn",
        "images.github_credential_arn",
        "ingress.target_optimizer.agent_image",
        "serving.sglang_image",
        "images.digests.keda-operator",
        "images.digests.keda-metrics-apiserver",
        "images.digests.keda-admission-webhooks",
        "images.digests.nvidia-device-plugin",
        "images.digests.aws-load-balancer-controller",
    ]
    assert [p.path for p in find_placeholders(load_preset("enterprise"))] == [
        "models[0].weights",
        "models[1].weights",
        "models[2].weights",
        "model_store.fsx.import_path",
        "ingress.certificate_arn",
        "ingress.allowed_cidrs[0]",
        "ingress.private_link.allowed_principals[0]",
        "images.docker_hub_credential_arn",
        "images.github_credential_arn",
        "ingress.target_optimizer.agent_image",
        "images.digests.lws-controller",
        "images.digests.keda-operator",
        "images.digests.keda-metrics-apiserver",
        "images.digests.keda-admission-webhooks",
        "images.digests.nvidia-device-plugin",
        "images.digests.efa-device-plugin",
        "images.digests.aws-load-balancer-controller",
    ]


def test_an_image_without_a_digest_is_reported_with_what_to_set() -> None:
    agent, sglang, keda = find_placeholders(load_preset("production"))[7:10]
    assert sglang.describe() == (
        "serving.sglang_image = 'lmsysorg/sglang:v0.5.23' is an image not pinned by digest (no public "
        "record of this tag's digest was found (gpufarm/data/images.yaml); read it from the registry "
        "and set the image as repository:tag@digest): replace it before deploying"
    )
    assert agent.describe() == (
        "ingress.target_optimizer.agent_image = "
        "'public.ecr.aws/aws-elb/target-optimizer/target-control-agent:latest' is an image not pinned "
        "by digest (AWS publishes the target control agent only as ':latest'; mirror it into your ECR "
        "and set its digest): replace it before deploying"
    )
    assert keda.describe() == (
        "images.digests.keda-operator = 'ghcr.io/kedacore/keda:2.18.1' is an image not pinned by "
        "digest (gpufarm/data/images.yaml holds no confirmed digest for it; read the digest of this "
        "tag from the registry and set it): replace it before deploying"
    )


def test_parts_that_build_nothing_are_not_reported() -> None:
    """An example inherited into a part that is off reaches no resource."""
    production = production_document()
    production["model_store"]["kind"] = "s3-mountpoint"  # the FSx import path is left unused
    production["models"] = [
        {**m, "weights": "s3://acme-llm-weights/" + m["weights"].split("/", 3)[3]}
        for m in production["models"]
    ]
    production["ingress"]["certificate_arn"] = OWN_CERT
    production["ingress"]["allowed_cidrs"] = [OWN_CIDR]
    production["ingress"]["target_optimizer"]["agent_image"] = OWN_AGENT
    production["serving"]["sglang_image"] = f"lmsysorg/sglang:v0.5.23@{OWN_DIGEST}"
    production["images"] = {"digests": dict.fromkeys(PRODUCTION_UNCONFIRMED, OWN_DIGEST)}
    assert find_placeholders(build_tier(production)) == []
    enterprise = load_preset("enterprise")
    assert "ingress.private_link.allowed_principals[0]" in [p.path for p in find_placeholders(enterprise)]
    off = make_enterprise({"ingress": {"private_link": {"enabled": False}}})
    assert "ingress.private_link.allowed_principals[0]" not in [p.path for p in find_placeholders(off)]
    # The image cache's example credentials reach no resource once the cache is off.
    assert "images.docker_hub_credential_arn" in [p.path for p in find_placeholders(enterprise)]
    uncached = make_enterprise({"images": {"pull_through_cache": False}})
    assert not [p.path for p in find_placeholders(uncached) if p.path.endswith("_credential_arn")]


def test_a_tier_with_its_own_values_has_none() -> None:
    assert find_placeholders(make_tier(own_cluster())) == []


def test_describe_names_field_value_and_rule() -> None:
    (found,) = find_placeholders(load_preset("poc"))
    assert found.describe() == (
        "cluster.public_access_cidrs[0] = '198.51.100.0/24' is a documentation value "
        "(RFC 5737 TEST-NET-2, 198.51.100.0/24): replace it before deploying"
    )


# --------------------------------------------------------------------------- open choices

CLUSTER_OPEN = (
    "cluster.public_access_cidrs[0]: '0.0.0.0/0' opens the Kubernetes API endpoint to the whole "
    "internet; list the networks that need it, or state the choice with "
    '`cluster.open_to_internet: {reason: "..."}` (at least 20 characters)'
)
INGRESS_OPEN = (
    "ingress.allowed_cidrs[1]: '0.0.0.0/0' opens the load balancer to the whole internet; list the "
    'networks that need it, or state the choice with `ingress.open_to_internet: {reason: "..."}` '
    "(at least 20 characters)"
)


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        pytest.param(
            [{"cluster": {"public_access_cidrs": ["0.0.0.0/0"]}}], [CLUSTER_OPEN], id="cluster-open-unstated"
        ),
        pytest.param(
            [own_cluster(), {"ingress": {"allowed_cidrs": [OWN_CIDR, "0.0.0.0/0"]}}],
            [INGRESS_OPEN],
            id="ingress-open-unstated",
        ),
        pytest.param(
            [own_cluster(open_to_internet={"reason": REASON})],
            [
                "cluster.open_to_internet: states an open choice, but cluster.public_access_cidrs "
                "(['10.20.0.0/16']) holds no 0.0.0.0/0 or ::/0; remove it"
            ],
            id="cluster-reason-without-open-cidr",
        ),
        pytest.param(
            [own_cluster(), {"ingress": {"open_to_internet": {"reason": REASON}}}],
            [
                "ingress.open_to_internet: states an open choice, but ingress.allowed_cidrs ([]) holds "
                "no 0.0.0.0/0 or ::/0; remove it"
            ],
            id="ingress-reason-without-open-cidr",
        ),
        pytest.param(
            [{"cluster": {"public_access_cidrs": ["0.0.0.0/0"], "open_to_internet": {"reason": "demo"}}}],
            ["cluster.open_to_internet.reason: must say why, in at least 20 characters, got 'demo'"],
            id="reason-too-short",
        ),
        pytest.param(
            [
                {
                    "cluster": {
                        "public_access_cidrs": ["0.0.0.0/0"],
                        "open_to_internet": {"reason": "TODO: write down why this is open"},
                    }
                }
            ],
            [
                "cluster.open_to_internet.reason: must be a reason, not a placeholder, "
                "got 'TODO: write down why this is open'"
            ],
            id="reason-todo",
        ),
        pytest.param(
            [
                own_cluster(),
                {
                    "ingress": {
                        "allowed_cidrs": ["0.0.0.0/0"],
                        "open_to_internet": {"reason": "                         "},
                    }
                },
            ],
            [
                "ingress.open_to_internet.reason: must say why, in at least 20 characters, "
                "got '                         '"
            ],
            id="reason-blank",
        ),
    ],
)
def test_open_choices_refused(parts: list[dict[str, Any]], expected: list[str]) -> None:
    assert issues_of(*parts) == expected


def test_open_choices_accepted_with_a_reason() -> None:
    tier = make_tier(
        {"cluster": {"public_access_cidrs": ["0.0.0.0/0"], "open_to_internet": {"reason": REASON}}},
        {"ingress": {"allowed_cidrs": ["0.0.0.0/0"], "open_to_internet": {"reason": REASON}}},
    )
    assert tier.cluster.open_to_internet is not None
    assert tier.cluster.open_to_internet.reason == REASON
    assert tier.ingress.open_to_internet is not None
    assert find_placeholders(tier) == []


def test_open_choice_is_a_mapping_with_a_reason() -> None:
    assert issues_of(own_cluster(open_to_internet={"why": REASON})) == [
        "cluster.open_to_internet.reason: is required",
        "cluster.open_to_internet.why: is not a known setting (allowed: reason)",
    ]
    assert issues_of(own_cluster(open_to_internet="yes")) == [
        "cluster.open_to_internet: must be a mapping, got 'yes'"
    ]
