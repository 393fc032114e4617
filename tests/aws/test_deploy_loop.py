"""The AWS side of `gpufarm status`, `kubeconfig` and `destroy` against moto (CloudFormation, ELBv2,
CloudWatch, EKS, FSx, EC2, STS), and the Kubernetes reads against `kubectl get -o json` documents
(tests/aws/fixtures/) and a local API server."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import ssl
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from gpufarm.aws.eks import (
    ClusterNotReadyError,
    describe_cluster,
    eks_token,
    kubeconfig_entry,
    merge_kubeconfig,
)
from gpufarm.aws.kube import ApiServerReader, KubernetesReadError, model_pods, nodes_per_pool
from gpufarm.aws.stack import StackNotFoundError, describe_stack, stack_resources
from gpufarm.aws.status import FALLBACK_WINDOW_SECONDS, fallback_share, read_status, target_health
from gpufarm.aws.teardown import (
    RetainedResource,
    TeardownPlan,
    destroy_until_gone,
    leftover_instances,
    plan_teardown,
    release_retained,
    retained_resources,
    unprotect,
)
from gpufarm.config import TierConfig, load_preset
from gpufarm.config.model import LoadBalancerKind

REGION = "us-east-1"
FIXTURES = Path(__file__).parent / "fixtures"


def kubectl(name: str) -> list[dict[str, Any]]:
    """The items of a recorded `kubectl get <kind> -o json` document."""
    items: list[dict[str, Any]] = json.loads((FIXTURES / f"kubectl-get-{name}.json").read_text())["items"]
    return items


@contextmanager
def moto_account(monkeypatch: pytest.MonkeyPatch) -> Iterator[boto3.Session]:
    """A moto account with fake credentials; yields a session for the region."""
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        yield boto3.Session(region_name=REGION)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[boto3.Session]:
    """A moto account (:func:`moto_account`)."""
    with moto_account(monkeypatch) as session:
        yield session


def deploy_stack(
    session: boto3.Session, *, name: str = "gpufarm-poc", protected: bool = True
) -> dict[str, str]:
    """A stack shaped like a tier's (its load balancer, the gateway's and a model's target groups, a
    retained security group, the ClusterName output); returns the VPC's and subnets' IDs."""
    ec2 = session.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"{REGION}{az}")["Subnet"][
            "SubnetId"
        ]
        for i, az in ((1, "a"), (2, "b"))
    ]
    template = {
        "Resources": {
            "Ingress72968116": {
                "Type": "AWS::ElasticLoadBalancingV2::LoadBalancer",
                "Properties": {"Subnets": subnets},
            },
            "IngressDefaultRouteTargetGroupDE3500E4": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {"VpcId": vpc, "Port": 4000, "Protocol": "HTTP", "TargetType": "ip"},
            },
            "IngressQwen38bTargetGroupE7485DAF": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {"VpcId": vpc, "Port": 8000, "Protocol": "HTTP", "TargetType": "ip"},
            },
            "IngressListener": {
                "Type": "AWS::ElasticLoadBalancingV2::Listener",
                "Properties": {
                    "LoadBalancerArn": {"Ref": "Ingress72968116"},
                    "Port": 8088,
                    "Protocol": "HTTP",
                    "DefaultActions": [
                        {
                            "Type": "forward",
                            "TargetGroupArn": {"Ref": "IngressDefaultRouteTargetGroupDE3500E4"},
                        }
                    ],
                },
            },
            "ModelStoreSecurityGroup": {
                "Type": "AWS::EC2::SecurityGroup",
                "DeletionPolicy": "Retain",
                "Properties": {"GroupDescription": "model store", "VpcId": vpc},
            },
        },
        "Outputs": {"ClusterName": {"Value": name}},
    }
    session.client("cloudformation").create_stack(
        StackName=name, TemplateBody=json.dumps(template), EnableTerminationProtection=protected
    )
    return {"vpc": vpc, "subnet": subnets[0]}


def poc() -> TierConfig:
    return load_preset("poc")


# --------------------------------------------------------------------------- the stack


def test_describe_stack_reads_state_outputs_and_protection(aws: boto3.Session) -> None:
    deploy_stack(aws)
    stack = describe_stack(aws.client("cloudformation"), "gpufarm-poc")
    assert (stack.status, stack.outputs, stack.termination_protection) == (
        "CREATE_COMPLETE",
        {"ClusterName": "gpufarm-poc"},
        True,
    )
    kinds = {r.logical_id: r.type for r in stack_resources(aws.client("cloudformation"), "gpufarm-poc")}
    assert kinds["ModelStoreSecurityGroup"] == "AWS::EC2::SecurityGroup"
    assert kinds["Ingress72968116"] == "AWS::ElasticLoadBalancingV2::LoadBalancer"


def test_a_missing_stack_is_not_found(aws: boto3.Session) -> None:
    with pytest.raises(StackNotFoundError):
        describe_stack(aws.client("cloudformation"), "gpufarm-nope")


# --------------------------------------------------------------------------- status


def test_target_health_counts_each_groups_targets(aws: boto3.Session) -> None:
    deploy_stack(aws)
    resources = stack_resources(aws.client("cloudformation"), "gpufarm-poc")
    elbv2 = aws.client("elbv2")
    model = next(r for r in resources if r.logical_id.startswith("IngressQwen38b"))
    elbv2.register_targets(
        TargetGroupArn=model.physical_id,
        Targets=[{"Id": "10.0.1.10", "Port": 8000}, {"Id": "10.0.2.10", "Port": 8000}],
    )
    health = {t.logical_id: t for t in target_health(elbv2, resources)}
    # Two registered pods in the model's group, none in the gateway's; both groups are listed.
    assert sorted(health) == ["IngressDefaultRouteTargetGroupDE3500E4", "IngressQwen38bTargetGroupE7485DAF"]
    assert health["IngressDefaultRouteTargetGroupDE3500E4"].total == 0
    assert health["IngressQwen38bTargetGroupE7485DAF"].total == 2
    assert sum(health["IngressQwen38bTargetGroupE7485DAF"].states.values()) == 2


def test_fallback_share_is_bedrock_invocations_over_gateway_requests(aws: boto3.Session) -> None:
    deploy_stack(aws)
    resources = stack_resources(aws.client("cloudformation"), "gpufarm-poc")
    gateway = next(r for r in resources if r.logical_id.startswith("IngressDefaultRoute"))
    balancer = next(r for r in resources if r.type == "AWS::ElasticLoadBalancingV2::LoadBalancer")
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    cloudwatch = aws.client("cloudwatch")
    # The dimensions as ALB publishes them: the ARN's suffix after "loadbalancer/" and after the last ":".
    cloudwatch.put_metric_data(
        Namespace="AWS/ApplicationELB",
        MetricData=[
            {
                "MetricName": "RequestCount",
                "Dimensions": [
                    {"Name": "LoadBalancer", "Value": balancer.physical_id.split("loadbalancer/")[1]},
                    {"Name": "TargetGroup", "Value": gateway.physical_id.rsplit(":", 1)[1]},
                ],
                "Timestamp": now - dt.timedelta(minutes=5),
                "Value": 80,
            }
        ],
    )
    model_id = "us.meta.llama3-1-8b-instruct-v1:0"  # the poc preset's fallback
    cloudwatch.put_metric_data(
        Namespace="AWS/Bedrock",
        MetricData=[
            {
                "MetricName": "Invocations",
                "Dimensions": [{"Name": "ModelId", "Value": model_id}],
                "Timestamp": now - dt.timedelta(minutes=5),
                "Value": 4,
            },
            {  # before the window: not counted
                "MetricName": "Invocations",
                "Dimensions": [{"Name": "ModelId", "Value": model_id}],
                "Timestamp": now - dt.timedelta(seconds=FALLBACK_WINDOW_SECONDS + 600),
                "Value": 50,
            },
        ],
    )
    share, note = fallback_share(
        poc(), elbv2=aws.client("elbv2"), cloudwatch=cloudwatch, resources=resources, now=now
    )
    assert note == ""
    assert share is not None
    assert (share.bedrock_invocations, share.gateway_requests) == (4, 80)
    assert share.percent == pytest.approx(5.0)  # 4 of 80 requests went to Bedrock


def test_fallback_share_says_why_an_nlb_tier_has_none(aws: boto3.Session) -> None:
    config = poc()
    nlb = config.model_copy(
        update={"ingress": config.ingress.model_copy(update={"kind": LoadBalancerKind.NLB})}
    )
    share, note = fallback_share(
        nlb,
        elbv2=aws.client("elbv2"),
        cloudwatch=aws.client("cloudwatch"),
        resources=[],
        now=dt.datetime.now(dt.UTC),
    )
    assert share is None
    assert (
        note == "an NLB publishes no request count; read the gateway's Prometheus series (docs/fallback.md)"
    )


class RecordedCluster:
    """The Kubernetes reads answered from recorded `kubectl get -o json` documents."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def list_nodes(self) -> list[dict[str, Any]]:
        return kubectl("nodes")

    def list_pods(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        self.asked.append((namespace, label_selector))
        return kubectl("pods")


def test_nodes_are_grouped_by_pool_with_ready_counted() -> None:
    pools = {p.pool: p for p in nodes_per_pool(kubectl("nodes"))}
    # gpufarm's pool label first, then Karpenter's NodePool, then the managed node group.
    assert sorted(pools) == ["h100-base", "l40s", "system"]
    assert (pools["l40s"].nodes, pools["l40s"].ready) == (2, 1)  # the second node is NotReady
    assert pools["l40s"].instance_types == ("g6e.2xlarge", "g6e.xlarge")
    assert (pools["h100-base"].nodes, pools["h100-base"].ready) == (1, 1)


def test_model_pods_count_ready_and_leave_terminating_pods_out() -> None:
    rows = {m.model: m for m in model_pods(kubectl("pods"), {"qwen3-8b": 1, "idle": None})}
    qwen, idle = rows["qwen3-8b"], rows["idle"]
    # Three pods carry the label; the one with a deletionTimestamp is on its way out.
    assert (qwen.model, qwen.pods, qwen.ready, qwen.desired) == ("qwen3-8b", 2, 1, 1)
    assert (idle.model, idle.pods, idle.ready, idle.desired) == ("idle", 0, 0, None)


def test_read_status_puts_it_together(aws: boto3.Session) -> None:
    deploy_stack(aws)
    cluster = RecordedCluster()
    names: list[str] = []

    def reader(name: str) -> RecordedCluster:
        names.append(name)
        return cluster

    report = read_status(poc(), session=aws, kubernetes=reader)
    assert report.stack.status == "CREATE_COMPLETE"
    assert names == ["gpufarm-poc"]  # the stack's ClusterName output
    assert cluster.asked == [("gpufarm", "gpufarm.io/model")]  # the serving namespace, pods with a model
    assert report.models is not None
    assert [(m.model, m.ready, m.desired) for m in report.models] == [("qwen3-8b", 1, 1)]
    document = report.to_dict()
    assert document["fallback"]["percent"] is None  # no gateway requests in the window
    assert [p["pool"] for p in document["node_pools"]] == ["h100-base", "l40s", "system"]


def test_read_status_reports_an_unreadable_cluster_instead_of_failing(aws: boto3.Session) -> None:
    deploy_stack(aws)

    def refuse(name: str) -> RecordedCluster:
        raise KubernetesReadError("GET /api/v1/nodes: HTTP 401 Unauthorized")

    report = read_status(poc(), session=aws, kubernetes=refuse)
    assert (report.pools, report.models) == (None, None)
    assert report.kubernetes_note == "GET /api/v1/nodes: HTTP 401 Unauthorized"


# --------------------------------------------------------------------------- the API server client


class _ApiServer(BaseHTTPRequestHandler):
    """Serves the recorded node list in two pages, as a list call with `limit` does."""

    requests: ClassVar[list[tuple[str, dict[str, list[str]], str]]] = []

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        type(self).requests.append((url.path, query, self.headers.get("Authorization", "")))
        if self.headers.get("Authorization") != "Bearer k8s-aws-v1.token":
            self.send_response(401, "Unauthorized")
            self.end_headers()
            return
        items = kubectl("nodes") if url.path == "/api/v1/nodes" else kubectl("pods")
        if "continue" in query:
            body = {"kind": "NodeList", "metadata": {}, "items": items[2:]}
        else:
            body = {"kind": "NodeList", "metadata": {"continue": "page-2"}, "items": items[:2]}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def api_server() -> Iterator[str]:
    _ApiServer.requests = []
    server = HTTPServer(("127.0.0.1", 0), _ApiServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_api_server_reader_pages_through_a_list_with_the_token(api_server: str) -> None:
    reader = ApiServerReader(endpoint=api_server, certificate_authority="", token="k8s-aws-v1.token")
    nodes = reader.list_nodes()
    assert [n["metadata"]["name"] for n in nodes] == [n["metadata"]["name"] for n in kubectl("nodes")]
    (first, second) = _ApiServer.requests
    assert first[0] == "/api/v1/nodes" and "continue" not in first[1]
    assert second[1]["continue"] == ["page-2"]
    pods = reader.list_pods("gpufarm", "gpufarm.io/model")
    assert len(pods) == len(kubectl("pods"))
    assert _ApiServer.requests[2][0] == "/api/v1/namespaces/gpufarm/pods"
    assert _ApiServer.requests[2][1]["labelSelector"] == ["gpufarm.io/model"]


def test_api_server_reader_says_when_the_token_is_refused(api_server: str) -> None:
    reader = ApiServerReader(endpoint=api_server, certificate_authority="", token="wrong")
    with pytest.raises(KubernetesReadError) as caught:
        reader.list_nodes()
    assert str(caught.value) == (
        "GET /api/v1/nodes: HTTP 401 Unauthorized: the caller has no access entry on the cluster "
        "(set cluster.admin_role_arn, or add one)"
    )


# --------------------------------------------------------------------------- EKS and kubeconfig


def make_cluster(session: boto3.Session, name: str = "gpufarm-poc") -> None:
    session.client("eks").create_cluster(
        name=name,
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": ["subnet-1", "subnet-2"]},
    )


def test_kubeconfig_entry_is_update_kubeconfigs(aws: boto3.Session) -> None:
    make_cluster(aws)
    cluster = describe_cluster(aws.client("eks"), "gpufarm-poc")
    entry = kubeconfig_entry(cluster)
    arn = f"arn:aws:eks:{REGION}:123456789012:cluster/gpufarm-poc"
    assert cluster.arn == arn
    assert entry["current-context"] == arn
    assert entry["clusters"] == [
        {
            "cluster": {
                "certificate-authority-data": cluster.certificate_authority,
                "server": cluster.endpoint,
            },
            "name": arn,
        }
    ]
    assert entry["users"] == [
        {
            "name": arn,
            "user": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1beta1",
                    "args": ["--region", REGION, "eks", "get-token", "--cluster-name", "gpufarm-poc"],
                    "command": "aws",
                }
            },
        }
    ]
    assert entry["contexts"] == [{"context": {"cluster": arn, "user": arn}, "name": arn}]


