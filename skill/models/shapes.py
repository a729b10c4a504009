"""Model shapes: the decoder dimensions (dense or a mixture of experts) the memory estimator reads, a table of
checked rows, and the reading of a config.json into a shape.

The memory estimator works from the shape alone. The table is a cache of checked rows (``models.size`` reads any
other model's config.json): each entry cites the public config.json it was copied from and the parameter count
its publisher states, and a test checks that the count computed from the shape is within 2% of the stated one.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from skill.errors import SkillError
from skill.models.sources import is_embedded

# Bytes a stored weight takes, by format: what memory holds and what a decode step reads.
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
NF4_BYTES_PER_PARAMETER = 4.127 / 8  # 4-bit weights + double-quantized absmax per 64-block (QLoRA paper)


class ModelShape(BaseModel):
    """The dimensions of a decoder-only transformer with gated MLPs (Llama / Qwen / Mistral / Gemma families), dense
    or a mixture of experts (Mixtral, Qwen2/3-MoE, DeepSeek-V2/V3, gpt-oss).

    A mixture of experts stores every expert (memory counts ``parameters()``) while a token passes through
    ``experts_per_token`` routed experts and the shared ones (compute counts ``active_linear_parameters()``).
    """

    layers: int = Field(gt=0, description="num_hidden_layers")
    hidden: int = Field(gt=0, description="hidden_size")
    heads: int = Field(gt=0, description="num_attention_heads")
    kv_heads: int = Field(gt=0, description="num_key_value_heads (grouped-query attention)")
    head_dim: int = Field(gt=0, description="per-head dimension; Qwen3 sets it apart from hidden / heads")
    ffn: int = Field(gt=0, description="intermediate_size of the (dense) gated MLP")
    vocab: int = Field(gt=0, description="vocab_size")
    tied_embeddings: bool = Field(description="tie_word_embeddings: the LM head reuses the input embedding")
    attention_bias: bool = Field(default=False, description="q/k/v projections carry a bias (Qwen2 / Qwen2.5)")
    qk_norm: bool = Field(default=False, description="RMSNorm on q and k per head (Qwen3)")
    experts: int = Field(
        default=0, ge=0, description="Routed experts per MoE layer (num_experts / num_local_experts); 0: dense."
    )
    experts_per_token: int = Field(default=0, ge=0, description="num_experts_per_tok: routed experts a token uses.")
    expert_ffn: int = Field(default=0, ge=0, description="One expert's gated-MLP width (moe_intermediate_size).")
    shared_experts: int = Field(
        default=0, ge=0, description="Experts every token uses, each expert_ffn wide (DeepSeek's n_shared_experts)."
    )
    dense_layers: int = Field(
        default=0, ge=0, description="Leading layers with a dense MLP ffn wide (DeepSeek's first_k_dense_replace)."
    )
    attention_weights: int = Field(
        default=0,
        ge=0,
        description="One layer's attention weights when it is not (grouped-)query attention, e.g. DeepSeek's "
        "multi-head latent attention; 0: from heads, kv_heads and head_dim.",
    )
    kv_cache_width: int = Field(
        default=0,
        ge=0,
        description="Values cached per token and layer when not a key and a value per KV head (multi-head latent "
        "attention: kv_lora_rank + qk_rope_head_dim); 0: 2 x kv_heads x head_dim.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ModelShape:
        if self.heads % self.kv_heads:
            raise ValueError(
                f"heads={self.heads} is not a multiple of kv_heads={self.kv_heads}; "
                "send the model's num_attention_heads and num_key_value_heads"
            )
        if self.experts and not (0 < self.experts_per_token <= self.experts and self.expert_ffn):
            raise ValueError(
                f"a mixture of {self.experts} experts needs experts_per_token between 1 and {self.experts} and "
                "expert_ffn (moe_intermediate_size); send both, or experts=0 for a dense model"
            )
        if self.dense_layers >= self.layers and self.experts:
            raise ValueError(f"dense_layers={self.dense_layers} leaves no MoE layer of {self.layers}")
        return self

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return self.layers - self.dense_layers if self.experts else 0

    def kv_cache_bytes_per_token(self, dtype_bytes: int) -> int:
        """What one token keeps in the KV cache of every layer: a key and a value per KV head, or MLA's latent.

        >>> SHAPES["llama-3.1-8b"].shape.kv_cache_bytes_per_token(2)
        131072
        """
        return self.layers * (self.kv_cache_width or 2 * self.kv_dim) * dtype_bytes

    @property
    def active_ffn(self) -> int:
        """The gated-MLP width a token of an MoE layer passes through (routed + shared experts); ffn when dense."""
        if not self.experts:
            return self.ffn
        return (self.experts_per_token + self.shared_experts) * self.expert_ffn

    def attention_parameters_per_layer(self) -> int:
        """The q, k, v and output projections of one layer (biases and norms not included)."""
        if self.attention_weights:
            return self.attention_weights
        return self.hidden * self.q_dim + 2 * self.hidden * self.kv_dim + self.q_dim * self.hidden

    def _mlp_parameters(self, experts: int) -> int:
        """Every layer's MLP weights when a MoE layer holds ``experts`` routed experts (its router included)."""
        gated = 3 * self.hidden
        dense = (self.layers - self.moe_layers) * gated * self.ffn
        per_moe_layer = (experts + self.shared_experts) * gated * self.expert_ffn + self.hidden * self.experts
        return dense + self.moe_layers * per_moe_layer

    def linear_parameters(self) -> int:
        """Weights of every layer's projections as stored, all experts included (what NF4 quantizes and autocast
        copies).

        >>> SHAPES["qwen2.5-0.5b"].shape.linear_parameters()
        357826560
        """
        return self.layers * self.attention_parameters_per_layer() + self._mlp_parameters(self.experts)

    def active_linear_parameters(self) -> int:
        """Weights of the projections one token multiplies by: the routed experts it is sent to, not all of them
        (equal to ``linear_parameters()`` for a dense model)."""
        return self.layers * self.attention_parameters_per_layer() + self._mlp_parameters(self.experts_per_token)

    def parameters(self) -> int:
        """Exact parameter count of the architecture.

        >>> SHAPES["smollm2-135m-instruct"].shape.parameters()
        134515008
        """
        per_layer = 2 * self.hidden
        if self.attention_bias:
            per_layer += self.q_dim + 2 * self.kv_dim
        if self.qk_norm:
            per_layer += 2 * self.head_dim
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.linear_parameters() + self.layers * per_layer + embeddings + self.hidden


