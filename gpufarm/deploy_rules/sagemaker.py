"""Amazon SageMaker: what CreateEndpoint, CreateEndpointConfig and CreateInferenceComponent refuse."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_str, ref_target
from gpufarm.deploy_rules.shapes import each, name_rule, resource

MODEL = "AWS::SageMaker::Model"
ENDPOINT = "AWS::SageMaker::Endpoint"
ENDPOINT_CONFIG = "AWS::SageMaker::EndpointConfig"
INFERENCE_COMPONENT = "AWS::SageMaker::InferenceComponent"

_API = "https://docs.aws.amazon.com/sagemaker/latest/APIReference/"
_CREATE_MODEL = f"{_API}API_CreateModel.html"
_CREATE_ENDPOINT = f"{_API}API_CreateEndpoint.html"
_CREATE_ENDPOINT_CONFIG = f"{_API}API_CreateEndpointConfig.html"
_CREATE_INFERENCE_COMPONENT = f"{_API}API_CreateInferenceComponent.html"

MAX_NAME = 63

LOCAL_STORAGE_FAMILIES = ("ml.g4dn.", "ml.g5.", "ml.p4d.")
"""Instance families SageMaker documents as carrying NVMe instance storage ("ML instance families
with the NVMe-type instance storage include ml.p4d, ml.g4dn, and ml.g5", SageMaker API,
ResourceConfig `VolumeSizeInGB`); CreateEndpointConfig refuses `KmsKeyId` with them."""

_VARIANT = {"VariantName": "AllTraffic", "InstanceType": "ml.g6e.xlarge", "InitialInstanceCount": 1}


def _kms_with_local_storage(res: Resource, _: Template) -> Iterator[str]:
    # CreateEndpointConfig, KmsKeyId: "You can't request a KmsKeyId when using an instance type
    # with local storage. If any of the models that you specify in the ProductionVariants parameter
    # use nitro-based instances with local storage, do not specify a value for the KmsKeyId
    # parameter ... the call to CreateEndpointConfig fails."
    if res.prop("KmsKeyId") is None:
        return
    for variant in each(res.prop("ProductionVariants")):
        instance_type = literal_str(variant.get("InstanceType")) or ""
        if instance_type.startswith(LOCAL_STORAGE_FAMILIES):
            yield (
                f"KmsKeyId is set while variant {variant.get('VariantName')!r} runs {instance_type}, "
                "an instance type with NVMe instance storage; leave KmsKeyId out"
            )


def _variant_exists(res: Resource, template: Template) -> Iterator[str]:
    # CreateInferenceComponent, VariantName: "The name of an existing production variant where you
    # host the inference component." The endpoint's config must have a variant of that name.
    wanted = literal_str(res.prop("VariantName"))
    endpoint = template.get(ref_target(res.prop("EndpointName")))
    if wanted is None or endpoint is None or endpoint.type != ENDPOINT:
        return
    config = template.get(ref_target(endpoint.prop("EndpointConfigName")))
    if config is None or config.type != ENDPOINT_CONFIG:
        return
    names = [literal_str(v.get("VariantName")) for v in each(config.prop("ProductionVariants"))]
    if wanted not in names:
        yield f"VariantName {wanted!r} names no production variant of the endpoint's config ({names})"


def _endpoint_stack(variant_name: str) -> dict[str, Any]:
    return {
        "C": resource(ENDPOINT_CONFIG, ProductionVariants=[_VARIANT]),
        "E": resource(ENDPOINT, EndpointConfigName={"Fn::GetAtt": ["C", "EndpointConfigName"]}),
        "I": resource(
            INFERENCE_COMPONENT,
            EndpointName={"Fn::GetAtt": ["E", "EndpointName"]},
            VariantName=variant_name,
            Specification={"ModelName": "m"},
        ),
    }


RULES: tuple[Rule, ...] = (
    # CreateModel, ModelName: "Maximum length of 63. Pattern: ^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$"
    # (botocore 1.44.8 `ModelName`).
    name_rule(
        id="SM-MODEL-NAME",
        resource_type=MODEL,
        prop="ModelName",
        pattern=r"[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?",
        max_length=MAX_NAME,
        allowed="letters, digits and '-', starting and ending with a letter or digit",
        doc_url=_CREATE_MODEL,
        bad="qwen3_8b",
        good="qwen3-8b",
        ExecutionRoleArn="arn:aws:iam::123456789012:role/sagemaker",
    ),
    # CreateEndpoint, EndpointName: "Length Constraints: Maximum length of 63. Pattern:
    # ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}" (the same in the botocore 1.44.8 service model).
    name_rule(
        id="SM-ENDPOINT-NAME",
        resource_type=ENDPOINT,
        prop="EndpointName",
        pattern=r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}",
        max_length=MAX_NAME,
        allowed="letters, digits and '-', starting and ending with a letter or digit",
        doc_url=_CREATE_ENDPOINT,
        bad="gpufarm_poc",
        good="gpufarm-poc",
        EndpointConfigName="c",
    ),
    # CreateInferenceComponent, InferenceComponentName: "Maximum length of 63. Pattern:
    # ^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$".
    name_rule(
        id="SM-INFERENCE-COMPONENT-NAME",
        resource_type=INFERENCE_COMPONENT,
        prop="InferenceComponentName",
        pattern=r"[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?",
        max_length=MAX_NAME,
        allowed="letters, digits and '-', starting and ending with a letter or digit",
        doc_url=_CREATE_INFERENCE_COMPONENT,
        bad="poc-qwen3-8b-",
        good="poc-qwen3-8b",
        EndpointName="e",
        Specification={"ModelName": "m"},
    ),
    Rule(
        id="SM-KMS-LOCAL-STORAGE",
        resource_type=ENDPOINT_CONFIG,
        title="No KmsKeyId on an endpoint config whose instances have NVMe instance storage",
        doc_url=_CREATE_ENDPOINT_CONFIG,
        check=_kms_with_local_storage,
        bad={
            "C": resource(
                ENDPOINT_CONFIG,
                KmsKeyId="alias/gpufarm",
                ProductionVariants=[{**_VARIANT, "InstanceType": "ml.g5.xlarge"}],
            )
        },
        good={
            "C": resource(ENDPOINT_CONFIG, ProductionVariants=[{**_VARIANT, "InstanceType": "ml.g5.xlarge"}])
        },
    ),
    Rule(
        id="SM-INFERENCE-COMPONENT-VARIANT",
        resource_type=INFERENCE_COMPONENT,
        title="An inference component names a production variant of its endpoint",
        doc_url=_CREATE_INFERENCE_COMPONENT,
        check=_variant_exists,
        bad=_endpoint_stack("Primary"),
        good=_endpoint_stack("AllTraffic"),
    ),
)
