#!/usr/bin/env bash
# The GPU check (docs/architecture.md §7): the memory estimator against the measured peaks of real GRPO steps, then the
# product itself on the card (scripts/gpu_run_check.py: run_grpo with a kill and a resume).
# On a machine with a CUDA GPU, torch, transformers and peft (no trl, no datasets, no network):
#   bash scripts/device_check.sh
# after `make device-wheels` filled wheels/ (CPython 3.12, manylinux x86_64) and .device/tokenizer here and both
# travelled with the checkout. Results go to $OUT (or .device/): gpu.txt, gpu_memory.log, gpu_memory.json,
# gpu_run.json, gpu_run.log; commit a dated copy under bench/results/. Arguments are passed to
# scripts/gpu_memory_check.py and scripts/gpu_run_check.py, so the same flow runs end to end on a CPU
# (tests/target/test_device_check.py):
#   PYTHON=.venv-target/bin/python DEVICE_TOKENIZER=<dir> bash scripts/device_check.sh --device cpu --tiny
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
out="${OUT:-.device}"
work="${DEVICE_WORK:-.device/work}"
tokenizer="${DEVICE_TOKENIZER:-.device/tokenizer}"
mkdir -p "$out" "$work"
# Only what is missing or too old is installed, from the carried wheels (a no-op where all is satisfied).
"$PYTHON" -m pip install --quiet --no-index --find-links wheels -r scripts/device_requirements.txt
if [[ " $* " != *" --device cpu "* ]]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
fi
"$PYTHON" -c "import torch, transformers, trl, peft, datasets, pyarrow
print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__,
      'peft', peft.__version__, 'datasets', datasets.__version__, 'pyarrow', pyarrow.__version__)" | tee -a "$out/gpu.txt"
PYTHONPATH="$PWD" "$PYTHON" scripts/gpu_memory_check.py --tokenizer "$tokenizer" --work "$work" \
  --output "$out/gpu_memory.json" "$@" 2>&1 | tee "$out/gpu_memory.log"
# Sampling on the device (route_check's and inspect_rewards' engine), on the model the memory check built.
PYTHONPATH="$PWD" "$PYTHON" scripts/gpu_sampling_check.py --model "$work/model" --output "$out/gpu_sampling.json" 2>&1 \
  | tee "$out/gpu_sampling.log"
# The product on the card: run_grpo through the worker, LoRA then full, held-out evaluation, a kill and a resume.
PYTHONPATH="$PWD" "$PYTHON" scripts/gpu_run_check.py --tokenizer "$tokenizer" --work "$work" \
  --output "$out/gpu_run.json" "$@" 2>&1 | tee "$out/gpu_run.log"