class KnownModel(BaseModel):
    """A table entry: the shape plus where it came from."""

    hub_id: str
    shape: ModelShape
    stated_parameters_b: float = Field(description="The publisher's stated total, in billions.")
    source: str = Field(description="Where the shape and the stated count come from.")


def _model(hub_id: str, stated: float, source: str, **shape: int | bool) -> KnownModel:
    return KnownModel(hub_id=hub_id, shape=ModelShape(**shape), stated_parameters_b=stated, source=source)


# The shape table: every model whose shape is known without its config.json, with the publisher's stated size.
KNOWN_MODELS = [
    # HuggingFaceTB/SmolLM2-135M-Instruct config.json; model card: 135M parameters.
    _model(
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        0.135,
        "HF config.json; model card '135M'",
        layers=30,
        hidden=576,
        heads=9,
        kv_heads=3,
        head_dim=64,
        ffn=1536,
        vocab=49152,
        tied_embeddings=True,
    ),
    # Qwen/Qwen2.5-0.5B-Instruct config.json; model card: 0.49B.
    _model(
        "Qwen/Qwen2.5-0.5B-Instruct",
        0.49,
        "HF config.json; model card 'Number of Parameters: 0.49B'",
        layers=24,
        hidden=896,
        heads=14,
        kv_heads=2,
        head_dim=64,
        ffn=4864,
        vocab=151936,
        tied_embeddings=True,
        attention_bias=True,
    ),
    # Qwen/Qwen2.5-1.5B-Instruct config.json; model card: 1.54B.
    _model(
        "Qwen/Qwen2.5-1.5B-Instruct",
        1.54,
        "HF config.json; model card '1.54B'",
        layers=28,
        hidden=1536,
        heads=12,
        kv_heads=2,
        head_dim=128,
        ffn=8960,
        vocab=151936,
        tied_embeddings=True,
        attention_bias=True,
    ),
    # Qwen/Qwen2.5-3B-Instruct config.json; model card: 3.09B.
    _model(
        "Qwen/Qwen2.5-3B-Instruct",
        3.09,
        "HF config.json; model card '3.09B'",
        layers=36,
        hidden=2048,
        heads=16,
        kv_heads=2,
        head_dim=128,
        ffn=11008,
        vocab=151936,
        tied_embeddings=True,
        attention_bias=True,
    ),
    # Qwen/Qwen2.5-7B-Instruct config.json; model card: 7.61B.
    _model(
        "Qwen/Qwen2.5-7B-Instruct",
        7.61,
        "HF config.json; model card '7.61B'",
        layers=28,
        hidden=3584,
        heads=28,
        kv_heads=4,
        head_dim=128,
        ffn=18944,
        vocab=152064,
        tied_embeddings=False,
        attention_bias=True,
    ),
    # Qwen/Qwen2.5-14B-Instruct config.json; model card: 14.7B.
    _model(
        "Qwen/Qwen2.5-14B-Instruct",
        14.7,
        "HF config.json; model card '14.7B'",
        layers=48,
        hidden=5120,
        heads=40,
        kv_heads=8,
        head_dim=128,
        ffn=13824,
        vocab=152064,
        tied_embeddings=False,
        attention_bias=True,
    ),
    # Qwen/Qwen2.5-32B-Instruct config.json; model card: 32.5B.
    _model(
        "Qwen/Qwen2.5-32B-Instruct",
        32.5,
        "HF config.json; model card '32.5B'",
        layers=64,
        hidden=5120,
        heads=40,
        kv_heads=8,
        head_dim=128,
        ffn=27648,
        vocab=152064,
        tied_embeddings=False,
        attention_bias=True,
    ),
    # Qwen/Qwen3-0.6B config.json (head_dim 128 != 1024 / 16); model card: 0.6B.
    _model(
        "Qwen/Qwen3-0.6B",
        0.6,
        "HF config.json; model card 'Number of Parameters: 0.6B'",
        layers=28,
        hidden=1024,
        heads=16,
        kv_heads=8,
        head_dim=128,
        ffn=3072,
        vocab=151936,
        tied_embeddings=True,
        qk_norm=True,
    ),
    # Qwen/Qwen3-1.7B config.json (head_dim 128 == 2048 / 16); model card: 1.7B.
    _model(
        "Qwen/Qwen3-1.7B",
        1.7,
        "HF config.json; model card 'Number of Parameters: 1.7B'",
        layers=28,
        hidden=2048,
        heads=16,
        kv_heads=8,
        head_dim=128,
        ffn=6144,
        vocab=151936,
        tied_embeddings=True,
        qk_norm=True,
    ),
    # meta-llama/Llama-3.2-1B-Instruct config.json; model card: 1.23B.
    _model(
        "meta-llama/Llama-3.2-1B-Instruct",
        1.23,
        "HF config.json; model card '1.23B'",
        layers=16,
        hidden=2048,
        heads=32,
        kv_heads=8,
        head_dim=64,
        ffn=8192,
        vocab=128256,
        tied_embeddings=True,
    ),
    # meta-llama/Llama-3.2-3B-Instruct config.json; model card: 3.21B.
    _model(
        "meta-llama/Llama-3.2-3B-Instruct",
        3.21,
        "HF config.json; model card '3.21B'",
        layers=28,
        hidden=3072,
        heads=24,
        kv_heads=8,
        head_dim=128,
        ffn=8192,
        vocab=128256,
        tied_embeddings=True,
    ),
    # meta-llama/Llama-3.1-8B-Instruct config.json; model card: 8.03B.
    _model(
        "meta-llama/Llama-3.1-8B-Instruct",
        8.03,
        "HF config.json; model card '8.03B'",
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=8,
        head_dim=128,
        ffn=14336,
        vocab=128256,
        tied_embeddings=False,
    ),
    # meta-llama/Llama-3.1-70B-Instruct config.json; model card: 70.6B.
    _model(
        "meta-llama/Llama-3.1-70B-Instruct",
        70.6,
        "HF config.json; model card '70.6B'",
        layers=80,
        hidden=8192,
        heads=64,
        kv_heads=8,
        head_dim=128,
        ffn=28672,
        vocab=128256,
        tied_embeddings=False,
    ),
]


