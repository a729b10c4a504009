"""Target hardware: what the recipe will run on (GPU model, memory, bf16, GPUs per node, nodes).

Memory figures are what the cards report (nvidia-smi ``memory.total`` in MiB, converted to GiB), each with
its source; a card without a published reported total keeps the vendor's decimal GB converted and says so.
bf16 support follows the compute capability (Ampere, 8.0, and newer support bf16; Volta and Turing do not,
so they train in fp16). A CPU target's memory is the machine's RAM (``/proc/meminfo`` MemTotal), or the
container's cgroup memory limit when smaller, unless given.
"""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skill.errors import SkillError


class GPUModel(BaseModel):
    """One known accelerator."""

    name: str
    memory_gib: float = Field(description="Memory per GPU in GiB, as the card reports it (nvidia-smi memory.total).")
    bf16: bool = Field(description="True when the GPU computes in bfloat16 (compute capability >= 8.0).")
    source: str = Field(default="", description="Where the memory figure comes from.")


def _mib(mebibytes: int) -> float:
    # nvidia-smi reports memory.total in MiB; everything in this project reports GiB.
    return round(mebibytes / 1024, 1)


def _gib(gigabytes: float) -> float:
    # Only for cards without a published reported total: the vendor's decimal GB, converted (an underestimate).
    return round(gigabytes * 1e9 / 2**30, 1)


MODAL = "https://github.com/modal-labs/modal-client/pull/2797 (nvidia-smi totals across Modal's GPU types)"
UNVERIFIED = "vendor's decimal GB converted; no published nvidia-smi total found yet, so likely a slight underestimate"
# The exact nvidia-smi total appears in public nvidia-smi printouts found by exact-string search of public GitHub
# files; that search gives no file address, so none can be cited beyond the figure itself.
SEEN_UNCITED = "nvidia-smi memory.total {mib}MiB, seen in public nvidia-smi printouts (no citable address found)"
_H100 = GPUModel(name="H100 80GB", memory_gib=_mib(81559), bf16=True, source=MODAL)
_A100_80 = GPUModel(name="A100 80GB", memory_gib=_mib(81920), bf16=True, source=MODAL)
_A100_40 = GPUModel(name="A100 40GB", memory_gib=_mib(40960), bf16=True, source=MODAL)
_A6000 = GPUModel(name="RTX A6000", memory_gib=_mib(49140), bf16=True, source=SEEN_UNCITED.format(mib=49140))
_GH200 = GPUModel(name="GH200 96GB", memory_gib=_mib(97871), bf16=True, source=SEEN_UNCITED.format(mib=97871))
_V100_16 = GPUModel(name="V100 16GB", memory_gib=_gib(16), bf16=False, source=UNVERIFIED)
_V100_32 = GPUModel(name="V100 32GB", memory_gib=_mib(32768), bf16=False, source=SEEN_UNCITED.format(mib=32768))

