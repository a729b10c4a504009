"""Model shapes: the dense decoder dimensions the memory estimator reads, a table of checked rows, and the
reading of a config.json into a shape.

The memory estimator works from the shape alone. The table is a cache of checked rows (``models.size`` reads any
other model's config.json): each entry cites the public config.json it was copied from and the parameter count
its publisher states, and a test checks that the count computed from the shape is within 2% of the stated one.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from skill.errors import SkillError
from skill.models.sources import is_embedded


class ModelShape(BaseModel):
    """The dimensions of a dense decoder-only transformer (Llama / Qwen2 / Qwen3 family)."""

    layers: int = Field(gt=0, description="num_hidden_layers")
    hidden: int = Field(gt=0, description="hidden_size")
    heads: int = Field(gt=0, description="num_attention_heads")
    kv_heads: int = Field(gt=0, description="num_key_value_heads (grouped-query attention)")
    head_dim: int = Field(gt=0, description="per-head dimension; Qwen3 sets it apart from hidden / heads")
    ffn: int = Field(gt=0, description="intermediate_size of the gated MLP")
    vocab: int = Field(gt=0, description="vocab_size")
    tied_embeddings: bool = Field(description="tie_word_embeddings: the LM head reuses the input embedding")
    attention_bias: bool = Field(default=False, description="q/k/v projections carry a bias (Qwen2 / Qwen2.5)")
    qk_norm: bool = Field(default=False, description="RMSNorm on q and k per head (Qwen3)")

    @model_validator(mode="after")
    def _consistent(self) -> ModelShape:
        if self.heads % self.kv_heads:
            raise ValueError(
                f"heads={self.heads} is not a multiple of kv_heads={self.kv_heads}; "
                "send the model's num_attention_heads and num_key_value_heads"
            )
        return self

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def linear_parameters_per_layer(self) -> int:
        """Weights of the projections in one layer (what LoRA 'all-linear' adapts and NF4 quantizes)."""
        attention = self.hidden * self.q_dim + 2 * self.hidden * self.kv_dim + self.q_dim * self.hidden
        return attention + 3 * self.hidden * self.ffn

    def parameters(self) -> int:
        """Exact parameter count of the architecture.

        >>> SHAPES["smollm2-135m-instruct"].shape.parameters()
        134515008
        """
        per_layer = self.linear_parameters_per_layer() + 2 * self.hidden
        if self.attention_bias:
            per_layer += self.q_dim + 2 * self.kv_dim
        if self.qk_norm:
            per_layer += 2 * self.head_dim
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * per_layer + embeddings + self.hidden


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


# Keys by which a config.json declares a mixture-of-experts MLP (Mixtral, Qwen2/3-MoE, DeepSeek, OLMoE, ...).
MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size")


def shape_from_config(config: dict) -> ModelShape:
    """Read a dense decoder's ModelShape from a Hugging Face config.json's fields (a multimodal config's
    ``text_config``: the language model). A mixture-of-experts config is refused: the estimator's formulas have one
    gated MLP per layer, and sizing experts, routers and shared experts is not done here.

    >>> shape_from_config({"vocab_size": 49152, "hidden_size": 576, "num_hidden_layers": 30,
    ...     "num_attention_heads": 9, "num_key_value_heads": 3, "intermediate_size": 1536,
    ...     "tie_word_embeddings": True}).parameters()
    134515008
    >>> shape_from_config({"model_type": "mixtral", "num_local_experts": 8})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    skill.errors.SkillError: config.json describes a mixture-of-experts model (num_local_experts=8): ...
    """
    text_config = config.get("text_config") or config
    experts = [f"{key}={text_config[key]}" for key in MOE_KEYS if text_config.get(key)]
    if experts:
        raise SkillError(
            f"config.json describes a mixture-of-experts model ({', '.join(experts)}): the memory estimator covers "
            "dense decoder-only models (one gated MLP per layer).",
            "Send method 'full', 'lora' or 'qlora' (not 'auto') and check memory on the target; a forced run_grpo "
            "skips the memory check. The parameter count still comes from config.json, or send "
            "model.parameters_billions.",
        )
    try:
        heads = int(text_config["num_attention_heads"])
        hidden = int(text_config["hidden_size"])
        return ModelShape(
            layers=int(text_config["num_hidden_layers"]),
            hidden=hidden,
            heads=heads,
            kv_heads=int(text_config.get("num_key_value_heads") or heads),
            head_dim=int(text_config.get("head_dim") or hidden // heads),
            ffn=int(text_config["intermediate_size"]),
            vocab=int(text_config["vocab_size"]),
            tied_embeddings=bool(config.get("tie_word_embeddings", text_config.get("tie_word_embeddings", False))),
            attention_bias=bool(text_config.get("attention_bias", text_config.get("model_type") == "qwen2")),
            qk_norm=text_config.get("model_type") == "qwen3",
        )
    except KeyError as exc:
        raise SkillError(
            f"config.json lacks {exc.args[0]!r}, which the dense decoder shape of the memory estimator reads.",
            "Send the shape numbers explicitly (estimate_memory's shape), or model.parameters_billions for a recipe.",
        ) from None
