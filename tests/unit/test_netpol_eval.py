"""The NetworkPolicy evaluator against the examples of the Kubernetes documentation.

Every policy below is an example of https://kubernetes.io/docs/concepts/services-networking/network-policies/
(kubernetes/website `content/en/docs/concepts/services-networking/network-policies.md`), with
the behaviour the page states for it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.netpol import Endpoint, allowed, is_isolated, port_matches, selects

# "The NetworkPolicy resource" example.
TEST_NETWORK_POLICY: dict[str, Any] = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {"name": "test-network-policy", "namespace": "default"},
    "spec": {
        "podSelector": {"matchLabels": {"role": "db"}},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [
            {
                "from": [
                    {"ipBlock": {"cidr": "172.17.0.0/16", "except": ["172.17.1.0/24"]}},
                    {"namespaceSelector": {"matchLabels": {"project": "myproject"}}},
                    {"podSelector": {"matchLabels": {"role": "frontend"}}},
                ],
                "ports": [{"protocol": "TCP", "port": 6379}],
            }
        ],
        "egress": [
            {"to": [{"ipBlock": {"cidr": "10.0.0.0/24"}}], "ports": [{"protocol": "TCP", "port": 5978}]}
        ],
    },
}

DB = Endpoint(ip="192.168.5.10", namespace="default", labels={"role": "db"})
FRONTEND = Endpoint(ip="192.168.5.11", namespace="default", labels={"role": "frontend"})
OTHER = Endpoint(ip="192.168.5.12", namespace="default", labels={"role": "other"})
MYPROJECT_POD = Endpoint(
    ip="192.168.6.1", namespace="team", labels={"app": "x"}, namespace_labels={"project": "myproject"}
)


def _policy(spec: dict[str, Any], name: str = "p", namespace: str = "default") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


@pytest.mark.parametrize(
    ("source", "port", "expected"),
    [
        # "connections from any pod in the default namespace with the label role=frontend"
        (FRONTEND, 6379, True),
        # "any pod in a namespace with the label project=myproject"
        (MYPROJECT_POD, 6379, True),
        # "IP addresses in the ranges 172.17.0.0-172.17.0.255 and 172.17.2.0-172.17.255.255"
        (Endpoint(ip="172.17.0.9"), 6379, True),
        (Endpoint(ip="172.17.2.1"), 6379, True),
        (Endpoint(ip="172.17.1.9"), 6379, False),  # in `except`
        (Endpoint(ip="10.9.9.9"), 6379, False),
        (FRONTEND, 6380, False),  # only TCP 6379
        (OTHER, 6379, False),
    ],
)
def test_upstream_example_ingress(source: Endpoint, port: int, expected: bool) -> None:
    assert allowed([TEST_NETWORK_POLICY], source, DB, port) is expected


def test_upstream_example_ingress_is_tcp_only() -> None:
    assert not allowed([TEST_NETWORK_POLICY], FRONTEND, DB, 6379, "UDP")


@pytest.mark.parametrize(
    ("ip", "port", "expected"),
    # "connections from any pod in the default namespace with the label role=db to CIDR
    # 10.0.0.0/24 on TCP port 5978"
    [("10.0.0.7", 5978, True), ("10.0.0.7", 5979, False), ("10.0.1.7", 5978, False)],
)
def test_upstream_example_egress(ip: str, port: int, expected: bool) -> None:
    assert allowed([TEST_NETWORK_POLICY], DB, Endpoint(ip=ip), port) is expected


def test_egress_of_the_db_pod_to_a_pod_needs_both_sides() -> None:
    # The frontend pod is not isolated, but the db pod's egress allows only 10.0.0.0/24:5978.
    assert not allowed([TEST_NETWORK_POLICY], DB, FRONTEND, 80)
    # And a non-isolated pod may reach anything that does not isolate itself.
    assert allowed([TEST_NETWORK_POLICY], FRONTEND, OTHER, 80)


# "Behavior of to and from selectors": one peer with both selectors vs two peers.
AND_PEER = _policy(
    {
        "podSelector": {},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [
                    {
                        "namespaceSelector": {"matchLabels": {"user": "alice"}},
                        "podSelector": {"matchLabels": {"role": "client"}},
                    }
                ]
            }
        ],
    }
)
OR_PEERS = _policy(
    {
        "podSelector": {},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [
                    {"namespaceSelector": {"matchLabels": {"user": "alice"}}},
                    {"podSelector": {"matchLabels": {"role": "client"}}},
                ]
            }
        ],
    }
)
ALICE_CLIENT = Endpoint(
    ip="10.1.0.1", namespace="a", labels={"role": "client"}, namespace_labels={"user": "alice"}
)
ALICE_OTHER = Endpoint(
    ip="10.1.0.2", namespace="a", labels={"role": "web"}, namespace_labels={"user": "alice"}
)
LOCAL_CLIENT = Endpoint(ip="10.1.0.3", namespace="default", labels={"role": "client"})
TARGET = Endpoint(ip="10.1.0.9", namespace="default", labels={"app": "t"})


@pytest.mark.parametrize(
    ("policy", "source", "expected"),
    [
        # "allows connections from Pods with the label role=client in namespaces with the label user=alice"
        (AND_PEER, ALICE_CLIENT, True),
        (AND_PEER, ALICE_OTHER, False),
        (AND_PEER, LOCAL_CLIENT, False),
        # "allows connections from Pods in the local Namespace with the label role=client, or from
        # any Pod in any namespace with the label user=alice"
        (OR_PEERS, ALICE_CLIENT, True),
        (OR_PEERS, ALICE_OTHER, True),
        (OR_PEERS, LOCAL_CLIENT, True),
    ],
)
def test_one_peer_with_both_selectors_is_an_and(
    policy: dict[str, Any], source: Endpoint, expected: bool
) -> None:
    assert allowed([policy], source, TARGET, 80) is expected


# "Default policies".
DENY_INGRESS = _policy({"podSelector": {}, "policyTypes": ["Ingress"]}, "default-deny-ingress")
ALLOW_ALL_INGRESS = _policy(
    {"podSelector": {}, "ingress": [{}], "policyTypes": ["Ingress"]}, "allow-all-ingress"
)
DENY_EGRESS = _policy({"podSelector": {}, "policyTypes": ["Egress"]}, "default-deny-egress")
ALLOW_ALL_EGRESS = _policy({"podSelector": {}, "egress": [{}], "policyTypes": ["Egress"]}, "allow-all-egress")
DENY_ALL = _policy({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}, "default-deny-all")


def test_default_deny_ingress_isolates_ingress_only() -> None:
    assert not allowed([DENY_INGRESS], LOCAL_CLIENT, TARGET, 80)
    # "ensures that even pods that aren't selected by any other NetworkPolicy will not be allowed
    # ingress"; egress is not isolated: a pod may still reach outside.
    assert allowed([DENY_INGRESS], TARGET, Endpoint(ip="8.8.8.8"), 53, "UDP")


def test_allow_all_ingress_wins_over_default_deny() -> None:
    # Policies are additive: the union of what they allow.
    assert allowed([DENY_INGRESS, ALLOW_ALL_INGRESS], LOCAL_CLIENT, TARGET, 80)


def test_default_deny_egress() -> None:
    assert not allowed([DENY_EGRESS], TARGET, Endpoint(ip="8.8.8.8"), 53, "UDP")
    assert allowed([DENY_EGRESS, ALLOW_ALL_EGRESS], TARGET, Endpoint(ip="8.8.8.8"), 53, "UDP")


def test_default_deny_all_blocks_both_directions() -> None:
    assert not allowed([DENY_ALL], LOCAL_CLIENT, TARGET, 80)
    assert not allowed([DENY_ALL], TARGET, Endpoint(ip="8.8.8.8"), 443)
    # A pod in another namespace is not selected by the namespace's policies.
    assert allowed([DENY_ALL], ALICE_CLIENT, Endpoint(ip="8.8.8.8"), 443)


def test_policy_types_default_to_ingress_and_egress_when_egress_rules_exist() -> None:
    ingress_only = _policy({"podSelector": {}, "ingress": [{}]})
    with_egress = _policy({"podSelector": {}, "egress": [{"ports": [{"port": 53, "protocol": "UDP"}]}]})
    assert is_isolated([ingress_only], TARGET, "Ingress")
    assert not is_isolated([ingress_only], TARGET, "Egress")
    assert is_isolated([with_egress], TARGET, "Ingress")
    assert is_isolated([with_egress], TARGET, "Egress")


# "Targeting a range of ports".
MULTI_PORT_EGRESS = _policy(
    {
        "podSelector": {"matchLabels": {"role": "db"}},
        "policyTypes": ["Egress"],
        "egress": [
            {
                "to": [{"ipBlock": {"cidr": "10.0.0.0/24"}}],
                "ports": [{"protocol": "TCP", "port": 32000, "endPort": 32768}],
            }
        ],
    },
    "multi-port-egress",
)


@pytest.mark.parametrize(
    ("port", "expected"), [(31999, False), (32000, True), (32500, True), (32768, True), (32769, False)]
)
def test_end_port_range_is_inclusive(port: int, expected: bool) -> None:
    assert allowed([MULTI_PORT_EGRESS], DB, Endpoint(ip="10.0.0.3"), port) is expected


def test_namespace_selected_by_its_automatic_name_label() -> None:
    # "Targeting a Namespace by its name": kubernetes.io/metadata.name.
    policy = _policy(
        {
            "podSelector": {},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "frontend"}}}
                    ]
                }
            ],
        }
    )
    assert allowed([policy], Endpoint(ip="10.2.0.1", namespace="frontend"), TARGET, 80)
    assert not allowed([policy], Endpoint(ip="10.2.0.2", namespace="backend"), TARGET, 80)


def test_named_port_is_looked_up_on_the_destination() -> None:
    entries = [{"protocol": "TCP", "port": "http"}]
    assert port_matches(entries, 8000, "TCP", Endpoint(ip="10.0.0.1", namespace="n", ports={"http": 8000}))
    assert not port_matches(
        entries, 8001, "TCP", Endpoint(ip="10.0.0.1", namespace="n", ports={"http": 8000})
    )


def test_port_without_number_admits_every_port_of_its_protocol() -> None:
    entries = [{"protocol": "UDP"}]
    assert port_matches(entries, 53, "UDP", TARGET)
    assert not port_matches(entries, 53, "TCP", TARGET)


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
            {"tier": "a"},
            True,
        ),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}, {"tier": "c"}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {"tier": "a"}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"tier": ""}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"tier": "x"}, False),
        ({}, {"anything": "x"}, True),
    ],
)
def test_label_selectors(selector: dict[str, Any], labels: dict[str, str], expected: bool) -> None:
    assert selects(selector, labels) is expected


def test_a_policy_of_another_namespace_does_not_select() -> None:
    policy = _policy({"podSelector": {}, "policyTypes": ["Ingress"]}, namespace="elsewhere")
    assert allowed([policy], LOCAL_CLIENT, TARGET, 80)
