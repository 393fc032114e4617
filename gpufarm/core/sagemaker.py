"""SageMaker hosting: the dated facts gpufarm serves on, and the endpoint plan of a `sagemaker` tier.

One answer, read by the construct (`gpufarm/constructs/sagemaker_endpoint.py`), the gateway's
routes (`gpufarm/k8s/gateway.py`), the config checks, cost, preflight and review: the endpoint's
name, one inference component per model with its copies, GPUs, memory and Large Model Inference
(LMI) environment, and the facts of `gpufarm/data/sagemaker.yaml` (hosting instance types,
endpoint quotas, LMI images), each with its source there. Hosting prices are in the price
table (`gpufarm/data/prices.yaml`, section `sagemaker`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, Final

import yaml

from gpufarm.core.s3 import split_s3_uri

if TYPE_CHECKING:
    from gpufarm.config.model import ModelConfig, TierConfig

DATA_FILE: Final = "sagemaker.yaml"

VARIANT_NAME: Final = "AllTraffic"
"""The endpoint's one production variant: its inference components name it (`VariantName`)."""

SCALABLE_DIMENSION: Final = "sagemaker:inference-component:DesiredCopyCount"
"""Application Auto Scaling's dimension of an inference component's copies (botocore 1.44.8,
application-autoscaling `ScalableDimension` enum)."""

CONCURRENCY_METRIC: Final = "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
"""The predefined target-tracking metric of concurrent requests per copy (botocore 1.44.8,
application-autoscaling `MetricType` enum; the CloudWatch metric `ConcurrentRequestsPerCopy`,
https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-add-code-define.html)."""

NO_CAPACITY_METRIC: Final = "NoCapacityInvocationFailures"
"""The `AWS/SageMaker` metric SageMaker emits when an inference component with no copy is invoked;
the alarm on it starts the step policy that brings a scaled-to-zero component back (target
tracking cannot leave zero copies):
https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html."""

MAX_NAME_LENGTH: Final = 63
"""SageMaker's limit on endpoint, endpoint-config, model and inference component names (botocore
1.44.8 `EndpointName`, `InferenceComponentName`: max 63, pattern `[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`)."""

LMI_ENGINES: Final = ("vllm", "trtllm")
"""The engines the LMI containers run (`option.rolling_batch` `vllm`, and `trtllm` in the
TensorRT-LLM container): djl-serving serving/docs/lmi/deployment_guide/configurations.md."""


