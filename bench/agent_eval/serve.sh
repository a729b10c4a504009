#!/usr/bin/env bash
# Start the server one evaluated agent talks to: its own state root, streamable HTTP on 127.0.0.1:PORT.
# The user-reward task's module (data/my_rewards.py) is importable and allowlisted, as a user would set it up.
set -euo pipefail
id=$1
port=$2
here=$(cd "$(dirname "$0")" && pwd)
root=${AGENT_EVAL_ROOT:-/tmp/grpo-agent-eval}/$id
mkdir -p "$root"
GRPO_RLVR_HOME="$root/state" PYTHONPATH="$here/data" GRPO_RLVR_REWARD_MODULES=my_rewards \
  nohup "$here/../../.venv/bin/grpo-rlvr" serve --http --port "$port" >"$root/server.log" 2>&1 &
echo "$id: http://127.0.0.1:$port/mcp (state $root/state, log $root/server.log)"
