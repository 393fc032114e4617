"""Where Amazon EKS publishes its own container images in each region.

EKS replicates the images of its add-ons to a private ECR registry in every region it supports,
and every EKS node may pull from the registry of its own region (the node role's
AmazonEC2ContainerRegistryReadOnly policy). Pulling from another region's registry crosses the
internet through NAT, which egress filtering blocks.

Sources: the EKS user guide, "Amazon container image registries"
(https://docs.aws.amazon.com/eks/latest/userguide/add-ons-images.html; its table as published
in awsdocs/amazon-eks-user-guide `doc_source/add-ons-images.md`) for every region below but
five; ap-east-2, ap-southeast-5, ap-southeast-6, ap-southeast-7 and mx-central-1 come from
awslabs/amazon-eks-ami@28af74fd `templates/al2/runtime/get-ecr-uri.sh`, the registry table the
EKS AMIs use (which cites the same page). A region in neither is refused rather than guessed:
opt-in regions have registry accounts of their own.
"""

from __future__ import annotations

from typing import Final

EKS_REGISTRY_ACCOUNTS: Final[dict[str, str]] = {
    "af-south-1": "877085696533",
    "ap-east-1": "800184023465",
    "ap-east-2": "533267051163",
    "ap-northeast-1": "602401143452",
    "ap-northeast-2": "602401143452",
    "ap-northeast-3": "602401143452",
    "ap-south-1": "602401143452",
    "ap-south-2": "900889452093",
    "ap-southeast-1": "602401143452",
    "ap-southeast-2": "602401143452",
    "ap-southeast-3": "296578399912",
    "ap-southeast-4": "491585149902",
    "ap-southeast-5": "151610086707",
    "ap-southeast-6": "333609536671",
    "ap-southeast-7": "121268973566",
    "ca-central-1": "602401143452",
    "ca-west-1": "761377655185",
    "cn-north-1": "918309763551",
    "cn-northwest-1": "961992271922",
    "eu-central-1": "602401143452",
    "eu-central-2": "900612956339",
    "eu-north-1": "602401143452",
    "eu-south-1": "590381155156",
    "eu-south-2": "455263428931",
    "eu-west-1": "602401143452",
    "eu-west-2": "602401143452",
    "eu-west-3": "602401143452",
    "il-central-1": "066635153087",
    "me-central-1": "759879836304",
    "me-south-1": "558608220178",
    "mx-central-1": "730335286997",
    "sa-east-1": "602401143452",
    "us-east-1": "602401143452",
    "us-east-2": "602401143452",
    "us-gov-east-1": "151742754352",
    "us-gov-west-1": "013241004608",
    "us-west-1": "602401143452",
    "us-west-2": "602401143452",
}
"""The account of the EKS image registry in each region."""


def eks_registry(region: str) -> str:
    """The EKS image registry of `region`: '<account>.dkr.ecr.<region>.amazonaws.com' ('.com.cn' in China).

    Raises ValueError for a region gpufarm has no confirmed registry account for.
    """
    account = EKS_REGISTRY_ACCOUNTS.get(region)
    if account is None:
        raise ValueError(
            f"'region' must be one with a known Amazon EKS image registry ({len(EKS_REGISTRY_ACCOUNTS)} "
            f"regions, see gpufarm/core/registries.py), got {region!r}"
        )
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{suffix}"
