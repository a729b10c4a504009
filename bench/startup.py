"""Server cold start: `grpo-rlvr serve` (stdio) to the first tools/list answer, against
`python -c "import mcp.server"` on the same machine, interleaved, medians over repeats.

Run: python bench/startup.py [--repeats N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time

from mcp import Client, StdioServerParameters


def time_import_mcp() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import mcp.server"], check=True)
    return time.perf_counter() - start


async def _first_tools_list() -> float:
    params = StdioServerParameters(command=sys.executable, args=["-m", "server.cli", "serve"])
    start = time.perf_counter()
    async with Client(params) as client:
        await client.list_tools()
        elapsed = time.perf_counter() - start
    return elapsed


def time_server_start() -> float:
    return asyncio.run(_first_tools_list())


def measure(repeats: int) -> dict[str, float]:
    """Medians and spreads (max - min) in seconds, and the ratio of the medians."""
    reference, server = [], []
    time_import_mcp()  # warm the page cache for both
    for _ in range(repeats):
        reference.append(time_import_mcp())
        server.append(time_server_start())
    return {
        "import_mcp_median_s": statistics.median(reference),
        "import_mcp_spread_s": max(reference) - min(reference),
        "serve_to_tools_list_median_s": statistics.median(server),
        "serve_to_tools_list_spread_s": max(server) - min(server),
        "ratio": statistics.median(server) / statistics.median(reference),
        "target_ratio": 1.5,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    for key, value in measure(args.repeats).items():
        print(f"{key}: {value:.3f}")


if __name__ == "__main__":
    main()
