"""Amazon EKS: rules the EKS API (and, for names a pod must carry, Kubernetes) enforces on
clusters, managed node groups, add-ons, access entries and Pod Identity associations."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterator
from typing import Any

import yaml

from gpufarm.config.names import is_dns_1123_label
from gpufarm.deploy_rules.checks import is_set, items, name_check, size_order_problems
from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_int, literal_str, ref_target
from gpufarm.deploy_rules.shapes import resource as _res

CLUSTER = "AWS::EKS::Cluster"
NODEGROUP = "AWS::EKS::Nodegroup"
ADDON = "AWS::EKS::Addon"
ACCESS_ENTRY = "AWS::EKS::AccessEntry"
POD_IDENTITY = "AWS::EKS::PodIdentityAssociation"
LAUNCH_TEMPLATE = "AWS::EC2::LaunchTemplate"

_API = "https://docs.aws.amazon.com/eks/latest/APIReference/"
_GUIDE = "https://docs.aws.amazon.com/eks/latest/userguide/"
_K8S_NAMES = "https://kubernetes.io/docs/concepts/overview/working-with-objects/names/"

ROLE = "arn:aws:iam::111122223333:role/gpufarm-nodes"
SUBNET = "subnet-0123456789abcdef0"


def _scaling(resource: Resource, _: Template) -> Iterator[str]:
    # NodegroupScalingConfig: minSize >= 0, maxSize >= 1; the API refuses a desired size below
    # the minimum ("Minimum capacity 3 can't be greater than desired size 2") or above the maximum.
    config = resource.prop("ScalingConfig")
    if not isinstance(config, dict):
        return
    high = literal_int(config.get("MaxSize"))
    if high is not None and high < 1:
        yield f"MaxSize {high}: a node group scales to at least 1 node"
    yield from size_order_problems(config, ("MinSize", "DesiredSize", "MaxSize"))


def _launch_template_data(resource: Resource, template: Template) -> dict[str, Any] | None:
    spec = resource.prop("LaunchTemplate")
    target = template.get(ref_target(spec.get("Id")) if isinstance(spec, dict) else None)
    if target is None or target.type != LAUNCH_TEMPLATE:
        return None
    data = target.prop("LaunchTemplateData")
    return data if isinstance(data, dict) else None


def _launch_template_conflicts(resource: Resource, template: Template) -> Iterator[str]:
    # CreateNodegroup, launchTemplate: "When using this object, don't directly specify
    # instanceTypes, diskSize, or remoteAccess." diskSize: "If you specify launchTemplate, then
    # don't specify diskSize, or the node group deployment will fail." The launch-template guide:
    # an instance type goes in the launch template or the node group, not both.
    if not is_set(resource.prop("LaunchTemplate")):
        return
    for prop in ("DiskSize", "RemoteAccess"):
        if is_set(resource.prop(prop)):
            yield f"{prop} with a launch template: set it in the launch template instead"
    data = _launch_template_data(resource, template)
    if data is not None and is_set(data.get("InstanceType")) and is_set(resource.prop("InstanceTypes")):
        yield "InstanceTypes on the node group and InstanceType in its launch template: give only one"


def _capacity_block(resource: Resource, template: Template) -> Iterator[str]:
    # EKS user guide, Capacity Blocks for managed node groups: "Managed node groups with
    # Capacity Blocks can only be created with custom launch templates", whose LaunchTemplateData
    # sets InstanceMarketOptions.MarketType "capacity-block" and targets the reservation.
    if literal_str(resource.prop("CapacityType")) != "CAPACITY_BLOCK":
        return
    if not is_set(resource.prop("LaunchTemplate")):
        yield "CapacityType CAPACITY_BLOCK needs a launch template that targets the Capacity Block"
        return
    data = _launch_template_data(resource, template)
    market = data.get("InstanceMarketOptions") if data is not None else None
    if data is not None and (not isinstance(market, dict) or market.get("MarketType") != "capacity-block"):
        yield (
            "CapacityType CAPACITY_BLOCK: the launch template's InstanceMarketOptions.MarketType "
            "must be capacity-block"
        )


TAINTS_MAX = 50
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


_VALUE_RULE = "a value is at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"


def _label_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return "its prefix is not a DNS subdomain"
    if not name or len(name) > 63 or not _LABEL_NAME.fullmatch(name):
        return "its name is not 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    return None


def _label_problems(key: str, value: str | None, *, what: str, empty_value: bool) -> Iterator[str]:
    # EKS API: a label key and value, and a taint key, are 1-63 characters *in all* (the prefix
    # counts); a taint value 0-63. Kubernetes (kubernetes.io, "Labels and Selectors", syntax and
    # character set): an optional DNS-subdomain prefix and a name of alphanumerics, '-', '_',
    # '.', beginning and ending alphanumeric; a value likewise, or empty.
    if not 1 <= len(key) <= 63:
        yield f"{what} key {key!r} is {len(key)} characters; EKS takes 1 to 63 (prefix included)"
    elif problem := _label_key_problem(key):
        yield f"{what} key {key!r}: {problem}"
    if value is None:
        return
    if len(value) > 63 or (not value and not empty_value):
        yield f"{what} {key}={value!r}: EKS takes a value of {0 if empty_value else 1} to 63 characters"
    elif not _LABEL_VALUE.fullmatch(value):
        yield f"{what} {key}={value!r}: {_VALUE_RULE}"


def _labels(resource: Resource, _: Template) -> Iterator[str]:
    labels = resource.prop("Labels")
    if isinstance(labels, dict):
        for key, value in labels.items():
            yield from _label_problems(str(key), literal_str(value), what="label", empty_value=False)


def _taints(resource: Resource, _: Template) -> Iterator[str]:
    # The 50-taint cap per node group is stated by the Terraform and Pulumi EKS providers'
    # node-group docs ("Maximum of 50 taints per node group"); the EKS API reference lists no
    # array limit on its own page.
    taints = items(resource.prop("Taints"))
    if len(taints) > TAINTS_MAX:
        yield f"{len(taints)} taints; a node group takes at most {TAINTS_MAX}"
    for taint in taints:
        key = literal_str(taint.get("Key")) if isinstance(taint, dict) else None
        if key is not None:
            value = literal_str(taint.get("Value"))
            yield from _label_problems(key, value, what="taint", empty_value=True)


def _configuration_values(resource: Resource, _: Template) -> Iterator[str]:
    # CreateAddon, configurationValues: "The set of configuration values for the add-on ... The
    # values that you provide are validated against the schema returned by
    # DescribeAddonConfiguration": a JSON or YAML document (a mapping) at the least.
    text = literal_str(resource.prop("ConfigurationValues"))
    if text is None:
        return
    try:
        document = json.loads(text)
    except ValueError:
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as error:
            yield f"ConfigurationValues is neither JSON nor YAML: {str(error).splitlines()[0]}"
            return
    if not isinstance(document, dict):
        yield f"ConfigurationValues is a {type(document).__name__}, not a mapping of settings"


_NODE_ENTRY_TYPES = {"EC2_LINUX", "EC2_WINDOWS"}


def _access_entry_type(resource: Resource, _: Template) -> Iterator[str]:
    # CreateAccessEntry, type: "If you set the value to EC2_LINUX or EC2_WINDOWS, you can't
    # specify values for kubernetesGroups, or associate an AccessPolicy to the access entry."
    kind = literal_str(resource.prop("Type"))
    if kind not in _NODE_ENTRY_TYPES:
        return
    for prop in ("KubernetesGroups", "AccessPolicies"):
        if items(resource.prop(prop)):
            yield f"{prop} on a {kind} access entry: EKS grants node permissions itself"


def _hybrid_access_entry(resource: Resource, _: Template) -> Iterator[str]:
    # Prepare cluster access for hybrid nodes: "You cannot add policies to the Hybrid Linux access
    # entry or change its access scope"; EKS sets its username to system:node:{{SessionName}}.
    if literal_str(resource.prop("Type")) != "HYBRID_LINUX":
        return
    for prop in ("KubernetesGroups", "AccessPolicies"):
        if items(resource.prop(prop)):
            yield f"{prop} on a HYBRID_LINUX access entry: EKS grants hybrid node permissions itself"


def _remote_networks(resource: Resource, _: Template) -> Iterator[str]:
    # RemoteNodeNetwork / RemotePodNetwork: "Each block must be within an IPv4 RFC-1918 network
    # range. Minimum allowed size is /32, maximum allowed size is /8"; the blocks of the node and
    # pod networks must not overlap each other (hybrid-nodes-networking); each list holds at most
    # one network (RemoteNetworkConfigResponse, "Maximum number of 1 item").
    config = resource.prop("RemoteNetworkConfig")
    if not isinstance(config, dict):
        return
    seen: list[tuple[str, ipaddress.IPv4Network]] = []
    for key in ("RemoteNodeNetworks", "RemotePodNetworks"):
        networks = items(config.get(key))
        if len(networks) > 1:
            yield f"{key} has {len(networks)} networks: EKS takes at most 1 (put the CIDRs in one)"
        for network in networks:
            cidrs = network.get("Cidrs") if isinstance(network, dict) else None
            for cidr in items(cidrs):
                text = literal_str(cidr)
                if text is None:
                    continue
                try:
                    block = ipaddress.IPv4Network(text)
                except ValueError:
                    yield f"{key} CIDR {text!r} is not an IPv4 CIDR block"
                    continue
                if not any(block.subnet_of(r) for r in _RFC1918):
                    yield f"{key} CIDR {text!r} is not within an RFC 1918 range"
                clash = next((c for c in seen if c[1].overlaps(block)), None)
                if clash is not None:
                    yield f"{key} CIDR {text!r} overlaps {clash[0]} CIDR {str(clash[1])!r}"
                seen.append((key, block))


def _hybrid_endpoint(resource: Resource, _: Template) -> Iterator[str]:
    # Create a cluster with hybrid nodes, considerations: "Your cluster cannot use 'Public and
    # Private' cluster endpoint connectivity, because the Amazon EKS Kubernetes API server endpoint
    # will resolve to the public IPs for hybrid nodes running outside of your VPC."
    config = resource.prop("RemoteNetworkConfig")
    if not isinstance(config, dict) or not items(config.get("RemoteNodeNetworks")):
        return
    vpc = resource.prop("ResourcesVpcConfig")
    if not isinstance(vpc, dict):
        return
    public, private = vpc.get("EndpointPublicAccess"), vpc.get("EndpointPrivateAccess")
    if public is True and private is True:
        yield (
            "RemoteNetworkConfig with both a public and a private endpoint: hybrid nodes need one of the two"
        )


def _hybrid_authentication(resource: Resource, _: Template) -> Iterator[str]:
    # Prepare cluster access for hybrid nodes: "The `CONFIG_MAP`-only authentication mode is not
    # supported for hybrid nodes-enabled Amazon EKS clusters."
    config = resource.prop("RemoteNetworkConfig")
    if not isinstance(config, dict) or not items(config.get("RemoteNodeNetworks")):
        return
    access = resource.prop("AccessConfig")
    mode = literal_str(access.get("AuthenticationMode")) if isinstance(access, dict) else None
    if mode == "CONFIG_MAP":
        yield (
            "RemoteNetworkConfig with AuthenticationMode CONFIG_MAP: hybrid nodes need API or "
            "API_AND_CONFIG_MAP"
        )


def _pod_identity_names(resource: Resource, _: Template) -> Iterator[str]:
    # A namespace name is an RFC 1123 DNS label (63 characters at most); a service account name
    # a DNS subdomain (253 at most): no pod can run under any other name, so the association
    # would never apply.
    namespace = literal_str(resource.prop("Namespace"))
    account = literal_str(resource.prop("ServiceAccount"))
    if namespace is not None and not is_dns_1123_label(namespace):
        yield f"Namespace {namespace!r} is not a DNS label (lowercase alphanumerics and '-', at most 63)"
    if account is not None and (len(account) > 253 or not _DNS_SUBDOMAIN.fullmatch(account)):
        yield f"ServiceAccount {account!r} is not a DNS subdomain (lowercase alphanumerics, '-' and '.')"


def _cluster(name: str) -> dict[str, Any]:
    return {"Cluster": _res(CLUSTER, Name=name, RoleArn=ROLE, ResourcesVpcConfig={"SubnetIds": [SUBNET]})}


_RFC1918 = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


def _hybrid_cluster(
    node: list[str], pod: list[str], *, public: bool = False, auth: str = "API"
) -> dict[str, Any]:
    vpc = {"SubnetIds": [SUBNET], "EndpointPrivateAccess": True, "EndpointPublicAccess": public}
    remote: dict[str, Any] = {"RemoteNodeNetworks": [{"Cidrs": node}]}
    if pod:
        remote["RemotePodNetworks"] = [{"Cidrs": pod}]
    return {
        "Cluster": _res(
            CLUSTER,
            Name="gpufarm",
            RoleArn=ROLE,
            ResourcesVpcConfig=vpc,
            RemoteNetworkConfig=remote,
            AccessConfig={"AuthenticationMode": auth},
        )
    }


def _nodegroup(**props: Any) -> dict[str, Any]:
    base = {
        "ClusterName": "gpufarm",
        "NodeRole": ROLE,
        "Subnets": [SUBNET],
        "ScalingConfig": {"MinSize": 1, "DesiredSize": 1, "MaxSize": 2},
    }
    return {"Ng": _res(NODEGROUP, **{**base, **props})}


def _with_template(data: dict[str, Any], **props: Any) -> dict[str, Any]:
    return {
        "Lt": _res(LAUNCH_TEMPLATE, LaunchTemplateData=data),
        **_nodegroup(LaunchTemplate={"Id": {"Ref": "Lt"}, "Version": "1"}, **props),
    }


_BLOCK = {
    "InstanceType": "p5.48xlarge",
    "InstanceMarketOptions": {"MarketType": "capacity-block"},
    "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": "cr-1"}},
}


def _access_entry(**props: Any) -> dict[str, Any]:
    return {"Entry": _res(ACCESS_ENTRY, ClusterName="gpufarm", PrincipalArn=ROLE, **props)}


_ADMIN = [
    {
        "PolicyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
        "AccessScope": {"Type": "cluster"},
    }
]


def _addon(values: str) -> dict[str, Any]:
    return {"Addon": _res(ADDON, ClusterName="gpufarm", AddonName="coredns", ConfigurationValues=values)}


def _association(namespace: str, account: str) -> dict[str, Any]:
    return {
        "Pia": _res(
            POD_IDENTITY, ClusterName="gpufarm", Namespace=namespace, ServiceAccount=account, RoleArn=ROLE
        )
    }


RULES: tuple[Rule, ...] = (
    Rule(
        # CreateCluster, name: "The name can contain only alphanumeric characters (case-sensitive),
        # hyphens, and underscores. It must start with an alphanumeric character and can't be
        # longer than 100 characters."
        id="EKS-CLUSTER-NAME",
        resource_type=CLUSTER,
        title="Cluster name: up to 100 letters, digits, hyphens and underscores, starting alphanumeric",
        doc_url=_API + "API_CreateCluster.html",
        check=name_check(
            "Name",
            max_len=100,
            pattern=r"[0-9A-Za-z][A-Za-z0-9\-_]*",
            allowed="only letters, digits, '-' and '_', starting with a letter or digit",
        ),
        bad=_cluster("gpufarm.production"),
        good=_cluster("gpufarm-production"),
    ),
    Rule(
        id="EKS-NODEGROUP-SCALING",
        resource_type=NODEGROUP,
        title="Node group sizes: MinSize <= DesiredSize <= MaxSize, MaxSize at least 1",
        doc_url=_API + "API_NodegroupScalingConfig.html",
        check=_scaling,
        bad=_nodegroup(ScalingConfig={"MinSize": 3, "DesiredSize": 2, "MaxSize": 6}),
        good=_nodegroup(ScalingConfig={"MinSize": 3, "DesiredSize": 3, "MaxSize": 6}),
    ),
    Rule(
        id="EKS-NODEGROUP-LAUNCH-TEMPLATE-CONFLICTS",
        resource_type=NODEGROUP,
        title="With a launch template: no DiskSize or RemoteAccess, instance types in one place only",
        doc_url=_API + "API_CreateNodegroup.html",
        check=_launch_template_conflicts,
        bad=_with_template({"InstanceType": "g6e.xlarge"}, DiskSize=200),
        good=_with_template({"InstanceType": "g6e.xlarge"}),
    ),
    Rule(
        id="EKS-NODEGROUP-CAPACITY-BLOCK",
        resource_type=NODEGROUP,
        title="CAPACITY_BLOCK node groups use a capacity-block launch template",
        doc_url=_GUIDE + "capacity-blocks-mng.html",
        check=_capacity_block,
        bad=_with_template({"InstanceType": "p5.48xlarge"}, CapacityType="CAPACITY_BLOCK"),
        good=_with_template(_BLOCK, CapacityType="CAPACITY_BLOCK"),
    ),
    Rule(
        id="EKS-NODEGROUP-LABELS",
        resource_type=NODEGROUP,
        title="Node labels: keys and values of 1-63 characters, valid Kubernetes label syntax",
        doc_url=_API + "API_UpdateLabelsPayload.html",
        check=_labels,
        bad=_nodegroup(Labels={"gpufarm.io/pool": "h100 base"}),
        good=_nodegroup(Labels={"gpufarm.io/pool": "h100-base"}),
    ),
    Rule(
        id="EKS-NODEGROUP-TAINTS",
        resource_type=NODEGROUP,
        title="Node taints: at most 50, keys of 1-63 and values of 0-63 characters, label syntax",
        doc_url=_API + "API_Taint.html",
        check=_taints,
        bad=_nodegroup(Taints=[{"Key": "nvidia.com/gpu", "Value": "true!", "Effect": "NO_SCHEDULE"}]),
        good=_nodegroup(Taints=[{"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NO_SCHEDULE"}]),
    ),
    Rule(
        id="EKS-ADDON-CONFIGURATION",
        resource_type=ADDON,
        title="Add-on configuration values are a JSON or YAML mapping",
        doc_url=_API + "API_CreateAddon.html",
        check=_configuration_values,
        bad=_addon("replicaCount 3"),
        good=_addon('{"replicaCount": 3}'),
    ),
    Rule(
        id="EKS-ACCESS-ENTRY-NODE-TYPE",
        resource_type=ACCESS_ENTRY,
        title="EC2_LINUX and EC2_WINDOWS access entries take no groups or access policies",
        doc_url=_API + "API_CreateAccessEntry.html",
        check=_access_entry_type,
        bad=_access_entry(Type="EC2_LINUX", AccessPolicies=_ADMIN),
        good=_access_entry(Type="STANDARD", AccessPolicies=_ADMIN),
    ),
    Rule(
        id="EKS-ACCESS-ENTRY-HYBRID",
        resource_type=ACCESS_ENTRY,
        title="HYBRID_LINUX access entries take no groups or access policies",
        doc_url=_GUIDE + "hybrid-nodes-cluster-prep.html",
        check=_hybrid_access_entry,
        bad=_access_entry(Type="HYBRID_LINUX", AccessPolicies=_ADMIN),
        good=_access_entry(Type="HYBRID_LINUX"),
    ),
    Rule(
        id="EKS-CLUSTER-REMOTE-NETWORKS",
        resource_type=CLUSTER,
        title="Hybrid nodes networks: one node and one pod network, RFC 1918 CIDRs that do not overlap",
        doc_url=_API + "API_RemoteNodeNetwork.html",
        check=_remote_networks,
        bad=_hybrid_cluster(["192.168.0.0/16"], ["192.168.128.0/17"]),
        good=_hybrid_cluster(["192.168.0.0/17"], ["192.168.128.0/17"]),
    ),
    Rule(
        id="EKS-CLUSTER-HYBRID-ENDPOINT",
        resource_type=CLUSTER,
        title="A cluster with hybrid nodes has a public or a private API endpoint, not both",
        doc_url=_GUIDE + "hybrid-nodes-cluster-create.html",
        check=_hybrid_endpoint,
        bad=_hybrid_cluster(["192.168.0.0/17"], [], public=True),
        good=_hybrid_cluster(["192.168.0.0/17"], []),
    ),
    Rule(
        id="EKS-CLUSTER-HYBRID-AUTHENTICATION",
        resource_type=CLUSTER,
        title="A cluster with hybrid nodes authenticates with API or API_AND_CONFIG_MAP",
        doc_url=_GUIDE + "hybrid-nodes-cluster-prep.html",
        check=_hybrid_authentication,
        bad=_hybrid_cluster(["192.168.0.0/17"], [], auth="CONFIG_MAP"),
        good=_hybrid_cluster(["192.168.0.0/17"], [], auth="API_AND_CONFIG_MAP"),
    ),
    Rule(
        id="EKS-POD-IDENTITY-NAMES",
        resource_type=POD_IDENTITY,
        title="Namespace is a DNS label and service account a DNS subdomain",
        doc_url=_K8S_NAMES,
        check=_pod_identity_names,
        bad=_association("Model_Serving", "vllm"),
        good=_association("model-serving", "vllm"),
    ),
)
