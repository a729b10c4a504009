#!/usr/bin/env bash
# Qwen/Qwen2.5-1.5B-Instruct (qlora), zero2: 8 trainer(s). Written by grpo-rlvr.
# On every node: NODE_RANK=<rank> MAIN_PROCESS_IP=<node 0 address> bash launch_node.sh [TRAINER ...]
# TRAINER defaults to `train_grpo.py --output-dir grpo-output`; run_grpo passes `-m skill.runs.worker RUN_DIR`.
# MAIN_PROCESS_PORT, GRPO_RLVR_VLLM_PORT and GRPO_RLVR_VLLM_GROUP_PORT may be set to free ports (run_grpo picks them
# per run).
set -euo pipefail
cd "$(dirname "$0")"
# Slurm's checkpoint request (sbatch --signal=USR1) is for the trainers (the worker saves one): this shell,
# accelerate's launcher and the vLLM server inherit 'ignore' and live on; the worker catches it.
trap '' USR1
NODE_RANK=${NODE_RANK:-${SLURM_NODEID:-0}}
MAIN_PROCESS_IP=${MAIN_PROCESS_IP:-127.0.0.1}
MAIN_PROCESS_PORT=${MAIN_PROCESS_PORT:-29500}
GRPO_RLVR_VLLM_PORT=${GRPO_RLVR_VLLM_PORT:-8000}
GRPO_RLVR_VLLM_GROUP_PORT=${GRPO_RLVR_VLLM_GROUP_PORT:-51216}
export GRPO_RLVR_VLLM_PORT GRPO_RLVR_VLLM_GROUP_PORT  # the trainer reads the ports the server was started with
if [ $# -gt 0 ]; then TRAINER=("$@"); else TRAINER=(train_grpo.py --output-dir grpo-output); fi
NUM_MACHINES=1
# The packages this plan needs beyond the core install (module=requirement), checked before anything starts.
python - peft=grpo-rlvr 'bitsandbytes=grpo-rlvr[gpu]' 'trackio=grpo-rlvr[tracking]' 'deepspeed=grpo-rlvr[gpu]' <<'CHECK'
import importlib.util, sys
needs = dict(pair.split("=", 1) for pair in sys.argv[1:])
missing = [module for module in needs if importlib.util.find_spec(module) is None]
if missing:
    installs = " ".join(sorted({repr(needs[module]) for module in missing}))
    sys.exit(f"this recipe needs {', '.join(missing)}: pip install {installs}")
CHECK
# The plan numbers this node's GPUs 0..N-1; an inherited CUDA_VISIBLE_DEVICES lists the ones this job was
# given (a scheduler's allocation, a shared machine), so plan index i is its i-th entry.
GIVEN_DEVICES=${CUDA_VISIBLE_DEVICES:-}
given_devices() {
  if [ -z "$GIVEN_DEVICES" ] || [ -z "$1" ]; then echo "$1"; return; fi
  python - "$GIVEN_DEVICES" "$1" <<'DEVICES'
import sys
given = sys.argv[1].split(",")
wanted = [int(index) for index in sys.argv[2].split(",")]
if max(wanted) >= len(given):
    sys.exit(f"the plan uses {max(wanted) + 1} GPU(s) on this node; CUDA_VISIBLE_DEVICES gives {len(given)}: {sys.argv[1]}")
print(",".join(given[index] for index in wanted))
DEVICES
}
if [ "$NODE_RANK" -eq 0 ]; then
  TRAINER_GPUS="$(given_devices 0,1,2,3,4,5,6,7)"
  LOCAL_TRAINERS=8
else
  TRAINER_GPUS=
  LOCAL_TRAINERS=0
fi
# accelerate starts num_processes // num_machines trainers here: pass this node's count x machines.
CUDA_VISIBLE_DEVICES=$TRAINER_GPUS accelerate launch --config_file accelerate_config.yaml \
  --num_processes $((LOCAL_TRAINERS * NUM_MACHINES)) --num_machines "$NUM_MACHINES" \
  --machine_rank "$NODE_RANK" --main_process_ip "$MAIN_PROCESS_IP" \
  --main_process_port "$MAIN_PROCESS_PORT" \
  "${TRAINER[@]}"
