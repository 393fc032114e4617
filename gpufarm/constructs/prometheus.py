"""Amazon Managed Prometheus with its managed scraper, and NVIDIA's DCGM exporter on GPU nodes.

:class:`PrometheusMonitoring`: an AMP workspace, an AWS managed scraper (`AWS::APS::Scraper`)
that collects the vLLM and DCGM exporter metrics, and the DCGM exporter. KEDA reads the workspace
through :attr:`PrometheusMonitoring.query_endpoint`. See docs/decisions/0016-managed-scraper.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_aps as aps
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from gpufarm.config.model import Engine, PrometheusConfig
from gpufarm.constructs.cluster import helm_chart_on
from gpufarm.k8s.observability import dcgm_exporter_values, scrape_configuration, scraper_rbac

DCGM_REPOSITORY = "https://nvidia.github.io/dcgm-exporter/helm-charts"
DCGM_CHART = "dcgm-exporter"
DCGM_NAMESPACE = "dcgm-exporter"
SCRAPER_SERVICE = "scraper.aps.amazonaws.com"

# =============================================================================== Prometheus


class PrometheusMonitoring(Construct):
    """An AMP workspace fed by an AWS managed scraper, plus NVIDIA's DCGM exporter.

    The scraper discovers the vLLM pods in `serving_namespace` and the DCGM exporter pods
    through the Kubernetes API and scrapes them through network interfaces in `subnets` (at
    least two, in two Availability Zones), guarded by `security_groups`: those must reach the
    cluster endpoint on 443 and the pods on the vLLM port and 9400 (the cluster security group
    does when nodes use it). The cluster endpoint must have private access. `gateway_namespace`
    (default: none) also scrapes the gateway pods there on their metrics port (9090,
    :data:`gpufarm.k8s.demand.METRICS_PORT`): the demand counter that wakes models parked at zero,
    the answers by backend and Bedrock's tokens (the fallback-rate and spend alerts).

    Cluster access: with EKS access entries (authentication mode `API` or
    `API_AND_CONFIG_MAP`, the aws_eks_v2 default) AMP creates the scraper's access entry
    itself when the scraper is created; EKS refuses access entries for service-linked roles
    from anyone else, so none is declared here. `rbac=True` also applies the
    `aps-collector-role` ClusterRole and its binding to `aps-collector-user`, for clusters
    that map the scraper's role through the `aws-auth` ConfigMap (the mapping stays theirs).

    Defaults: the workspace (alias: the stack name) is retained when removed from the stack
    (`removal_policy`) and encrypted with an AWS owned key; with `key`, with that customer
    managed key, and the scraper then writes through a role pair (`RoleConfiguration`), as AMP
    requires for such workspaces. The DCGM exporter (when `config.dcgm_exporter`) is installed
    from NVIDIA's chart repository at `config.dcgm_exporter_chart_version` into
    `dcgm_namespace` ("dcgm-exporter"); on an :class:`~gpufarm.constructs.InferenceCluster`'s
    cluster it waits for the system nodes (:meth:`InferenceCluster.add_helm_chart`).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        config: PrometheusConfig,
        subnets: Sequence[ec2.ISubnet],
        security_groups: Sequence[ec2.ISecurityGroup],
        serving_namespace: str,
        gateway_namespace: str | None = None,
        engine_models: Mapping[Engine, Sequence[str]] | None = None,
        key: kms.IKey | None = None,
        dcgm_namespace: str = DCGM_NAMESPACE,
        rbac: bool = False,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        if not config.enabled:
            raise ValueError("'config.enabled' must be true to build PrometheusMonitoring, got False")
        if not 2 <= len(subnets) <= 5:
            raise ValueError(
                f"'subnets' must name 2-5 subnets in at least two Availability Zones, got {len(subnets)}"
            )
        if not 1 <= len(security_groups) <= 5:
            raise ValueError(
                "'security_groups' must name 1-5 security groups reaching the pods and the endpoint, "
                f"got {len(security_groups)}"
            )
        blob = scrape_configuration(
            scrape_interval_seconds=config.scrape_interval_seconds,
            serving_namespace=serving_namespace,
            dcgm_namespace=dcgm_namespace,
            gateway_namespace=gateway_namespace,
            engine_models=engine_models,
        )
        self.config = config
        self.key = key
        self.scrape_configuration = blob
        stack = cdk.Stack.of(self)
        alias = stack.stack_name[:100]
        self.workspace = aps.CfnWorkspace(
            self, "Resource", alias=alias, kms_key_arn=key.key_arn if key else None
        )
        # The workspace holds the metric history (150 days by default): kept like a log group.
        self.workspace.apply_removal_policy(removal_policy)
        self.source_role: iam.Role | None = None
        self.target_role: iam.Role | None = None
        role_configuration = self._role_configuration(key) if key else None
        self.scraper = aps.CfnScraper(
            self,
            "Scraper",
            alias=alias,
            source=aps.CfnScraper.SourceProperty(
                eks_configuration=aps.CfnScraper.EksConfigurationProperty(
                    cluster_arn=cluster.cluster_arn,
                    subnet_ids=[s.subnet_id for s in subnets],
                    security_group_ids=[g.security_group_id for g in security_groups],
                )
            ),
            destination=aps.CfnScraper.DestinationProperty(
                amp_configuration=aps.CfnScraper.AmpConfigurationProperty(
                    workspace_arn=self.workspace.attr_arn
                )
            ),
            scrape_configuration=aps.CfnScraper.ScrapeConfigurationProperty(configuration_blob=blob),
            role_configuration=role_configuration,
        )
        self.rbac_manifest: eks.KubernetesManifest | None = None
        if rbac:
            self.rbac_manifest = eks.KubernetesManifest(
                self, "ScraperRbac", cluster=cluster, manifest=scraper_rbac(), overwrite=True
            )
        self.dcgm_exporter: eks.HelmChart | None = None
        if config.dcgm_exporter:
            self.dcgm_exporter = helm_chart_on(
                cluster,
                self,
                "DcgmExporter",
                chart=DCGM_CHART,
                repository=DCGM_REPOSITORY,
                version=config.dcgm_exporter_chart_version,
                release=DCGM_CHART,
                namespace=dcgm_namespace,
                create_namespace=True,
                values=dcgm_exporter_values(),
                wait=True,
                timeout=cdk.Duration.minutes(10),
            )

    @property
    def workspace_arn(self) -> str:
        """ARN of the workspace."""
        return self.workspace.attr_arn

    @property
    def workspace_id(self) -> str:
        """ID of the workspace (`ws-...`)."""
        return self.workspace.attr_workspace_id

    @property
    def query_endpoint(self) -> str:
        """The workspace's Prometheus URL without trailing slash, as KEDA's `serverAddress` takes it.

        `https://aps-workspaces.<region>.<url suffix>/workspaces/<id>`; clients append
        `/api/v1/query`. (The workspace's `PrometheusEndpoint` attribute is the same URL with a
        trailing `/`.)
        """
        stack = cdk.Stack.of(self)
        return f"https://aps-workspaces.{stack.region}.{stack.url_suffix}/workspaces/{self.workspace_id}"

    @property
    def scraper_role_arn(self) -> str:
        """ARN of the scraper's service-linked role (the principal of its EKS access entry)."""
        return self.scraper.attr_role_arn

    def grant_query(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow `grantee` to run PromQL queries (`aps:QueryMetrics`) against the workspace.

        That is all KEDA's Prometheus scaler calls (`GET <workspace>/api/v1/query`). With a
        customer managed key, `kms:Decrypt` on it is granted as well (readers of such a
        workspace need it).
        """
        if self.key is not None:
            self.key.grant_decrypt(grantee)
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["aps:QueryMetrics"], resource_arns=[self.workspace_arn]
        )

    def _role_configuration(self, key: kms.IKey) -> aps.CfnScraper.RoleConfigurationProperty:
        """The role pair a scraper needs to write into a workspace encrypted with a customer key.

        The scraper's ARN is not known before it exists, so the trust conditions name this
        account's scrapers in this Region rather than the one scraper.
        """
        stack = cdk.Stack.of(self)
        scrapers = f"arn:{stack.partition}:aps:{stack.region}:{stack.account}:scraper/*"
        self.source_role = iam.Role(
            self,
            "ScraperSourceRole",
            assumed_by=iam.ServicePrincipal(
                SCRAPER_SERVICE,
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {"aws:SourceArn": scrapers},
                },
            ),
            description="AMP managed scraper: assumes the role that writes to the workspace",
        )
        self.target_role = iam.Role(
            self,
            "ScraperTargetRole",
            assumed_by=iam.ArnPrincipal(self.source_role.role_arn).with_conditions(
                {"StringLike": {"sts:ExternalId": scrapers}}
            ),
            description="AMP managed scraper: remote-writes into the customer-key workspace",
        )
        self.target_role.add_to_policy(
            iam.PolicyStatement(actions=["aps:RemoteWrite"], resources=[self.workspace.attr_arn])
        )
        key.grant(self.target_role, "kms:Decrypt", "kms:GenerateDataKey")
        self.source_role.add_to_policy(
            iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[self.target_role.role_arn])
        )
        return aps.CfnScraper.RoleConfigurationProperty(
            source_role_arn=self.source_role.role_arn, target_role_arn=self.target_role.role_arn
        )
