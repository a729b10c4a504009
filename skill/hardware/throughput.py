"""What an accelerator computes and moves per second: dense bf16 (fp16 where the card has no bf16) tensor-core
peak, HBM bandwidth and the link to the other GPUs of its node, from the vendors' datasheets. The step-time
estimate (``skill.timing``) reads them.

Peaks are the dense figures (the datasheets' headline numbers are "with sparsity", twice these). Keys are
``specs.normalise_gpu_name`` keys, as in ``specs.KNOWN_GPUS``.

May import: ``hardware.specs``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from skill.hardware.specs import HardwareSpec, normalise_gpu_name


class GPUThroughput(BaseModel):
    """One accelerator's peak compute and memory bandwidth."""

    name: str
    peak_tflops: float = Field(description="Dense bf16 (or fp16) tensor-core peak, TFLOP/s.")
    hbm_tb_per_s: float = Field(description="Memory bandwidth, TB/s (decimal).")
    link_gb_per_s: float = Field(
        description="GPU-to-GPU bandwidth within a node, one direction, GB/s (decimal): NVLink (or Infinity Fabric) "
        "where every GPU of the board has it, else the card's PCIe x16 (a two-card bridge does not serve eight)."
    )
    source: str


H100_SXM = "NVIDIA H100 Tensor Core GPU datasheet (SXM: BF16 1,979 TFLOPS with sparsity, 3.35 TB/s, NVLink 900 GB/s)"
H100_PCIE = (
    "NVIDIA H100 Tensor Core GPU datasheet (PCIe: BF16 1,513 TFLOPS with sparsity, 2.0 TB/s, PCIe Gen5 128 GB/s)"
)
H100_NVL = "NVIDIA H100 Tensor Core GPU datasheet (NVL: BF16 1,671 TFLOPS with sparsity, 3.9 TB/s, PCIe Gen5 128 GB/s)"
H200 = "NVIDIA H200 Tensor Core GPU datasheet (SXM: BF16 1,979 TFLOPS with sparsity, 4.8 TB/s, NVLink 900 GB/s)"
GH200 = "NVIDIA GH200 Grace Hopper Superchip datasheet (H100 compute; 96 GB HBM3 at 4 TB/s; NVLink 900 GB/s)"
B200 = "NVIDIA HGX B200 datasheet (per GPU: FP16/BF16 4.5 PFLOPS with sparsity, 8 TB/s, NVLink 1.8 TB/s)"
GB200 = "NVIDIA GB200 NVL72 datasheet (per GPU: FP16/BF16 5 PFLOPS with sparsity, 8 TB/s, NVLink 1.8 TB/s)"
A100 = (
    "NVIDIA A100 Tensor Core GPU datasheet (BF16 312 TFLOPS dense; 80GB SXM 2,039 GB/s, 40GB 1,555 GB/s; SXM NVLink "
    "600 GB/s)"
)
L40S = "NVIDIA L40S datasheet (BF16 733 TFLOPS with sparsity, 864 GB/s, PCIe Gen4 x16 64 GB/s bidirectional)"
A6000 = "NVIDIA RTX A6000 datasheet (tensor 309.7 TFLOPS with sparsity, 768 GB/s, PCIe Gen4 x16)"
A10 = "NVIDIA A10 datasheet (BF16 250 TFLOPS with sparsity, 600 GB/s, PCIe Gen4 64 GB/s); A10G assumed equal"
L4 = "NVIDIA L4 datasheet (BF16 242 TFLOPS with sparsity, 300 GB/s, PCIe Gen4 x16 64 GB/s)"
H20 = "NVIDIA H20 product brief as reported (BF16 148 TFLOPS dense, 4.0 TB/s, NVLink 900 GB/s)"
MI300X = (
    "AMD Instinct MI300X datasheet (BF16 1,307.4 TFLOPS dense, 5.3 TB/s; Infinity Fabric 7 links of 128 GB/s "
    "bidirectional to the other seven)"
)
T4 = "NVIDIA T4 datasheet (FP16 mixed precision 65 TFLOPS, 320 GB/s, PCIe Gen3 x16 32 GB/s; no bf16)"
V100 = "NVIDIA V100 datasheet (SXM2 tensor 125 TFLOPS fp16, 900 GB/s, NVLink 300 GB/s)"
V100_PCIE = "NVIDIA V100 datasheet (PCIe tensor 112 TFLOPS fp16, 900 GB/s, PCIe Gen3 32 GB/s)"
A100_PCIE = (
    "NVIDIA A100 Tensor Core GPU datasheet (PCIe: BF16 312 TFLOPS dense; 80GB 1,935 GB/s, 40GB 1,555 GB/s; PCIe Gen4 "
    "64 GB/s)"
)
RTX4090 = (
    "NVIDIA Ada Lovelace architecture whitepaper, RTX 4090 (FP16 tensor, FP32 accumulate 165.2 TFLOPS; 1,008 GB/s; "
    "PCIe Gen4 x16)"
)
RTX3090 = "NVIDIA Ampere GA102 whitepaper, RTX 3090 (FP16 tensor, FP32 accumulate 71 TFLOPS; 936 GB/s; PCIe Gen4 x16)"
RTX5090 = "NVIDIA RTX Blackwell whitepaper, RTX 5090 (FP16 tensor 209.5 TFLOPS dense; 1,792 GB/s; PCIe Gen5 x16)"


