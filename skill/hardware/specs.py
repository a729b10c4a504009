"""Target hardware: what the recipe will run on (GPU model, memory, bf16, GPUs per node, nodes).

Memory figures are the vendors' stated capacities; bf16 support follows the compute capability
(Ampere, 8.0, and newer support bf16; Volta and Turing do not, so they train in fp16).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skill.errors import SkillError


class GPUModel(BaseModel):
    """One known accelerator."""

    name: str
    memory_gib: float = Field(description="Memory per GPU in GiB, as sold (decimal GB converted).")
    bf16: bool = Field(description="True when the GPU computes in bfloat16 (compute capability >= 8.0).")


def _gib(gigabytes: float) -> float:
    # Vendors sell decimal GB; everything in this project reports GiB.
    return round(gigabytes * 1e9 / 2**30, 1)


# Keys are normalised names (lower case, no spaces or dashes); several spellings map to one entry.
KNOWN_GPUS: dict[str, GPUModel] = {
    "b200": GPUModel(name="B200", memory_gib=_gib(192), bf16=True),
    "h200": GPUModel(name="H200", memory_gib=_gib(141), bf16=True),
    "h100": GPUModel(name="H100 80GB", memory_gib=_gib(80), bf16=True),
    "h100nvl": GPUModel(name="H100 NVL", memory_gib=_gib(94), bf16=True),
    "gh200": GPUModel(name="GH200", memory_gib=_gib(96), bf16=True),
    "a10080gb": GPUModel(name="A100 80GB", memory_gib=_gib(80), bf16=True),
    "a10040gb": GPUModel(name="A100 40GB", memory_gib=_gib(40), bf16=True),
    "a100": GPUModel(name="A100 80GB", memory_gib=_gib(80), bf16=True),
    "l40s": GPUModel(name="L40S", memory_gib=_gib(48), bf16=True),
    "a6000": GPUModel(name="RTX A6000", memory_gib=_gib(48), bf16=True),
    "rtxa6000": GPUModel(name="RTX A6000", memory_gib=_gib(48), bf16=True),
    "a10g": GPUModel(name="A10G", memory_gib=_gib(24), bf16=True),
    "a10": GPUModel(name="A10", memory_gib=_gib(24), bf16=True),
    "l4": GPUModel(name="L4", memory_gib=_gib(24), bf16=True),
    "rtx4090": GPUModel(name="RTX 4090", memory_gib=_gib(24), bf16=True),
    "rtx5090": GPUModel(name="RTX 5090", memory_gib=_gib(32), bf16=True),
    "rtx3090": GPUModel(name="RTX 3090", memory_gib=_gib(24), bf16=True),
    "t4": GPUModel(name="T4", memory_gib=_gib(16), bf16=False),
    "v100": GPUModel(name="V100 32GB", memory_gib=_gib(32), bf16=False),
    "v10016gb": GPUModel(name="V100 16GB", memory_gib=_gib(16), bf16=False),
    "v10032gb": GPUModel(name="V100 32GB", memory_gib=_gib(32), bf16=False),
}

# No single accelerator sold today has more memory than this; a larger figure is a typo.
LARGEST_PLAUSIBLE_GPU_GIB = 512.0


def normalise_gpu_name(name: str) -> str:
    """Lower-case a GPU name and drop spaces, dashes, underscores and vendor prefixes.

    >>> normalise_gpu_name("NVIDIA A100-80GB")
    'a10080gb'
    """
    key = name.lower()
    for prefix in ("nvidia", "geforce", "tesla"):
        key = key.replace(prefix, "")
    return "".join(ch for ch in key if ch.isalnum())


def lookup_gpu(name: str) -> GPUModel | None:
    """The known GPU for a name, or None.

    >>> lookup_gpu("h100").memory_gib
    74.5
    >>> lookup_gpu("T4").bf16
    False
    """
    return KNOWN_GPUS.get(normalise_gpu_name(name))


class HardwareSpec(BaseModel):
    """The machine(s) the recipe targets: GPUs (model, memory, count, nodes) or a CPU."""

    model_config = ConfigDict(extra="forbid")  # a misspelled field is an error, not silently dropped

    accelerator: Literal["gpu", "cpu"] = Field(
        default="gpu", description="'gpu' for CUDA accelerators, 'cpu' to train on the CPU (small models only)."
    )
    gpu_model: str | None = Field(
        default=None, description="GPU model, e.g. 'H100', 'A100-40GB', 'L4', 'T4'. Needed unless memory is given."
    )
    memory_gib_per_gpu: float | None = Field(
        default=None, description="Memory per GPU in GiB; filled from the GPU model when known. On CPU: RAM in GiB."
    )
    gpus_per_node: int = Field(default=1, description="GPUs on each node (CPU: ignored).")
    nodes: int = Field(default=1, description="Number of machines.")
    bf16: bool | None = Field(
        default=None, description="Whether the GPU computes in bf16; filled from the GPU model when known."
    )

    @model_validator(mode="after")
    def _check_and_fill(self) -> HardwareSpec:
        # Raised as ValueError so pydantic reports the message wherever the spec is validated
        # (including an MCP client's arguments), rather than losing it.
        try:
            return self._fill()
        except SkillError as exc:
            raise ValueError(str(exc)) from None

    def _fill(self) -> HardwareSpec:
        if self.nodes < 1:
            raise SkillError(f"nodes={self.nodes} is impossible.", "Send nodes >= 1.")
        if self.accelerator == "cpu":
            if self.nodes != 1:
                raise SkillError(
                    "Multi-node CPU training is not supported.", "Send nodes=1 for a CPU target, or GPU hardware."
                )
            return self
        if self.gpus_per_node < 1:
            raise SkillError(
                f"gpus_per_node={self.gpus_per_node} is impossible for a GPU target.",
                "Send gpus_per_node >= 1, or accelerator='cpu'.",
            )
        known = lookup_gpu(self.gpu_model) if self.gpu_model else None
        if self.gpu_model and known is None and self.memory_gib_per_gpu is None:
            names = sorted({gpu.name for gpu in KNOWN_GPUS.values()})
            raise SkillError(
                f"Unknown GPU model {self.gpu_model!r} and no memory_gib_per_gpu.",
                f"Send memory_gib_per_gpu (and bf16) for it, or one of: {', '.join(names)}.",
            )
        if self.gpu_model is None and self.memory_gib_per_gpu is None:
            raise SkillError(
                "A GPU target needs a GPU model or its memory.",
                "Send gpu_model (e.g. 'H100') or memory_gib_per_gpu, or accelerator='cpu'.",
            )
        if self.memory_gib_per_gpu is None and known is not None:
            self.memory_gib_per_gpu = known.memory_gib
        if self.bf16 is None:
            self.bf16 = known.bf16 if known is not None else True
        memory = self.memory_gib_per_gpu or 0.0
        if not 0 < memory <= LARGEST_PLAUSIBLE_GPU_GIB:
            raise SkillError(
                f"memory_gib_per_gpu={memory} is impossible for one GPU.",
                f"Send the memory of one GPU in GiB, between 1 and {LARGEST_PLAUSIBLE_GPU_GIB:.0f}.",
            )
        return self

    @property
    def total_gpus(self) -> int:
        """GPUs across all nodes (0 on CPU)."""
        return 0 if self.accelerator == "cpu" else self.gpus_per_node * self.nodes
