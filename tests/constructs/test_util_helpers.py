"""The jsii round-trip savers in gpufarm.constructs._util: values read once and reused."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2

from gpufarm.constructs._util import private_subnets, pseudo_parameters
from tests.constructs.helpers import AZS, logical_id, new_stack, new_vpc


def test_pseudo_parameters_resolve_to_the_pseudo_parameter_refs_in_every_app() -> None:
    for name in ("First", "Second"):
        stack = new_stack(name)
        assert stack.resolve(list(pseudo_parameters())) == [
            {"Ref": "AWS::Partition"},
            {"Ref": "AWS::Region"},
            {"Ref": "AWS::AccountId"},
        ]


def test_pseudo_parameters_are_the_aws_tokens() -> None:
    assert pseudo_parameters() == (cdk.Aws.PARTITION, cdk.Aws.REGION, cdk.Aws.ACCOUNT_ID)


def _ids(subnets: list[ec2.ISubnet]) -> list[str]:
    return [logical_id(s) for s in subnets]


def test_private_subnets_are_the_nat_routed_ones_each_time() -> None:
    vpc = new_vpc(new_stack())
    expected = _ids(list(vpc.private_subnets))
    assert len(expected) == len(AZS)
    first = private_subnets(vpc)
    first.clear()  # the caller's list: emptying it leaves the next answer whole
    assert _ids(private_subnets(vpc)) == expected


def test_private_subnets_of_a_vpc_without_nat_are_the_isolated_ones() -> None:
    stack = new_stack()
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=AZS, nat_gateways=0)
    assert _ids(private_subnets(vpc)) == _ids(list(vpc.isolated_subnets))
    assert len(private_subnets(vpc)) == len(AZS)


def test_private_subnets_are_kept_per_vpc() -> None:
    stack = new_stack()
    routed = new_vpc(stack)
    isolated = ec2.Vpc(stack, "Isolated", availability_zones=AZS, nat_gateways=0)
    assert _ids(private_subnets(routed)) == _ids(list(routed.private_subnets))
    assert _ids(private_subnets(isolated)) == _ids(list(isolated.isolated_subnets))
    assert set(_ids(private_subnets(routed))).isdisjoint(_ids(private_subnets(isolated)))