# PCIe x16, one direction: 16 GB/s for Gen3, 32 for Gen4, 64 for Gen5 (half the bidirectional figures above).
PCIE_GEN3, PCIE_GEN4, PCIE_GEN5 = 16.0, 32.0, 64.0


def _gpu(name: str, tflops: float, tb_per_s: float, link: float, source: str) -> GPUThroughput:
    return GPUThroughput(name=name, peak_tflops=tflops, hbm_tb_per_s=tb_per_s, link_gb_per_s=link, source=source)


_H100 = _gpu("H100 SXM", 989.5, 3.35, 450.0, H100_SXM)
_A100_80 = _gpu("A100 80GB", 312.0, 2.039, 300.0, A100)
_GH200 = _gpu("GH200", 989.5, 4.0, 450.0, GH200)
_V100 = _gpu("V100", 125.0, 0.9, 150.0, V100)

THROUGHPUT: dict[str, GPUThroughput] = {
    "h100": _H100,
    "h10080gb": _H100,
    "h100pcie": _gpu("H100 PCIe", 756.5, 2.0, PCIE_GEN5, H100_PCIE),
    "h100nvl": _gpu("H100 NVL", 835.5, 3.9, PCIE_GEN5, H100_NVL),
    "h200": _gpu("H200", 989.5, 4.8, 450.0, H200),
    "h20": _gpu("H20", 148.0, 4.0, 450.0, H20),
    "gh200": _GH200,
    "gh20096gb": _GH200,
    "b200": _gpu("B200", 2250.0, 8.0, 900.0, B200),
    "gb200": _gpu("GB200", 2500.0, 8.0, 900.0, GB200),
    "a100": _A100_80,
    "a10080gb": _A100_80,
    "a10040gb": _gpu("A100 40GB", 312.0, 1.555, 300.0, A100),
    "a10080gbpcie": _gpu("A100 80GB PCIe", 312.0, 1.935, PCIE_GEN4, A100_PCIE),
    "a100pcie40gb": _gpu("A100 40GB PCIe", 312.0, 1.555, PCIE_GEN4, A100_PCIE),
    "l40s": _gpu("L40S", 366.5, 0.864, PCIE_GEN4, L40S),
    "a6000": _gpu("RTX A6000", 154.9, 0.768, PCIE_GEN4, A6000),
    "rtxa6000": _gpu("RTX A6000", 154.9, 0.768, PCIE_GEN4, A6000),
    "a10": _gpu("A10", 125.0, 0.6, PCIE_GEN4, A10),
    "a10g": _gpu("A10G", 125.0, 0.6, PCIE_GEN4, A10),
    "l4": _gpu("L4", 121.0, 0.3, PCIE_GEN4, L4),
    "rtx4090": _gpu("RTX 4090", 165.2, 1.008, PCIE_GEN4, RTX4090),
    "rtx3090": _gpu("RTX 3090", 71.0, 0.936, PCIE_GEN4, RTX3090),
    "rtx5090": _gpu("RTX 5090", 209.5, 1.792, PCIE_GEN5, RTX5090),
    "mi300x": _gpu("MI300X", 1307.4, 5.3, 448.0, MI300X),
    "t4": _gpu("T4", 65.0, 0.32, PCIE_GEN3, T4),
    "v100": _V100,
    "v10016gb": _V100,
    "v10032gb": _V100,
    "v100pcie16gb": _gpu("V100 PCIe", 112.0, 0.9, PCIE_GEN3, V100_PCIE),
    "v100pcie32gb": _gpu("V100 PCIe", 112.0, 0.9, PCIE_GEN3, V100_PCIE),
}


def gpu_throughput(hardware: HardwareSpec) -> GPUThroughput | None:
    """The target GPU's peak and bandwidth, or None for a CPU target or a GPU this table does not know.

    >>> gpu_throughput(HardwareSpec(gpu_model="H100")).hbm_tb_per_s
    3.35
    >>> gpu_throughput(HardwareSpec(accelerator="cpu")) is None
    True
    """
    if hardware.accelerator == "cpu" or not hardware.gpu_model:
        return None
    return THROUGHPUT.get(normalise_gpu_name(hardware.gpu_model))