def test_merge_replaces_the_same_cluster_and_keeps_the_others() -> None:
    existing = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "kind-dev", "cluster": {"server": "https://127.0.0.1:6443"}},
            {"name": "arn:x", "cluster": {"server": "old"}},
        ],
        "users": [{"name": "kind-dev", "user": {}}],
        "contexts": [{"name": "kind-dev", "context": {"cluster": "kind-dev", "user": "kind-dev"}}],
        "current-context": "kind-dev",
    }
    entry = {
        "clusters": [{"name": "arn:x", "cluster": {"server": "new"}}],
        "users": [{"name": "arn:x", "user": {"exec": {}}}],
        "contexts": [{"name": "arn:x", "context": {"cluster": "arn:x", "user": "arn:x"}}],
        "current-context": "arn:x",
    }
    merged = merge_kubeconfig(existing, entry)
    assert [c["name"] for c in merged["clusters"]] == ["kind-dev", "arn:x"]
    assert merged["clusters"][1]["cluster"]["server"] == "new"
    assert [u["name"] for u in merged["users"]] == ["kind-dev", "arn:x"]
    assert merged["current-context"] == "arn:x"


def test_eks_token_is_a_presigned_get_caller_identity_for_the_cluster(aws: boto3.Session) -> None:
    token = eks_token(aws, "gpufarm-poc")
    assert token.startswith("k8s-aws-v1.")
    encoded = token.removeprefix("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert query["Action"] == ["GetCallerIdentity"]
    assert query["X-Amz-Expires"] == ["60"]
    # The cluster name is signed as a header, so the token is good for this cluster only.
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0].split(";")