# Keys are normalised names (lower case, no spaces or dashes); several spellings map to one entry.
KNOWN_GPUS: dict[str, GPUModel] = {
    "b200": GPUModel(
        name="B200",
        memory_gib=_mib(183359),
        bf16=True,
        source="https://github.com/NVIDIA/TensorRT-LLM/issues/10278 (nvidia-smi: 183359MiB)",
    ),
    "h200": GPUModel(
        name="H200",
        memory_gib=_mib(143771),
        bf16=True,
        source=SEEN_UNCITED.format(mib=143771),
    ),
    "h100": _H100,
    "h10080gb": _H100,
    "h100pcie": GPUModel(name="H100 PCIe", memory_gib=_mib(81559), bf16=True, source=MODAL + "; PCIe assumed equal"),
    "h100nvl": GPUModel(
        name="H100 NVL",
        memory_gib=_mib(99961274368 // 2**20),
        bf16=True,
        source="https://github.com/fastfetch-cli/fastfetch/issues/1658 (the driver's dedicated total for 'NVIDIA "
        "H100 NVL': 99961274368 bytes; not an nvidia-smi printout)",
    ),
    "h20": GPUModel(
        name="H20",
        memory_gib=_mib(97871),
        bf16=True,
        source="https://github.com/NVIDIA/nvtrust/issues/128 (nvidia-smi: 97871MiB)",
    ),
    "gh200": _GH200,
    "gh20096gb": _GH200,
    "a10080gb": _A100_80,
    "a100": _A100_80,
    "a10040gb": _A100_40,
    "a10080gbpcie": _A100_80,  # torch / nvidia-smi: "NVIDIA A100 80GB PCIe"; the same memory as the SXM card
    "a100pcie40gb": _A100_40,  # "NVIDIA A100-PCIE-40GB"
    "l40s": GPUModel(name="L40S", memory_gib=_mib(46068), bf16=True, source=MODAL),
    "a6000": _A6000,
    "rtxa6000": _A6000,
    "a10g": GPUModel(name="A10G", memory_gib=_mib(23028), bf16=True, source=MODAL + " (A10; A10G assumed equal)"),
    "a10": GPUModel(name="A10", memory_gib=_mib(23028), bf16=True, source=MODAL),
    "l4": GPUModel(name="L4", memory_gib=_mib(23034), bf16=True, source=MODAL),
    "rtx4090": GPUModel(
        name="RTX 4090",
        memory_gib=_mib(24564),
        bf16=True,
        source="https://github.com/RLinf/RLinf/issues/255 (nvidia-smi: 24564MiB)",
    ),
    "rtx5090": GPUModel(
        name="RTX 5090",
        memory_gib=_mib(32607),
        bf16=True,
        source="https://github.com/noonghunna/club-3090/issues/617 (nvidia-smi: 32607MiB)",
    ),
    "rtx3090": GPUModel(
        name="RTX 3090",
        memory_gib=_mib(24576),
        bf16=True,
        source="https://github.com/noonghunna/club-3090/issues/390 (nvidia-smi: 24576MiB)",
    ),
    "mi300x": GPUModel(
        name="MI300X",
        memory_gib=_mib(201310208 // 1024),
        bf16=True,
        source="https://github.com/ROCm/legacy-rocm-build/issues/4414 (rocminfo GPU pool: 201310208 KB)",
    ),
    "t4": GPUModel(name="T4", memory_gib=_mib(15360), bf16=False, source=MODAL),
    "v100": _V100_32,
    "v10016gb": _V100_16,
    "v10032gb": _V100_32,
    "v100pcie16gb": _V100_16,  # "Tesla V100-PCIE-16GB"
    "v100pcie32gb": _V100_32,
}

# No single accelerator sold today has more memory than this; a larger figure is a typo.
LARGEST_PLAUSIBLE_GPU_GIB = 512.0
SMALLEST_PLAUSIBLE_GIB = 1.0  # below this no GRPO step of any model fits; a smaller figure is a unit mistake


CGROUP_MEMORY_LIMITS = (
    "/sys/fs/cgroup/memory.max",  # cgroup v2: a byte count, or "max" when unlimited
    "/sys/fs/cgroup/memory/memory.limit_in_bytes",  # cgroup v1: a huge number when unlimited
)


def cgroup_memory_limit_bytes(paths: tuple[str, ...] = CGROUP_MEMORY_LIMITS) -> int | None:
    """The container's memory limit in bytes (cgroup v2 ``memory.max``, else v1 ``memory.limit_in_bytes``), or
    None when there is none: a process in a container is killed at this limit, whatever the host has.

    >>> cgroup_memory_limit_bytes(("/nonexistent",)) is None
    True
    """
    for path in paths:
        try:
            with open(path, encoding="ascii") as limit_file:
                text = limit_file.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:  # v1 writes ~2**63 for "no limit"
            return int(text)
        return None
    return None


def host_ram_bytes() -> int | None:
    """The host's total RAM in bytes (``/proc/meminfo`` MemTotal, else ``os.sysconf``), or None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024  # the figure is in kB (KiB)
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def machine_ram_gib(limit_paths: tuple[str, ...] = CGROUP_MEMORY_LIMITS) -> float | None:
    """The RAM this process may use, in GiB: the host's total, or the container's cgroup limit when that is
    smaller; None if neither is known.

    >>> (machine_ram_gib() or 1.0) > 0
    True
    """
    known = [value for value in (host_ram_bytes(), cgroup_memory_limit_bytes(limit_paths)) if value]
    return round(min(known) / 2**30, 1) if known else None


def normalise_gpu_name(name: str) -> str:
    """Lower-case a GPU name and drop spaces, dashes, underscores, vendor prefixes and the SXM form factor and HBM
    generation torch's device names carry (an SXM card is the entry without a suffix; PCIe and NVL stay apart).

    >>> normalise_gpu_name("NVIDIA A100-80GB"), normalise_gpu_name("NVIDIA A100-SXM4-80GB")
    ('a10080gb', 'a10080gb')
    >>> normalise_gpu_name("NVIDIA H100 80GB HBM3"), normalise_gpu_name("H100 SXM"), normalise_gpu_name("H100 PCIe")
    ('h10080gb', 'h100', 'h100pcie')
    """
    key = re.sub(r"sxm\d?|hbm\d?e?", "", name.lower())
    for prefix in ("nvidia", "geforce", "tesla"):
        key = key.replace(prefix, "")
    return "".join(ch for ch in key if ch.isalnum())


def lookup_gpu(name: str) -> GPUModel | None:
    """The known GPU for a name, or None.

    >>> lookup_gpu("h100").memory_gib
    79.6
    >>> lookup_gpu("T4").bf16
    False
    """
    return KNOWN_GPUS.get(normalise_gpu_name(name))


class HardwareSpec(BaseModel):
    """The machine(s) the recipe targets: GPUs (model, memory, count, nodes) or a CPU."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # a misspelled field is an error; NaN/inf refused

    accelerator: Literal["gpu", "cpu"] = Field(
        default="gpu", description="'gpu' for CUDA accelerators, 'cpu' to train on the CPU (small models only)."
    )
    gpu_model: str | None = Field(
        default=None, description="GPU model, e.g. 'H100', 'A100-40GB', 'L4', 'T4'. Needed unless memory is given."
    )
    memory_gib_per_gpu: float | None = Field(
        default=None,
        gt=0,
        description="Memory per GPU in GiB; filled from the GPU model when known. On CPU: RAM in GiB.",
    )
    gpus_per_node: int = Field(default=1, description="GPUs on each node (CPU: ignored).")
    nodes: int = Field(default=1, description="Number of machines.")
    bf16: bool | None = Field(
        default=None, description="Whether the GPU computes in bf16; filled from the GPU model when known."
    )
    host_memory_gib_per_node: float | None = Field(
        default=None,
        gt=0,
        description="Host RAM per node, GiB; when sent, the verdict counts loading and offload.",
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
            if self.memory_gib_per_gpu is None:
                self.memory_gib_per_gpu = machine_ram_gib()  # this machine's RAM: a CPU target runs here
            if self.memory_gib_per_gpu is not None and self.memory_gib_per_gpu < SMALLEST_PLAUSIBLE_GIB:
                raise SkillError(
                    f"memory_gib_per_gpu={self.memory_gib_per_gpu} GiB of RAM is too little for any GRPO run.",
                    "Send the machine's RAM in GiB (at least 1), or leave it out to use this machine's.",
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
        if not SMALLEST_PLAUSIBLE_GIB <= memory <= LARGEST_PLAUSIBLE_GPU_GIB:
            raise SkillError(
                f"memory_gib_per_gpu={memory} is impossible for one GPU.",
                f"Send the memory of one GPU in GiB, between 1 and {LARGEST_PLAUSIBLE_GPU_GIB:.0f}.",
            )
        return self

    @property
    def total_gpus(self) -> int:
        """GPUs across all nodes (0 on CPU)."""
        return 0 if self.accelerator == "cpu" else self.gpus_per_node * self.nodes
