"""The MCP flow as an agent sees it: tools/list size, the largest result of the standard flow and the longest
blocking call, from the scripted-agent flows of tests/test_mcp_agent_flow.py run over stdio.

Run: python bench/agent_flow.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from server.tool_schemas import TOOLS_LIST_CHARACTERS

REPOSITORY = Path(__file__).resolve().parent.parent
RESULT_TARGET = 12_000
BLOCKING_TARGET_S = 60.0


def measure() -> dict:
    """Run the three task flows (not the cancellation test) and summarise every call they made."""
    with tempfile.TemporaryDirectory(prefix="grpo-agent-flow-") as scratch:
        transcripts = Path(scratch) / "transcripts.jsonl"
        environment = {**os.environ, "GRPO_RLVR_AGENT_FLOW_TRANSCRIPTS": str(transcripts)}
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "not probe",
            "tests/test_mcp_agent_flow.py",
        ]
        finished = subprocess.run(command, cwd=REPOSITORY, env=environment, capture_output=True, text=True)
        flows = [json.loads(line) for line in transcripts.read_text().splitlines()] if transcripts.exists() else []
    if finished.returncode != 0 or not flows:
        raise RuntimeError(f"the agent flows failed: {finished.stdout[-2000:]}")
    calls = [(flow["flow"], *call) for flow in flows for call in flow["calls"]]
    listed = max(call[3] for call in calls if call[1] == "tools/list")
    results = [call for call in calls if call[1] != "tools/list"]
    largest = max(results, key=lambda call: max(call[3], call[4]))
    longest = max(results, key=lambda call: call[2])
    size = max(largest[3], largest[4])
    load = os.getloadavg()[0]
    return {
        "flows": len(flows),
        "calls": len(results),
        "rows": [
            {
                "figure": "tools/list (characters)",
                "value": f"{listed:,}",
                "target": f"<= {TOOLS_LIST_CHARACTERS:,}",
                "met": "yes" if listed <= TOOLS_LIST_CHARACTERS else "no",
            },
            {
                "figure": f"largest result of the flow ({largest[1]}, {largest[0]})",
                "value": f"{size:,} characters",
                "target": f"<= {RESULT_TARGET:,}",
                "met": "yes" if size <= RESULT_TARGET else "no",
            },
            {
                "figure": f"longest blocking call ({longest[1]}, {longest[0]}; load average {load:.1f} on "
                f"{os.cpu_count()} cores)",
                "value": f"{longest[2]:.1f} s",
                "target": f"<= {BLOCKING_TARGET_S:.0f} s",
                "met": "yes" if longest[2] <= BLOCKING_TARGET_S else "no",
            },
        ],
    }


if __name__ == "__main__":
    print(json.dumps(measure(), indent=1))