# --------------------------------------------------------------------------- destroy


def test_retained_resources_follow_the_deletion_policy() -> None:
    template = {
        "Resources": {
            "Keep": {"Type": "AWS::S3::Bucket", "DeletionPolicy": "Retain"},
            "KeepLater": {"Type": "AWS::KMS::Key", "DeletionPolicy": "RetainExceptOnCreate"},
            "Snap": {"Type": "AWS::EC2::Volume", "DeletionPolicy": "Snapshot"},
            "Gone": {"Type": "AWS::SQS::Queue", "DeletionPolicy": "Delete"},
            "Default": {"Type": "AWS::SNS::Topic"},
        }
    }
    assert [(r.logical_id, r.policy) for r in retained_resources(template)] == [
        ("Keep", "Retain"),
        ("KeepLater", "RetainExceptOnCreate"),
    ]


def test_plan_and_unprotect_turn_off_both_protections(aws: boto3.Session) -> None:
    deploy_stack(aws)
    elbv2 = aws.client("elbv2")
    (balancer,) = elbv2.describe_load_balancers()["LoadBalancers"]
    elbv2.modify_load_balancer_attributes(
        LoadBalancerArn=balancer["LoadBalancerArn"],
        Attributes=[{"Key": "deletion_protection.enabled", "Value": "true"}],
    )
    template = {
        "Resources": {
            "ModelStoreSecurityGroup": {"Type": "AWS::EC2::SecurityGroup", "DeletionPolicy": "Retain"}
        }
    }
    plan = plan_teardown(aws, REGION, "gpufarm-poc", template)
    assert plan.protected_load_balancers == [balancer["LoadBalancerArn"]]
    (group,) = plan.security_groups
    assert group.physical_id.startswith("sg-")
    assert plan.steps() == [
        "turn off termination protection on stack gpufarm-poc",
        f"turn off deletion protection on load balancer {balancer['LoadBalancerArn']}",
        "cdk destroy gpufarm-poc",
        f"if the deletion stops at the VPC: delete security group {group.physical_id}, "
        "then cdk destroy again",
    ]
    said: list[str] = []
    # moto does not implement UpdateTerminationProtection: a Stubber checks the call gpufarm makes.
    cfn = aws.client("cloudformation")
    with Stubber(cfn) as stub:
        stub.add_response(
            "update_termination_protection",
            {"StackId": "gpufarm-poc"},
            {"EnableTerminationProtection": False, "StackName": "gpufarm-poc"},
        )
        unprotect(cfn, elbv2, plan, said.append)
        stub.assert_no_pending_responses()
    attributes = elbv2.describe_load_balancer_attributes(LoadBalancerArn=balancer["LoadBalancerArn"])[
        "Attributes"
    ]
    assert {"Key": "deletion_protection.enabled", "Value": "false"} in attributes
    assert said == [
        "termination protection off: gpufarm-poc",
        f"deletion protection off: {balancer['LoadBalancerArn']}",
    ]