def _key(model: str) -> str:
    key = model.rsplit("/", 1)[-1].lower()
    return key.removesuffix("-instruct")


# Base and -Instruct checkpoints share a shape; both spellings resolve.
SHAPES: dict[str, KnownModel] = {}
for _entry in KNOWN_MODELS:
    SHAPES[_key(_entry.hub_id)] = _entry
    SHAPES[_key(_entry.hub_id) + "-instruct"] = _entry
SHAPES["smollm2-135m-instruct"] = SHAPES["smollm2-135m"]


def known_model(model: str) -> KnownModel | None:
    """The table entry for a hub id (with or without organisation and '-Instruct') or the embedded default, or None.

    >>> known_model("Qwen/Qwen2.5-7B").shape.kv_heads
    4
    >>> known_model("embedded:SmolLM2-135M-Instruct").hub_id
    'HuggingFaceTB/SmolLM2-135M-Instruct'
    >>> known_model("acme/mystery-model") is None
    True
    """
    if is_embedded(model):
        return SHAPES["smollm2-135m"]
    return SHAPES.get(model.rsplit("/", 1)[-1].lower())


# Keys by which a config.json counts a mixture of experts' routed experts (Mixtral and gpt-oss; Qwen2/3-MoE and
# OLMoE; DeepSeek-V2/V3).
EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")


