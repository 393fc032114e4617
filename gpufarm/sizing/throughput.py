"""The throughput assumptions `gpufarm plan` sizes replicas with: a sourced, dated data table.

The table (`gpufarm/data/throughput.yaml`, replaceable with ``--throughput-table``) holds:

- ``gpus``: each GPU's memory bandwidth, with its source;
- ``anchors``: measured serving benchmarks (GPU, model, precision, GPUs per replica,
  concurrency, workload, output tokens/s, the serving engine), each with its source and date;
- ``efficiency`` (optional): the share of peak memory bandwidth decoding achieves; by default
  it is derived from the anchors (their mean), and a GPU may carry its own.

Decoding is memory-bound: each step reads the weights that a token activates and the KV cache
of every sequence in the batch. So a replica of `gpus` GPUs running `batch` sequences decodes
one token per sequence every

    step_s = (weight_bytes + batch x context_tokens x kv_bytes_per_token) / (gpus x bandwidth x efficiency)

and each sequence gets ``1 / step_s`` tokens/s; the replica produces ``batch / step_s``.
An anchor fixes `efficiency` from a measurement (everything else in the formula is known).

Each anchor names its engine (one of :class:`gpufarm.config.model.Engine`, or ``other`` when the
source does not say which engine ran). The plan's own sizing uses every anchor; comparing
engines (:mod:`gpufarm.sizing.engine_compare`) uses only an engine's own anchors on the planned
GPU: docs/decisions/0064-engine-throughput-anchors.md.
"""

from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gpufarm.config.model import Engine
from gpufarm.debug import kind_of, yaml_problem

Precision = Literal["fp16", "bf16", "fp8", "int8", "int4"]
"""Weight precisions `gpufarm plan` knows."""