def test_release_deletes_the_retained_file_system_then_its_security_group(aws: boto3.Session) -> None:
    ids = deploy_stack(aws)
    fsx = aws.client("fsx")
    fs = fsx.create_file_system(FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[ids["subnet"]])[
        "FileSystem"
    ]["FileSystemId"]
    group = aws.client("ec2").create_security_group(GroupName="fsx", Description="fsx", VpcId=ids["vpc"])[
        "GroupId"
    ]
    plan = TeardownPlan(
        stack=describe_stack(aws.client("cloudformation"), "gpufarm-poc"),
        retained=[
            RetainedResource(
                logical_id="ModelStoreFileSystem",
                type="AWS::FSx::FileSystem",
                policy="Retain",
                physical_id=fs,
            ),
            RetainedResource(
                logical_id="ModelStoreSecurityGroup",
                type="AWS::EC2::SecurityGroup",
                policy="Retain",
                physical_id=group,
            ),
            RetainedResource(
                logical_id="AccessLogs", type="AWS::S3::Bucket", policy="Retain", physical_id="logs"
            ),
        ],
    )
    said: list[str] = []
    release_retained(aws, REGION, plan, said.append, poll_seconds=0)
    assert fsx.describe_file_systems().get("FileSystems") == []
    groups = aws.client("ec2").describe_security_groups(Filters=[{"Name": "group-id", "Values": [group]}])
    assert groups["SecurityGroups"] == []
    assert said == [
        f"deleting FSx file system {fs} (ModelStoreFileSystem)",
        f"deleted FSx file system {fs}",
        f"deleted security group {group} (ModelStoreSecurityGroup)",
    ]