def _experts(text_config: dict) -> dict[str, int]:
    """The mixture-of-experts fields of a config.json (none for a dense model), refused where experts sit on some
    layers only by a rule the shape cannot state (Qwen's decoder_sparse_step / mlp_only_layers)."""
    experts = next((int(text_config[key]) for key in EXPERT_KEYS if text_config.get(key)), 0)
    if not experts:
        return {}
    if text_config.get("mlp_only_layers") or (text_config.get("decoder_sparse_step") or 1) != 1:
        raise SkillError(
            "config.json puts experts on some layers only (mlp_only_layers / decoder_sparse_step), which the "
            "estimator's shape cannot state.",
            "Send method 'full', 'lora' or 'qlora' (not 'auto') and check memory on the target; a forced run_grpo "
            "skips the memory check.",
        )
    expert_ffn = int(text_config.get("moe_intermediate_size") or text_config["intermediate_size"])
    shared = int(text_config.get("n_shared_experts") or 0)
    if text_config.get("shared_expert_intermediate_size"):  # Qwen2-MoE: one shared MLP, a multiple of an expert
        shared = int(text_config["shared_expert_intermediate_size"]) // expert_ffn
    return {
        "experts": experts,
        "experts_per_token": int(text_config.get("num_experts_per_tok") or text_config["experts_per_token"]),
        "expert_ffn": expert_ffn,
        "shared_experts": shared,
        "dense_layers": int(text_config.get("first_k_dense_replace") or 0),
    }


def _latent_attention(text_config: dict, hidden: int, heads: int) -> dict[str, int]:
    """Multi-head latent attention (DeepSeek-V2/V3): its weights per layer and the latent it caches per token."""
    if not text_config.get("kv_lora_rank"):
        return {}
    kv_rank, q_rank = int(text_config["kv_lora_rank"]), int(text_config.get("q_lora_rank") or 0)
    nope, rope = int(text_config["qk_nope_head_dim"]), int(text_config["qk_rope_head_dim"])
    value = int(text_config["v_head_dim"])
    query = hidden * q_rank + q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
    key_value = hidden * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + value)
    return {
        "head_dim": nope + rope,
        "kv_heads": heads,
        "attention_weights": query + key_value + heads * value * hidden,
        "kv_cache_width": kv_rank + rope,
    }


def shape_from_config(config: dict) -> ModelShape:
    """Read a decoder's ModelShape from a Hugging Face config.json's fields (a multimodal config's
    ``text_config``: the language model), experts and multi-head latent attention included.

    >>> shape_from_config({"vocab_size": 49152, "hidden_size": 576, "num_hidden_layers": 30,
    ...     "num_attention_heads": 9, "num_key_value_heads": 3, "intermediate_size": 1536,
    ...     "tie_word_embeddings": True}).parameters()
    134515008
    >>> moe = shape_from_config({"model_type": "qwen3_moe", "vocab_size": 151936, "hidden_size": 2048,
    ...     "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
    ...     "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8})
    >>> round(moe.parameters() / 1e9, 1), round(moe.active_linear_parameters() / 1e9, 1)  # Qwen3-30B-A3B
    (30.5, 2.7)
    """
    text_config = config.get("text_config") or config
    try:
        heads = int(text_config["num_attention_heads"])
        hidden = int(text_config["hidden_size"])
        fields = {
            "layers": int(text_config["num_hidden_layers"]),
            "hidden": hidden,
            "heads": heads,
            "kv_heads": int(text_config.get("num_key_value_heads") or heads),
            "head_dim": int(text_config.get("head_dim") or hidden // heads),
            "ffn": int(text_config["intermediate_size"]),
            "vocab": int(text_config["vocab_size"]),
            "tied_embeddings": bool(config.get("tie_word_embeddings", text_config.get("tie_word_embeddings", False))),
            "attention_bias": bool(text_config.get("attention_bias", text_config.get("model_type") == "qwen2")),
            "qk_norm": text_config.get("model_type") in ("qwen3", "qwen3_moe"),
        }
        fields |= _experts(text_config) | _latent_attention(text_config, hidden, heads)
        return ModelShape(**fields)
    except KeyError as exc:
        raise SkillError(
            f"config.json lacks {exc.args[0]!r}, which the decoder shape of the memory estimator reads.",
            "Send the shape numbers explicitly (estimate_memory's shape), or model.parameters_billions for a recipe.",
        ) from None
