"""The image table (gpufarm/data/images.yaml) and its loader (gpufarm/images.py)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from gpufarm import images
from gpufarm.config import ConfigError
from gpufarm.config.image_pins import CHART_VERSION_FIELDS, chart_version_issues
from gpufarm.images import DIGEST, ImageTableError, parse_table, split_reference, table
from tests.helm import chart_available
from tests.unit.upstream_ref import chart_data

from .factories import make_enterprise, make_tier

DIGEST_A = "sha256:" + "a" * 64


def test_every_row_has_a_digest_with_its_date_and_source_or_says_why_not() -> None:
    for row in table().values():
        if row.digest is None:
            assert row.unconfirmed and row.read_on is None, row.name
        else:
            assert DIGEST.match(row.digest), row.name
            assert isinstance(row.read_on, datetime.date) and row.source, row.name
            assert row.read_on <= datetime.date(2026, 12, 1), row.name
            assert row.unconfirmed is None, row.name


def test_no_digest_is_written_twice() -> None:
    digests = [row.digest for row in table().values() if row.digest]
    assert len(digests) == len(set(digests))


def test_reference_joins_tag_and_digest() -> None:
    vllm = table()["vllm"]
    assert images.reference("vllm") == f"vllm/vllm-openai:v0.31.0@{vllm.digest}"
    assert split_reference(images.reference("vllm")) == ("vllm/vllm-openai", "v0.31.0", vllm.digest)


def test_a_supplied_digest_fills_only_a_row_without_one() -> None:
    assert images.reference("lws-controller") == "registry.k8s.io/lws/lws:v0.10.0"
    assert images.reference("lws-controller", {"lws-controller": DIGEST_A}) == (
        f"registry.k8s.io/lws/lws:v0.10.0@{DIGEST_A}"
    )
    assert images.helm_tag("lws-controller", {"lws-controller": DIGEST_A}) == f"v0.10.0@{DIGEST_A}"
    assert images.reference("vllm", {"vllm": DIGEST_A}) == images.reference("vllm")


def test_an_unknown_image_names_the_rows() -> None:
    with pytest.raises(KeyError, match=r"no image 'vlm' in images\.yaml"):
        images.image("vlm")


@pytest.mark.parametrize(
    ("reference", "parts"),
    [
        ("registry.k8s.io/lws/lws:v0.10.0", ("registry.k8s.io/lws/lws", "v0.10.0", "")),
        (f"localhost:5000/a/b@{DIGEST_A}", ("localhost:5000/a/b", "", DIGEST_A)),
        (f"localhost:5000/a/b:v1@{DIGEST_A}", ("localhost:5000/a/b", "v1", DIGEST_A)),
    ],
)
def test_split_reference(reference: str, parts: tuple[str, str, str]) -> None:
    assert split_reference(reference) == parts


GOOD_ROW: dict[str, Any] = {
    "repository": "example.org/a",
    "tag": "v1",
    "digest": DIGEST_A,
    "read_on": datetime.date(2026, 10, 1),
    "source": "a record",
}


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {**GOOD_ROW, "digest": "sha256:abc"},
            "images.x.digest must be 'sha256:' followed by 64 lowercase hex digits, got 'sha256:abc'",
        ),
        (
            {**GOOD_ROW, "read_on": None},
            "images.x.read_on must be the date the digest was read (YYYY-MM-DD), got None",
        ),
        ({**GOOD_ROW, "source": ""}, "images.x.source must say where the digest was read"),
        ({**GOOD_ROW, "unconfirmed": "why"}, "images.x.unconfirmed must be empty when the row has a digest"),
        (
            {**GOOD_ROW, "digest": None, "read_on": None},
            "images.x.unconfirmed must say why the row has no digest",
        ),
        (
            {**GOOD_ROW, "digest": None, "unconfirmed": "not found"},
            "images.x.read_on must be empty when the row has no digest",
        ),
        ({**GOOD_ROW, "tag": ""}, "images.x.tag must be a non-empty string, got ''"),
        ({**GOOD_ROW, "chart": "keda"}, "images.x.chart must be '<chart>@<version>', got 'keda'"),
        (
            {**GOOD_ROW, "sha": 1},
            "images.x has unknown keys ['sha'] (allowed: ['chart', 'digest', 'read_on', 'repository', "
            "'source', 'tag', 'unconfirmed'])",
        ),
    ],
)
def test_a_malformed_row_is_refused_with_its_field(row: dict[str, Any], message: str) -> None:
    with pytest.raises(ImageTableError) as caught:
        parse_table({"images": {"x": row}})
    assert str(caught.value) == message


@pytest.mark.parametrize("name", [row.name for row in table().values() if row.chart])
def test_chart_rows_name_the_chart_gpufarm_pins(name: str) -> None:
    row = table()[name]
    assert row.chart_name and row.chart_version
    if not chart_available(row.chart):
        pytest.skip("../shared/upstream-ref is not beside the repo")
    data = chart_data(row.chart_name, row.chart_version)
    assert data["version"] == row.chart_version


@pytest.mark.skipif(
    not chart_available("karpenter@1.14.0"), reason="../shared/upstream-ref is not beside the repo"
)
def test_karpenter_digest_is_the_one_its_chart_release_ships() -> None:
    values = chart_data("karpenter", "1.14.0")["values"]["controller"]["image"]
    row = table()["karpenter-controller"]
    assert (values["repository"], values["tag"], values["digest"]) == (row.repository, row.tag, row.digest)


def test_chart_version_fields_are_table_rows() -> None:
    assert set(CHART_VERSION_FIELDS) <= set(table())


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            {"karpenter": {"chart_version": "1.15.0"}},
            "karpenter.chart_version: must be '1.14.0', the karpenter chart whose image gpufarm pins by "
            "digest (karpenter-controller in gpufarm/data/images.yaml; move the chart and the image's tag "
            "and digest together), got '1.15.0'",
        ),
        (
            {"autoscaling": {"keda_chart_version": "2.19.0"}},
            "autoscaling.keda_chart_version: must be '2.18.1', the keda chart whose image gpufarm pins by "
            "digest (keda-operator in gpufarm/data/images.yaml; move the chart and the image's tag and "
            "digest together), got '2.19.0'",
        ),
    ],
)
def test_a_chart_version_the_table_does_not_pin_is_refused(override: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        make_enterprise(override)
    assert [str(issue) for issue in caught.value.issues] == [message]


def test_a_chart_the_tier_does_not_run_is_not_checked() -> None:
    # The poc tier runs on EKS Auto Mode: no Karpenter chart is installed.
    assert list(chart_version_issues(make_tier({"karpenter": {"chart_version": "1.15.0"}}))) == []