class DestroyRuns:
    """`cdk destroy` exit statuses in order, and what happened around them."""

    def __init__(self, *statuses: int, after: str | None = "DELETE_FAILED") -> None:
        self.statuses = list(statuses)
        self.after = after
        self.events: list[str] = []

    def run(self) -> int:
        self.events.append("destroy")
        return self.statuses.pop(0)

    def status_now(self) -> str | None:
        self.events.append("status")
        return self.after

    def release(self) -> None:
        self.events.append("release")


def _plan(*retained: RetainedResource) -> TeardownPlan:
    from gpufarm.aws.stack import StackInfo

    return TeardownPlan(
        stack=StackInfo(name="gpufarm-production", status="UPDATE_COMPLETE", reason=""),
        retained=list(retained),
    )


FILE_SYSTEM = RetainedResource(
    logical_id="ModelStoreFs", type="AWS::FSx::FileSystem", policy="Retain", physical_id="fs-1"
)


@pytest.mark.parametrize(
    ("runs", "retained", "status", "events"),
    [
        # The first destroy succeeds: nothing retained is touched.
        (DestroyRuns(0), [FILE_SYSTEM], 0, ["destroy"]),
        # It stops and the stack is DELETE_FAILED with a retained file system: release, destroy again.
        (DestroyRuns(1, 0), [FILE_SYSTEM], 0, ["destroy", "status", "release", "destroy"]),
        # It stops for another reason (the stack is not DELETE_FAILED): its failure stands.
        (DestroyRuns(1, after="UPDATE_ROLLBACK_COMPLETE"), [FILE_SYSTEM], 1, ["destroy", "status"]),
        # Nothing retained that could hold the VPC: no second attempt.
        (DestroyRuns(1), [], 1, ["destroy"]),
        # The second attempt fails too: its status is the answer.
        (DestroyRuns(1, 2), [FILE_SYSTEM], 2, ["destroy", "status", "release", "destroy"]),
    ],
)
def test_destroy_until_gone_releases_retained_resources_only_when_the_deletion_stopped(
    runs: DestroyRuns, retained: list[RetainedResource], status: int, events: list[str]
) -> None:
    said: list[str] = []
    result = destroy_until_gone(
        _plan(*retained),
        run_destroy=runs.run,
        status_now=runs.status_now,
        release=runs.release,
        say=said.append,
    )
    assert (result, runs.events) == (status, events)


