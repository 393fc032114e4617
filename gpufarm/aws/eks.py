"""An EKS cluster as a Kubernetes client reaches it: endpoint, certificate, token, kubeconfig entry.

The kubeconfig entry is the one `aws eks update-kubeconfig` writes (aws-cli
``awscli/customizations/eks/update_kubeconfig.py``: cluster and user named by the cluster's ARN,
the user an ``exec`` of ``aws --region <region> eks get-token --cluster-name <name>``), the form
the EKS user guide recommends ("Connect kubectl to an EKS cluster by creating a kubeconfig file":
"Amazon EKS uses the aws eks get-token command with kubectl for cluster authentication").
:func:`eks_token` builds the same token that command prints, for gpufarm's own reads.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

EXEC_API_VERSION = "client.authentication.k8s.io/v1beta1"
"""The exec credential API the entry names; aws-cli's get-token answers v1beta1 and v1, and falls
back to v1beta1 (aws-cli ``awscli/customizations/eks/get_token.py``, BETA_API)."""

TOKEN_PREFIX = "k8s-aws-v1."
K8S_AWS_ID_HEADER = "x-k8s-aws-id"
PRESIGNED_URL_SECONDS = 60
"""As aws-cli's get_token.py: TOKEN_PREFIX, K8S_AWS_ID_HEADER and URL_TIMEOUT (60 s)."""


class ClusterNotReadyError(Exception):
    """The cluster exists but is neither ACTIVE nor UPDATING (no API server to talk to)."""


@dataclass(frozen=True, kw_only=True)
class ClusterAccess:
    """What a client needs to reach the cluster's API server (eks:DescribeCluster)."""

    name: str
    arn: str
    endpoint: str
    certificate_authority: str
    """Base64 PEM, as DescribeCluster gives it and kubeconfig's `certificate-authority-data` takes it."""
    status: str

    @property
    def region(self) -> str:
        """The region, from the ARN (`arn:aws:eks:<region>:<account>:cluster/<name>`)."""
        return self.arn.split(":")[3]


def describe_cluster(eks: Any, name: str) -> ClusterAccess:
    """The cluster `name`; raises :class:`ClusterNotReadyError` unless it is ACTIVE or UPDATING.

    aws-cli's update-kubeconfig refuses other states the same way ("Cluster status is ...").
    """
    cluster = eks.describe_cluster(name=name)["cluster"]
    status = str(cluster.get("status", ""))
    if status not in {"ACTIVE", "UPDATING"}:
        raise ClusterNotReadyError(f"cluster {name} is {status or 'in no known state'}, not ACTIVE")
    return ClusterAccess(
        name=name,
        arn=str(cluster["arn"]),
        endpoint=str(cluster["endpoint"]),
        certificate_authority=str(cluster.get("certificateAuthority", {}).get("data", "")),
        status=status,
    )


def kubeconfig_entry(cluster: ClusterAccess, *, profile: str | None = None) -> dict[str, Any]:
    """A kubeconfig document holding only `cluster`: its cluster, user and context, all named by the ARN.

    With `profile` (the session's named profile), the user's exec sets ``AWS_PROFILE`` as
    update-kubeconfig does, so kubectl signs with the same identity.
    """
    exec_spec: dict[str, Any] = {
        "apiVersion": EXEC_API_VERSION,
        "args": ["--region", cluster.region, "eks", "get-token", "--cluster-name", cluster.name],
        "command": "aws",
    }
    if profile:
        exec_spec["env"] = [{"name": "AWS_PROFILE", "value": profile}]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "cluster": {
                    "certificate-authority-data": cluster.certificate_authority,
                    "server": cluster.endpoint,
                },
                "name": cluster.arn,
            }
        ],
        "users": [{"name": cluster.arn, "user": {"exec": exec_spec}}],
        "contexts": [{"context": {"cluster": cluster.arn, "user": cluster.arn}, "name": cluster.arn}],
        "current-context": cluster.arn,
        "preferences": {},
    }


def merge_kubeconfig(existing: dict[str, Any] | None, entry: dict[str, Any]) -> dict[str, Any]:
    """`existing` with `entry`'s cluster, user and context added, replacing those of the same name,
    and its current-context set to the entry's (as update-kubeconfig does). Other entries stay."""
    merged: dict[str, Any] = dict(existing or {})
    merged.setdefault("apiVersion", "v1")
    merged.setdefault("kind", "Config")
    merged.setdefault("preferences", {})
    for key in ("clusters", "users", "contexts"):
        new = entry[key]
        names = {item["name"] for item in new}
        kept = [item for item in merged.get(key) or [] if item.get("name") not in names]
        merged[key] = [*kept, *new]
    merged["current-context"] = entry["current-context"]
    return merged


def eks_token(session: Any, cluster_name: str) -> str:
    """A bearer token for the cluster's API server, as `aws eks get-token` makes it.

    A presigned STS GetCallerIdentity URL (valid 60 s) whose signature covers the header
    ``x-k8s-aws-id: <cluster name>``, base64url-encoded without padding and prefixed
    ``k8s-aws-v1.`` (aws-cli ``awscli/customizations/eks/get_token.py``, TokenGenerator and
    STSClientFactory).
    """
    sts = session.client("sts")

    def keep_id(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if K8S_AWS_ID_HEADER in params:
            context[K8S_AWS_ID_HEADER] = params.pop(K8S_AWS_ID_HEADER)

    def add_header(request: Any, **_: Any) -> None:
        if K8S_AWS_ID_HEADER in request.context:
            request.headers[K8S_AWS_ID_HEADER] = request.context[K8S_AWS_ID_HEADER]

    sts.meta.events.register("provide-client-params.sts.GetCallerIdentity", keep_id)
    sts.meta.events.register("before-sign.sts.GetCallerIdentity", add_header)
    url = sts.generate_presigned_url(
        "get_caller_identity",
        Params={K8S_AWS_ID_HEADER: cluster_name},
        ExpiresIn=PRESIGNED_URL_SECONDS,
        HttpMethod="GET",
    )
    return TOKEN_PREFIX + base64.urlsafe_b64encode(str(url).encode()).decode().rstrip("=")
