"""A model's shape from its Hugging Face `config.json` (`gpufarm plan --hf-config`).

The keys read are those the `transformers` configuration classes write (LlamaConfig, Qwen2/3,
MixtralConfig, Qwen2-MoE/Qwen3-MoE, DeepseekV3Config):

* ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``
  (absent: equal to the attention heads, multi-head attention), ``head_dim`` (absent:
  hidden_size / num_attention_heads), ``intermediate_size``, ``vocab_size``,
  ``tie_word_embeddings``;
* the precision from ``quantization_config.quant_method`` (``fp8``; ``awq``/``gptq`` with their
  ``bits``), else ``torch_dtype`` (renamed ``dtype`` by newer transformers releases);
* mixture of experts: the expert count under ``num_local_experts`` (Mixtral),
  ``num_experts`` (Qwen MoE) or ``n_routed_experts`` (DeepSeek), ``num_experts_per_tok``,
  ``moe_intermediate_size``, shared experts (``n_shared_experts``, or Qwen2-MoE's
  ``shared_expert_intermediate_size``) and DeepSeek's ``first_k_dense_replace`` dense layers;
* multi-head latent attention (DeepSeek): ``kv_lora_rank``, ``q_lora_rank``,
  ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``.

A config holds no parameter count: :func:`count_parameters` adds up the weight matrices of the
shape (embeddings, attention, MLP or experts, router), without norms and biases. It matches the
published totals of Llama-3.1-8B (8.03B), Mixtral-8x7B (46.7B total, 12.9B active) and
DeepSeek-V3 (671B, about 37B active; its multi-token-prediction layer is not counted). Any
other architecture is counted by the same rules and `--params-b` overrides the result.

A repo id is fetched from ``https://huggingface.co/<repo>/resolve/main/config.json`` with the
token in ``HF_TOKEN`` when set; ``HF_HUB_OFFLINE=1`` (the variable huggingface_hub reads,
https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables) forbids
the request.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpufarm.sizing.throughput import Precision

HF_ENDPOINT = "https://huggingface.co"
FETCH_TIMEOUT_SECONDS = 20

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")

_DTYPES: dict[str, Precision] = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16"}

_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
"""Where the routed expert count sits: Mixtral, Qwen MoE, DeepSeek."""


class HfConfigError(ValueError):
    """config.json cannot be read or fetched; the message names --hf-config."""


@dataclass(frozen=True, kw_only=True)
class HfShape:
    """What `gpufarm plan` takes from a config.json; None where the config does not say."""

    source: str
    model_type: str | None = None
    layers: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    precision: Precision | None = None
    params_b: float | None = None
    active_params_b: float | None = None
    experts: int | None = None
    experts_per_token: int | None = None
    latent_attention: bool = False
    quantization: str | None = None
    """`quantization_config.quant_method`, when the config has one."""
    public: bool = False
    """True when the config was fetched from the Hub without a token: the repo is not gated."""
    notes: list[str] = field(default_factory=list)

    @property
    def moe(self) -> bool:
        """True for a mixture of experts."""
        return self.experts is not None and self.experts > 1


def _int(config: Mapping[str, Any], key: str) -> int | None:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _precision(config: Mapping[str, Any]) -> Precision | None:
    quant = config.get("quantization_config")
    if isinstance(quant, Mapping):
        method = str(quant.get("quant_method", "")).lower()
        bits = quant.get("bits")
        if method == "fp8":
            return "fp8"
        if method in {"awq", "gptq"} and bits in (4, 8):
            return "int4" if bits == 4 else "int8"
        return None  # another scheme: the precision must be given
    dtype = config.get("torch_dtype", config.get("dtype"))
    return _DTYPES.get(str(dtype)) if dtype is not None else None


def count_parameters(config: Mapping[str, Any]) -> tuple[float, float] | None:
    """(total, active) parameters of the shape, billions; None when a key it needs is missing."""
    hidden = _int(config, "hidden_size")
    layers = _int(config, "num_hidden_layers")
    heads = _int(config, "num_attention_heads")
    vocab = _int(config, "vocab_size")
    inter = _int(config, "intermediate_size")
    if None in (hidden, layers, heads, vocab):
        return None
    assert hidden is not None and layers is not None and heads is not None and vocab is not None
    kv_heads = _int(config, "num_key_value_heads") or heads
    head_dim = _int(config, "head_dim") or hidden // heads
    kv_lora = _int(config, "kv_lora_rank")
    if kv_lora is not None:
        rope = _int(config, "qk_rope_head_dim") or 0
        nope = _int(config, "qk_nope_head_dim") or 0
        v_dim = _int(config, "v_head_dim") or nope
        q_lora = _int(config, "q_lora_rank")
        q = hidden * q_lora + q_lora * heads * (nope + rope) if q_lora else hidden * heads * (nope + rope)
        attention = q + hidden * (kv_lora + rope) + kv_lora * heads * (nope + v_dim) + heads * v_dim * hidden
    else:
        attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") is True else 2)
    experts = next((n for key in _EXPERT_KEYS if (n := _int(config, key))), None)
    if experts is None or experts == 1:
        if inter is None:
            return None
        dense = layers * (attention + 3 * hidden * inter) + embeddings
        return dense / 1e9, dense / 1e9
    expert_inter = _int(config, "moe_intermediate_size") or inter
    per_token = _int(config, "num_experts_per_tok") or 2
    if expert_inter is None:
        return None
    expert = 3 * hidden * expert_inter
    shared = (_int(config, "n_shared_experts") or 0) * expert
    if shared_inter := _int(config, "shared_expert_intermediate_size"):
        shared += 3 * hidden * shared_inter
    router = hidden * experts
    dense_layers = min(_int(config, "first_k_dense_replace") or 0, layers)
    dense_mlp = 3 * hidden * inter if inter else expert
    base = embeddings + dense_layers * (attention + dense_mlp)
    moe_layers = layers - dense_layers
    total = base + moe_layers * (attention + experts * expert + shared + router)
    active = base + moe_layers * (attention + per_token * expert + shared + router)
    return total / 1e9, active / 1e9


def shape_of(config: Mapping[str, Any], *, source: str) -> HfShape:
    """The shape gpufarm plans with, from a parsed config.json."""
    heads = _int(config, "num_attention_heads")
    hidden = _int(config, "hidden_size")
    notes: list[str] = []
    kv_lora = _int(config, "kv_lora_rank")
    if kv_lora is not None:
        # Multi-head latent attention caches one latent vector per token and layer
        # (kv_lora_rank + qk_rope_head_dim); counted as one KV head of that size.
        kv_heads: int | None = 1
        head_dim: int | None = kv_lora + (_int(config, "qk_rope_head_dim") or 0)
        notes.append(
            f"multi-head latent attention: the KV cache is one latent of {head_dim} per token and "
            "layer, counted as 1 KV head of that size for both key and value (an upper bound)"
        )
    else:
        kv_heads = _int(config, "num_key_value_heads") or heads
        head_dim = _int(config, "head_dim") or (hidden // heads if hidden and heads else None)
    counted = count_parameters(config)
    experts = next((n for key in _EXPERT_KEYS if (n := _int(config, key))), None)
    moe = experts is not None and experts > 1
    return HfShape(
        source=source,
        model_type=str(config["model_type"]) if "model_type" in config else None,
        layers=_int(config, "num_hidden_layers"),
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        precision=_precision(config),
        params_b=round(counted[0], 2) if counted else None,
        active_params_b=round(counted[1], 2) if counted and moe else None,
        experts=experts,
        experts_per_token=_int(config, "num_experts_per_tok") if moe else None,
        latent_attention=kv_lora is not None,
        quantization=str(quant.get("quant_method"))
        if isinstance(quant := config.get("quantization_config"), Mapping)
        else None,
        notes=notes,
    )


Fetch = Callable[[str, dict[str, str]], bytes]


def _urlopen(url: str, headers: dict[str, str]) -> bytes:
    from urllib.request import Request, urlopen

    with urlopen(Request(url, headers=headers), timeout=FETCH_TIMEOUT_SECONDS) as response:
        body: bytes = response.read()
        return body


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def read_hf_config(reference: str, *, fetch: Fetch | None = None) -> HfShape:
    """The shape in `reference`: a config.json file (or a folder holding one), or a repo id.

    Raises :class:`HfConfigError` (naming --hf-config) when the file cannot be read or parsed,
    when a repo id cannot be fetched, or with HF_HUB_OFFLINE set.
    """
    path = Path(reference)
    try:
        if path.is_dir():
            path = path / "config.json"
        is_file = path.is_file()
    except (OSError, ValueError):  # a name the file system refuses (too long, a NUL byte)
        is_file = False
    if is_file:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise HfConfigError(f"--hf-config {reference!r}: cannot read the file: {exc}") from None
        return _parse(text, source=str(path), reference=reference)
    if not _REPO_ID.match(reference):
        raise HfConfigError(
            f"--hf-config must be a config.json file or a Hugging Face repo id such as "
            f"'Qwen/Qwen3-8B', got {reference!r} (no such file)"
        )
    download = f"save {HF_ENDPOINT}/{reference}/blob/main/config.json and pass its path"
    if _offline():
        raise HfConfigError(
            f"--hf-config {reference!r}: HF_HUB_OFFLINE is set, so the repo's config.json cannot be "
            f"fetched; {download}"
        )
    url = f"{HF_ENDPOINT}/{reference}/resolve/main/config.json"
    headers = {"User-Agent": "gpufarm-plan"}
    if token := os.environ.get("HF_TOKEN"):
        headers["Authorization"] = f"Bearer {token}"
    from urllib.error import HTTPError, URLError

    try:
        body = (fetch or _urlopen)(url, headers)
    except HTTPError as exc:
        if exc.code in (401, 403):
            raise HfConfigError(
                f"--hf-config {reference!r}: Hugging Face refused the download (HTTP {exc.code}): the "
                "repo is gated or private; set HF_TOKEN to a token with access, or "
                f"{download}"
            ) from None
        raise HfConfigError(
            f"--hf-config {reference!r}: Hugging Face answered HTTP {exc.code} for {url}; check the repo id"
        ) from None
    except (URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise HfConfigError(
            f"--hf-config {reference!r}: cannot reach Hugging Face ({reason}); {download}"
        ) from None
    shape = _parse(body.decode("utf-8", errors="replace"), source=url, reference=reference)
    # Hugging Face serves a gated repo's files only to a token with access (models-gated docs,
    # https://huggingface.co/docs/hub/models-gated): fetched without one, the repo is public.
    return replace(shape, public="Authorization" not in headers)


def _parse(text: str, *, source: str, reference: str) -> HfShape:
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HfConfigError(f"--hf-config {reference!r}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(config, dict):
        raise HfConfigError(
            f"--hf-config {reference!r}: must hold a JSON object (a model's config.json), "
            f"got {type(config).__name__}"
        )
    # Multimodal configs (Llama 4, Gemma 3, Mistral 3) keep the language model under text_config.
    text_config = config.get("text_config")
    if isinstance(text_config, dict) and "num_hidden_layers" not in config:
        merged = {**config, **text_config}
        merged.setdefault("torch_dtype", config.get("torch_dtype"))
        config = merged
    return shape_of(config, source=source)