def _self_signed(tmp_path: Path) -> tuple[Path, Path, str]:
    """A certificate for 127.0.0.1 and its key (cryptography comes with moto); returns the files and
    the certificate as base64 PEM, the form eks:DescribeCluster gives the cluster's CA in."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = certificate.public_bytes(serialization.Encoding.PEM)
    cert_file, key_file = tmp_path / "server.crt", tmp_path / "server.key"
    cert_file.write_bytes(pem)
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_file, key_file, base64.b64encode(pem).decode()


@pytest.fixture
def tls_api_server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The recorded API server over HTTPS; yields its URL and its certificate (base64 PEM)."""
    cert_file, key_file, ca = _self_signed(tmp_path)
    _ApiServer.requests = []
    server = HTTPServer(("127.0.0.1", 0), _ApiServer)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", ca
    finally:
        server.shutdown()
        server.server_close()


def test_api_server_reader_trusts_the_clusters_certificate_authority(tls_api_server: tuple[str, str]) -> None:
    url, ca = tls_api_server
    reader = ApiServerReader(endpoint=url, certificate_authority=ca, token="k8s-aws-v1.token")
    assert len(reader.list_nodes()) == len(kubectl("nodes"))


def test_api_server_reader_refuses_a_server_the_authority_did_not_sign(
    tls_api_server: tuple[str, str], tmp_path: Path
) -> None:
    url, _ = tls_api_server
    other = tmp_path / "other"
    other.mkdir()
    _, _, other_ca = _self_signed(other)  # a second, unrelated authority
    reader = ApiServerReader(endpoint=url, certificate_authority=other_ca, token="k8s-aws-v1.token")
    with pytest.raises(KubernetesReadError) as caught:
        reader.list_nodes()
    assert str(caught.value).startswith(f"cannot reach the API server at {url}: ")
    assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value)


