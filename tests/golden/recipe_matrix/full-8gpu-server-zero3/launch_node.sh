#!/usr/bin/env bash
# Qwen/Qwen2.5-1.5B-Instruct (full), zero3: 7 trainer(s), vLLM on 1 GPU(s) of node 0. Written by grpo-rlvr.
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
python - 'vllm=grpo-rlvr[vllm]' 'trackio=grpo-rlvr[tracking]' 'deepspeed=grpo-rlvr[gpu]' <<'CHECK'
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
  TRAINER_GPUS="$(given_devices 1,2,3,4,5,6,7)"
  LOCAL_TRAINERS=7
else
  TRAINER_GPUS=
  LOCAL_TRAINERS=0
fi
if [ "$NODE_RANK" -eq 0 ]; then
  CUDA_VISIBLE_DEVICES="$(given_devices 0)" trl vllm-serve --model Qwen/Qwen2.5-1.5B-Instruct --tensor-parallel-size 1 --port $GRPO_RLVR_VLLM_PORT --max-model-len 768 > vllm_server.log 2>&1 &
  VLLM_PID=$!
  trap 'kill "$VLLM_PID" 2>/dev/null || true' EXIT
fi
# Every node waits for the server: rank 0 (node 0) syncs weights with it before the first step, and
# a slow model load must not outlast torchrun's rendezvous.
HEALTH=http://$MAIN_PROCESS_IP:$GRPO_RLVR_VLLM_PORT/health
WAITED=0
until python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' "$HEALTH" 2>/dev/null; do
  if [ -n "${VLLM_PID:-}" ] && ! kill -0 "$VLLM_PID" 2>/dev/null; then
    echo "vLLM server exited before it was healthy; last lines of vllm_server.log:" >&2
    tail -n 20 vllm_server.log >&2
    exit 3
  fi
  if [ "$WAITED" -ge "${VLLM_WAIT_S:-1800}" ]; then echo "no vLLM server at $HEALTH" >&2; exit 1; fi
  sleep 2; WAITED=$((WAITED + 2))
done
echo "vLLM server healthy at $HEALTH after ${WAITED} s"
if [ -z "${VLLM_PID:-}" ]; then
  # accelerate starts num_processes // num_machines trainers here: pass this node's count x machines.
  CUDA_VISIBLE_DEVICES=$TRAINER_GPUS accelerate launch --config_file accelerate_config.yaml \
    --num_processes $((LOCAL_TRAINERS * NUM_MACHINES)) --num_machines "$NUM_MACHINES" \
    --machine_rank "$NODE_RANK" --main_process_ip "$MAIN_PROCESS_IP" \
    --main_process_port "$MAIN_PROCESS_PORT" \
    "${TRAINER[@]}"
  exit $?
fi
# accelerate starts num_processes // num_machines trainers here: pass this node's count x machines.
CUDA_VISIBLE_DEVICES=$TRAINER_GPUS accelerate launch --config_file accelerate_config.yaml \
  --num_processes $((LOCAL_TRAINERS * NUM_MACHINES)) --num_machines "$NUM_MACHINES" \
  --machine_rank "$NODE_RANK" --main_process_ip "$MAIN_PROCESS_IP" \
  --main_process_port "$MAIN_PROCESS_PORT" \
  "${TRAINER[@]}" &
TRAIN_PID=$!
while kill -0 "$TRAIN_PID" 2>/dev/null && kill -0 "$VLLM_PID" 2>/dev/null; do sleep 2; done
if kill -0 "$TRAIN_PID" 2>/dev/null; then
  echo "vLLM server exited during training; last lines of vllm_server.log:" >&2; tail -n 20 vllm_server.log >&2
  kill "$TRAIN_PID" 2>/dev/null || true; wait "$TRAIN_PID" || true
  exit 3
fi
wait "$TRAIN_PID"