BYTES_PER_PARAM: dict[str, float] = {"fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
"""Bytes one weight takes at each precision."""

OTHER_ENGINE = "other"
"""An anchor's `engine` when the source does not name one of gpufarm's engines (NVIDIA NIM)."""

ANCHOR_ENGINES: tuple[str, ...] = (*(e.value for e in Engine), OTHER_ENGINE)
"""The values an anchor's `engine` may take."""


class ThroughputTableError(ValueError):
    """A throughput table cannot be read or does not have the table's shape."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GpuSpec(_Strict):
    """What the throughput formula needs to know about one GPU."""

    memory_bandwidth_gb_s: float = Field(gt=0, description="Peak memory bandwidth, GB/s (10^9 bytes).")
    precisions: list[Precision] = Field(
        min_length=1, description="Weight precisions vLLM serves on this GPU."
    )
    efficiency: float | None = Field(
        None, gt=0, le=1, description="Share of peak bandwidth decoding reaches (default: the table's)."
    )
    source: str = Field(min_length=1, description="Where the figures come from.")


class Workload(_Strict):
    """The requests a benchmark sent."""

    input_tokens: int = Field(ge=1, description="Prompt tokens per request.")
    output_tokens: int = Field(ge=1, description="Completion tokens per request.")


class AnchorModel(_Strict):
    """The architecture of the model an anchor measured."""

    name: str = Field(min_length=1, description="The model benchmarked.")
    active_params_b: float = Field(gt=0, description="Parameters read per token, billions.")
    layers: int = Field(ge=1, description="Transformer layers.")
    kv_heads: int = Field(ge=1, description="Key/value heads per layer.")
    head_dim: int = Field(ge=1, description="Dimension of one head.")
    kv_cache_bytes: float = Field(2.0, gt=0, description="Bytes per KV-cache element (2: 16-bit).")
    moe: bool = Field(False, description="A mixture of experts (active_params_b counts the active ones).")


class Anchor(_Strict):
    """One measured serving benchmark: output tokens/s of one replica at a concurrency."""

    id: str = Field(min_length=1, description="Short name of the measurement.")
    gpu: str = Field(min_length=1, description="GPU name (as in gpufarm.core.instances, or any other).")
    gpus: int = Field(ge=1, description="GPUs in the measured replica.")
    memory_bandwidth_gb_s: float = Field(gt=0, description="Peak memory bandwidth of that GPU, GB/s.")
    precision: Precision = Field(description="Weight precision served.")
    model: AnchorModel
    concurrency: int = Field(ge=1, description="Requests in flight during the measurement.")
    workload: Workload
    output_tokens_per_s: float = Field(gt=0, description="Output tokens/s of the replica, measured.")
    engine: str = Field(description="vllm, sglang, trtllm, or other when the source names none of them.")
    software: str = Field(
        min_length=1, description="The serving software and version, as the source names it."
    )
    source: str = Field(min_length=1, description="URL and where in it the figure is.")
    date: dt.date = Field(description="Date the figure was read.")

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        if value not in ANCHOR_ENGINES:
            raise ValueError(
                f"must be {', '.join(e.value for e in Engine)}, or {OTHER_ENGINE} when the source names "
                f"none of them, got {value!r}"
            )
        return value

    def efficiency(self) -> float:
        """The share of peak bandwidth the measurement implies (see the module docstring)."""
        unit = DecodeSetup(
            gpus=self.gpus,
            bandwidth_gb_s=self.memory_bandwidth_gb_s,
            efficiency=1.0,
            weight_bytes=self.model.active_params_b * 1e9 * BYTES_PER_PARAM[self.precision],
            context_tokens=mean_context_tokens(self.workload),
            kv_per_token=kv_bytes_per_token(
                layers=self.model.layers,
                kv_heads=self.model.kv_heads,
                head_dim=self.model.head_dim,
                kv_cache_bytes=self.model.kv_cache_bytes,
            ),
        )
        # At efficiency 1 the replica would decode `ideal` tokens/s; the measurement got less.
        ideal = unit.at(self.concurrency).replica_tokens_per_s
        return self.output_tokens_per_s / ideal


class ThroughputTable(_Strict):
    """GPU bandwidths and the benchmarks that calibrate the decode formula."""

    as_of: dt.date = Field(description="Date of the table.")
    description: str = Field("", description="What the table is and how to replace it.")
    efficiency: float | None = Field(
        None, gt=0, le=1, description="Share of peak bandwidth decoding reaches (default: from anchors)."
    )
    gpus: dict[str, GpuSpec] = Field(min_length=1, description="GPU name -> its figures.")
    anchors: list[Anchor] = Field([], description="Measured benchmarks that fix the efficiency.")

    @model_validator(mode="after")
    def _calibrated(self) -> ThroughputTable:
        if self.efficiency is None and not self.anchors:
            raise ValueError("needs `efficiency` or at least one entry under `anchors` to derive it from")
        ids = [a.id for a in self.anchors]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"anchor ids must be unique, got {', '.join(repeated)} more than once")
        return self

    def derived_efficiency(self) -> float:
        """The table's `efficiency`, else the mean of what the anchors imply."""
        if self.efficiency is not None:
            return self.efficiency
        return statistics.fmean(a.efficiency() for a in self.anchors)

    def efficiency_of(self, gpu: str) -> float:
        """The efficiency used for `gpu`: its own, else the table's."""
        spec = self.gpus.get(gpu)
        if spec is not None and spec.efficiency is not None:
            return spec.efficiency
        return self.derived_efficiency()

    def anchors_of(self, engine: Engine, *, gpu: str, moe: bool) -> list[Anchor]:
        """The anchors `engine` was measured with on `gpu`, for a dense model or a mixture of experts."""
        return [a for a in self.anchors if a.engine == engine.value and a.gpu == gpu and a.model.moe == moe]


@dataclass(frozen=True, kw_only=True)
class Decode:
    """How fast one replica decodes at a batch size."""

    batch: int
    per_sequence_tokens_per_s: float
    replica_tokens_per_s: float


@dataclass(frozen=True, kw_only=True)
class DecodeSetup:
    """The terms of the decode formula for one replica of one model (see the module docstring)."""

    gpus: int
    bandwidth_gb_s: float
    efficiency: float
    weight_bytes: float
    context_tokens: float
    kv_per_token: float

    @property
    def bytes_per_second(self) -> float:
        """Bandwidth the replica reaches: GPUs x peak bandwidth x efficiency, bytes/s."""
        return self.gpus * self.bandwidth_gb_s * 1e9 * self.efficiency

    def at(self, batch: int) -> Decode:
        """Per-sequence and replica tokens/s at `batch` sequences."""
        step_s = (self.weight_bytes + batch * self.context_tokens * self.kv_per_token) / self.bytes_per_second
        return Decode(batch=batch, per_sequence_tokens_per_s=1 / step_s, replica_tokens_per_s=batch / step_s)

    def max_batch(self, rate_tokens_per_s: float) -> int:
        """The most sequences decoded while each still gets `rate_tokens_per_s` (0 when not even one)."""
        room = self.bytes_per_second / rate_tokens_per_s - self.weight_bytes
        return max(0, int(room // (self.context_tokens * self.kv_per_token)))


def kv_bytes_per_token(*, layers: int, kv_heads: int, head_dim: int, kv_cache_bytes: float) -> float:
    """KV-cache bytes one token holds: 2 (key and value) x layers x kv_heads x head_dim x bytes."""
    return 2 * layers * kv_heads * head_dim * kv_cache_bytes


def mean_context_tokens(workload: Workload) -> float:
    """Tokens a sequence holds in the KV cache on average while it decodes: input + output / 2."""
    return workload.input_tokens + workload.output_tokens / 2


def shipped_table_path() -> Path:
    """Path of the throughput table shipped with gpufarm."""
    return Path(str(resources.files("gpufarm") / "data" / "throughput.yaml"))


def load_throughput_table(path: str | Path | None = None) -> ThroughputTable:
    """The throughput table at `path` (it replaces the shipped one), else the shipped table.

    Raises :class:`ThroughputTableError` naming the file and every problem found.
    """
    file = Path(path) if path is not None else shipped_table_path()
    try:
        data: Any = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ThroughputTableError(
            f"cannot read the throughput table {str(file)!r}: {exc.strerror}"
        ) from None
    except UnicodeDecodeError as exc:
        raise ThroughputTableError(
            f"the throughput table {str(file)!r} is not UTF-8 text: byte {exc.start} is "
            f"{exc.object[exc.start]:#04x}"
        ) from None
    except yaml.YAMLError as exc:
        raise ThroughputTableError(
            f"the throughput table {str(file)!r} is not valid YAML{yaml_problem(exc)}"
        ) from None
    if not isinstance(data, dict):
        raise ThroughputTableError(
            f"the throughput table {str(file)!r} must hold a mapping, got {kind_of(data)}"
        )
    try:
        return ThroughputTable.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: "
            f"{str(err['msg']).removeprefix('Value error, ')}"
            for err in exc.errors()
        )
        raise ThroughputTableError(f"{file} is not a valid throughput table: {problems}") from None