@functools.cache
def _data() -> dict[str, Any]:
    text = resources.files("gpufarm.data").joinpath(DATA_FILE).read_text(encoding="utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def hosting_instance_types() -> frozenset[str]:
    """Every `ml.*` instance type a SageMaker real-time endpoint may run on."""
    return frozenset(_data()["hosting_instance_types"]["types"])


def ec2_instance_type(ml_type: str) -> str:
    """The EC2 instance type under a SageMaker one: 'ml.g6e.xlarge' -> 'g6e.xlarge'."""
    return ml_type.removeprefix("ml.")


def endpoint_quota_name(ml_type: str) -> str:
    """The Service Quotas name of an instance type's endpoint quota: '<type> for endpoint usage'."""
    return str(_data()["endpoint_quotas"]["name_format"]).format(instance_type=ml_type)


def endpoint_quota_code(ml_type: str) -> str | None:
    """The Service Quotas code of an instance type's endpoint quota, or None where none was published."""
    code = _data()["endpoint_quotas"]["codes"].get(ml_type)
    return None if code is None else str(code)


def lmi_tag(engine: str) -> str:
    """The pinned LMI image tag of an engine ('vllm' or 'trtllm')."""
    return str(_data()["lmi"]["tags"][engine])


def lmi_registry(region: str) -> str | None:
    """The account that publishes the LMI images in `region`, or None where SageMaker publishes none."""
    account = _data()["lmi"]["registries"].get(region)
    return None if account is None else str(account)


def lmi_regions() -> list[str]:
    """The regions the LMI images are published in, sorted."""
    return sorted(_data()["lmi"]["registries"])


def dns_suffix(region: str) -> str:
    """The DNS suffix of a region's endpoints ('amazonaws.com', 'amazonaws.com.cn' in China)."""
    return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"


def lmi_repository(region: str) -> str:
    """The LMI images' ECR repository URI in `region`; KeyError where none is published."""
    account = lmi_registry(region)
    if account is None:
        raise KeyError(region)
    return f"{account}.dkr.ecr.{region}.{dns_suffix(region)}/{_data()['lmi']['repository']}"


def lmi_image(engine: str, region: str, digest: str | None = None) -> str:
    """The LMI image of `engine` in `region`: '<repository>:<tag>', or '<repository>@<digest>'
    with a digest."""
    repository = lmi_repository(region)
    return f"{repository}@{digest}" if digest else f"{repository}:{lmi_tag(engine)}"


def lmi_repository_name() -> str:
    """The LMI images' repository name ('djl-inference')."""
    return str(_data()["lmi"]["repository"])


def endpoint_name(tier: TierConfig) -> str:
    """The tier's endpoint: 'gpufarm-<tier>' (a tier name is a DNS label of at most 40 characters)."""
    return tier.stack_name


def inference_component_name(tier: TierConfig, model: ModelConfig) -> str:
    """A model's inference component: '<tier>-<model>' (the config checks it fits 63 characters)."""
    return f"{tier.name}-{model.name}"


def lmi_environment(model: ModelConfig) -> dict[str, str]:
    """The LMI container's environment for one model.

    `HF_MODEL_ID` is the Hugging Face repo id or the `s3://` prefix of the weights
    (`option.model_id`, "the HuggingFace Hub Model Id, or the S3 URI object prefix"),
    `OPTION_ROLLING_BATCH` the engine, `OPTION_TENSOR_PARALLEL_DEGREE` the copy's GPUs: djl-serving
    serving/docs/lmi/deployment_guide/configurations.md, where each `option.<key>` is the
    environment variable `OPTION_<KEY>`. vLLM's engine arguments pass through the same way
    (serving/docs/lmi/user_guides/vllm_user_guide.md, "Pass-Through configurations"):
    `OPTION_MAX_MODEL_LEN` and `OPTION_GPU_MEMORY_UTILIZATION`; `OPTION_MAX_ROLLING_BATCH_SIZE`
    ("the maximum number of requests/sequences the model can process at a time") from
    `max_num_seqs`. `OPTION_REVISION` pins a Hub model's revision.
    """
    env = {
        "HF_MODEL_ID": model.weights,
        "OPTION_ROLLING_BATCH": model.engine.value,
        "OPTION_TENSOR_PARALLEL_DEGREE": str(model.gpus),
    }
    if model.revision is not None:
        env["OPTION_REVISION"] = model.revision
    if model.engine.value == "vllm":
        env["OPTION_MAX_MODEL_LEN"] = str(model.max_model_len)
        env["OPTION_GPU_MEMORY_UTILIZATION"] = f"{model.gpu_memory_utilization:g}"
    if model.max_num_seqs is not None:
        env["OPTION_MAX_ROLLING_BATCH_SIZE"] = str(model.max_num_seqs)
    return env


@dataclass(frozen=True, kw_only=True)
class Component:
    """One model as an inference component of the tier's endpoint."""

    model: str
    """The model's name."""
    name: str
    """The inference component's name (:func:`inference_component_name`)."""
    engine: str
    """'vllm' or 'trtllm': which LMI image the component runs."""
    gpus: int
    """`NumberOfAcceleratorDevicesRequired` of each copy."""
    memory_mib: int
    """`MinMemoryRequiredInMb` of each copy."""
    copies: int
    """Copies at deploy (`RuntimeConfig.CopyCount`)."""
    min_copies: int
    """Fewest copies Application Auto Scaling keeps (0: scale to zero)."""
    max_copies: int
    """Most copies Application Auto Scaling may run."""
    environment: dict[str, str] = field(default_factory=dict)
    """The LMI container's environment (:func:`lmi_environment`)."""
    weights_s3: tuple[str, str] | None = None
    """`(bucket, key prefix)` of `s3://` weights; None for Hugging Face weights."""

    @property
    def scales_to_zero(self) -> bool:
        """Whether the component may scale in to zero copies."""
        return self.min_copies == 0


def component_of(tier: TierConfig, model: ModelConfig) -> Component:
    """The inference component that serves `model` on the tier's endpoint."""
    scaling = next((s for s in tier.sagemaker.scaling if s.model == model.name), None)
    min_copies = scaling.min_copies if scaling is not None else model.replicas
    max_copies = scaling.max_copies if scaling is not None else max(model.replicas, 1)
    return Component(
        model=model.name,
        name=inference_component_name(tier, model),
        engine=model.engine.value,
        gpus=model.gpus,
        memory_mib=model.memory_gib * 1024,
        copies=model.replicas,
        min_copies=min_copies,
        max_copies=max_copies,
        environment=lmi_environment(model),
        weights_s3=split_s3_uri(model.weights) if model.is_s3 else None,
    )


def components_of(tier: TierConfig) -> list[Component]:
    """Every model's inference component, in config order."""
    return [component_of(tier, model) for model in tier.models]
