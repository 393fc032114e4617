"""The CRD charts gpufarm ships: the pinned releases' CRDs, unchanged but for Helm's keep policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufarm.constructs.crd_chart import crd_chart_dir, crd_chart_version
from gpufarm.constructs.lb_controller import LBC_CHART_VERSION, LBC_CRD_CHART
from gpufarm.constructs.lws import CRD_CHART as LWS_CRD_CHART
from gpufarm.k8s.lws import LWS_CHART_VERSION

from .k8s_schema import CRD_DIR

CHARTS = {
    LWS_CRD_CHART: (LWS_CHART_VERSION, {"leaderworkerset.x-k8s.io_leaderworkersets.yaml"}),
    LBC_CRD_CHART: (
        LBC_CHART_VERSION,
        {
            "elbv2.k8s.aws_targetgroupbindings.yaml",
            "elbv2.k8s.aws_ingressclassparams.yaml",
            "elbv2.k8s.aws_albtargetcontrolconfigs.yaml",
        },
    ),
}


def _templates(chart: str) -> dict[str, str]:
    folder = crd_chart_dir(chart) / "templates"
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("chart", sorted(CHARTS))
def test_the_chart_is_the_pinned_release(chart: str) -> None:
    version, files = CHARTS[chart]
    meta: dict[str, Any] = yaml.safe_load((crd_chart_dir(chart) / "Chart.yaml").read_text())
    assert (meta["apiVersion"], meta["name"], meta["version"], meta["appVersion"]) == (
        "v2",
        chart,
        version,
        f"v{version}",
    )
    assert crd_chart_version(chart) == version
    assert set(_templates(chart)) == files


@pytest.mark.parametrize("chart", sorted(CHARTS))
def test_every_template_is_a_crd_that_helm_keeps_and_does_not_template(chart: str) -> None:
    for name, text in _templates(chart).items():
        crd = yaml.safe_load(text)
        assert crd["kind"] == "CustomResourceDefinition", name
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep", name
        # Helm renders templates: any action markup would be evaluated, not kept.
        assert "{{" not in text, name


@pytest.mark.parametrize("chart", sorted(CHARTS))
def test_the_crds_are_the_upstream_ones(chart: str) -> None:
    if not CRD_DIR.is_dir():
        pytest.skip(f"{CRD_DIR} is not here")
    for name, text in _templates(chart).items():
        ours = yaml.safe_load(text)
        del ours["metadata"]["annotations"]["helm.sh/resource-policy"]
        assert ours == yaml.safe_load((CRD_DIR / name).read_text()), name


def test_the_charts_ship_with_the_package() -> None:
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"charts/*/Chart.yaml"' in pyproject
    assert '"charts/*/templates/*.yaml"' in pyproject
