"""Calls per task from the evaluated agents' transcripts (transcripts/<task>.jsonl, one line per client command):
commands, tool calls, errors the server returned (and, apart, the client's own: a broken pipe when the agent's shell
closed the output early), invalid calls repeated verbatim, the largest tool result (the 12,000-character limit
applies to those), the largest resource read, and the longest call.

Run: python bench/agent_eval/summarise.py   (prints a Markdown table)
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULT_LIMIT = 12_000  # characters a tool result may take (tests/test_mcp_agent_flow.py's RESULT_CHARACTERS)


def summary(path: Path) -> dict:
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    calls = [e for e in entries if e.get("command") == "call"]
    errors = [e for e in entries if e.get("is_error")]  # the server's; the client's own (a broken pipe) aside
    seen, repeated = set(), 0
    for entry in errors:
        key = json.dumps([entry.get("command"), entry.get("args")])
        repeated += key in seen
        seen.add(key)
    reads = [e for e in entries if e.get("command") == "read"]
    return {
        "task": path.stem,
        "commands": len(entries),
        "tool_calls": len(calls),
        "errors": len(errors),
        "client_errors": sum(bool(e.get("harness_error")) for e in entries),
        "repeated_invalid": repeated,
        "largest_result": max((e.get("result_chars", 0) for e in calls), default=0),
        "largest_read": max((e.get("result_chars", 0) for e in reads), default=0),
        "longest_call_s": max((e.get("seconds", 0.0) for e in calls), default=0.0),
        "tools": sorted({e["args"][0] for e in calls if e.get("args")}),
    }


def main() -> None:
    rows = [summary(path) for path in sorted((HERE / "transcripts").glob("*.jsonl"))]
    print(
        "| task | commands | tool calls | errors | invalid repeated | largest tool result (chars) "
        "| largest resource read | longest call (s) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        over = " (over the limit)" if row["largest_result"] > RESULT_LIMIT else ""
        print(
            f"| {row['task']} | {row['commands']} | {row['tool_calls']} | {row['errors']} | {row['repeated_invalid']} "
            f"| {row['largest_result']:,}{over} | {row['largest_read']:,} | {row['longest_call_s']:.0f} |"
        )


if __name__ == "__main__":
    main()
