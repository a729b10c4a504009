#!/usr/bin/env bash
# GPU checks, run on a machine with a CUDA GPU (see DESIGN.md section 6): the memory estimator against
# measured peaks of real GRPO steps. Packages the GPU machine lacks travel as wheels in wheels/
# (`make device-wheels` fills it); the SmolLM2 tokenizer travels in .device/tokenizer.
# Results go to $OUT (or .device/) as gpu_memory.json; commit a dated copy under bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-.device}"
mkdir -p "$out" .device/work
python3 -c "import trl, datasets, pydantic" 2>/dev/null \
  || python3 -m pip install --quiet --no-index --find-links wheels trl datasets pydantic
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
python3 -c "import torch, transformers, trl; print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__)" | tee -a "$out/gpu.txt"
PYTHONPATH=. python3 scripts/gpu_memory_check.py --device cuda --tokenizer .device/tokenizer \
  --work .device/work --output "$out/gpu_memory.json" 2>&1 | tee "$out/gpu_memory.log"