@pytest.mark.parametrize("state", ["CREATING", "DELETING", "FAILED"])
def test_a_cluster_that_is_not_active_has_no_api_server_to_use(state: str) -> None:
    # moto creates clusters ACTIVE: a Stubber gives the other states DescribeCluster can answer.
    eks = boto3.client("eks", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(eks) as stub:
        stub.add_response(
            "describe_cluster",
            {
                "cluster": {
                    "name": "gpufarm-poc",
                    "status": state,
                    "arn": "arn:aws:eks:us-east-1:1:cluster/gpufarm-poc",
                }
            },
            {"name": "gpufarm-poc"},
        )
        with pytest.raises(ClusterNotReadyError) as caught:
            describe_cluster(eks, "gpufarm-poc")
    assert str(caught.value) == f"cluster gpufarm-poc is {state}, not ACTIVE"


def launch(session: boto3.Session, tags: dict[str, str]) -> str:
    """One instance with `tags` (moto's first Amazon image)."""
    ec2 = session.client("ec2")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    reply = ec2.run_instances(
        ImageId=image,
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ],
    )
    return str(reply["Instances"][0]["InstanceId"])


def test_leftover_instances_are_the_clusters_live_ones(aws: boto3.Session) -> None:
    ours = launch(aws, {"kubernetes.io/cluster/gpufarm-poc": "owned", "karpenter.sh/nodepool": "gpu-l40s"})
    gone = launch(aws, {"kubernetes.io/cluster/gpufarm-poc": "owned"})
    aws.client("ec2").terminate_instances(InstanceIds=[gone])
    launch(aws, {"kubernetes.io/cluster/other": "owned"})
    # Only the cluster's instance that still runs: a terminated one costs nothing, another
    # cluster's is not ours.
    assert leftover_instances(aws.client("ec2"), "gpufarm-poc") == [ours]


def test_read_status_of_an_ec2_tier_asks_for_no_cluster(aws: boto3.Session) -> None:
    deploy_stack(aws, name="gpufarm-ec2-poc")
    asked: list[str] = []

    def reader(name: str) -> RecordedCluster:
        asked.append(name)
        raise AssertionError("an ec2 tier has no cluster to read")

    report = read_status(load_preset("ec2-poc"), session=aws, kubernetes=reader)
    assert asked == [] and (report.pools, report.models) == (None, None)
    assert report.kubernetes_note == (
        "no cluster (cluster.provisioning: ec2): the target groups' health shows the GPU instances"
    )


def test_read_status_of_a_sagemaker_tier_asks_for_no_cluster(aws: boto3.Session) -> None:
    deploy_stack(aws, name="gpufarm-sagemaker-poc")
    asked: list[str] = []

    def reader(name: str) -> RecordedCluster:
        asked.append(name)
        raise AssertionError("a sagemaker tier has no cluster to read")

    report = read_status(load_preset("sagemaker-poc"), session=aws, kubernetes=reader)
    assert asked == [] and (report.pools, report.models) == (None, None)
    assert report.kubernetes_note == (
        "no cluster (cluster.provisioning: sagemaker): the models are inference components of "
        "the SageMaker endpoint gpufarm-sagemaker-poc"
    )
