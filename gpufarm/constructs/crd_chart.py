"""A controller's CRDs as a Helm release of their own, from a chart shipped with gpufarm."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import yaml
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import region_info
from constructs import Construct

from gpufarm.constructs._util import acknowledge_all

CRD_CHART_TIMEOUT = cdk.Duration.minutes(5)


def crd_chart_dir(name: str) -> Path:
    """Folder of the CRD chart `name` shipped in `gpufarm/charts/`."""
    return Path(str(resources.files("gpufarm") / "charts" / name))


def crd_chart_version(name: str) -> str:
    """The `version` of the shipped CRD chart `name` (the upstream release its CRDs come from)."""
    chart = yaml.safe_load((crd_chart_dir(name) / "Chart.yaml").read_text(encoding="utf-8"))
    return str(chart["version"])


def _nag_text(value: Any) -> str:
    """A resolved CloudFormation value as cdk-nag writes it in a finding (`<AWS::AccountId>`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::Sub" in value and isinstance(value["Fn::Sub"], str):
        return re.sub(r"\$\{([^}]+)\}", r"<\1>", value["Fn::Sub"])
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_nag_text(p) for p in parts)
    raise ValueError(f"cannot name {value!r} as cdk-nag does")


class CrdChart(Construct):
    """Installs and upgrades a controller's CRDs as their own Helm release.

    Helm installs the CRDs in a chart's `crds/` folder on the first install only and never
    upgrades them, so a controller's version bump would keep its old schemas. The CRDs of the
    pinned release ship with gpufarm as the templates of a chart (`gpufarm/charts/<chart>`),
    uploaded as an asset: Helm owns them as release objects and `helm upgrade` applies new
    schemas when the chart changes. Each CRD carries `helm.sh/resource-policy: keep`, so an
    uninstall of this release never deletes the custom objects with their CRD.

    Make the controller's chart depend on :attr:`chart`: its own `crds/` then finds the CRDs in
    place, and Helm skips existing CRDs on install. The cluster's kubectl provider must expose its
    role (for an imported provider: `KubectlProviderAttributes(role=...)`): the chart is read
    from the CDK asset bucket with it. Defaults: namespace created, wait, 5-minute timeout.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        chart: str,
        namespace: str,
        create_namespace: bool = True,
    ) -> None:
        super().__init__(scope, id)
        provider = cluster.kubectl_provider
        if provider is None or provider.role is None:
            raise ValueError(
                "'cluster' must have a kubectl provider with its role (for an imported provider, "
                "KubectlProviderAttributes(role=...)): the provider reads the CRD chart "
                f"{chart!r} from the CDK asset bucket with it, got "
                + ("no kubectl provider" if provider is None else "a provider without a role")
            )
        self.chart_name = chart
        self.version = crd_chart_version(chart)
        self.asset = s3_assets.Asset(self, "Asset", path=str(crd_chart_dir(chart)))
        self.chart = eks.HelmChart(
            self,
            "Resource",
            cluster=cluster,
            chart_asset=self.asset,
            release=chart,
            namespace=namespace,
            create_namespace=create_namespace,
            wait=True,
            timeout=CRD_CHART_TIMEOUT,
        )
        self._acknowledge(cluster)

    def _acknowledge(self, cluster: eks.ICluster) -> None:
        """The read grant that aws-cdk-lib's HelmChart gives the kubectl provider on the asset."""
        provider = cluster.kubectl_provider
        if provider is None:
            return
        stack = cdk.Stack.of(self)
        partition = (
            "<AWS::Partition>"
            if cdk.Token.is_unresolved(stack.region)
            else region_info.RegionInfo.get(stack.region).partition or "<AWS::Partition>"
        )
        bucket = _nag_text(stack.resolve(self.asset.s3_bucket_name))
        reason = (
            "The kubectl provider downloads this chart of CRDs (a gpufarm asset) from the CDK "
            "bootstrap asset bucket: aws-cdk-lib's HelmChart grants it read access to that bucket's "
            "objects (chartAsset.grantRead); the bucket holds only this app's deployment assets."
        )
        findings = (
            "Action::s3:GetBucket*",
            "Action::s3:GetObject*",
            "Action::s3:List*",
            f"Resource::arn:{partition}:s3:::{bucket}/*",
        )
        acknowledge_all(provider, {f"AwsSolutions-IAM5[{finding}]": reason for finding in findings})
