"""The exact_match reward's last_number reading against the demo's reader, on samples no read here used.

The embedded SmolLM2 answers the addition task on the seeded generator's rows after the demo's first 200 (a + b
with a, b in 1..20, so prompts recur; the completions are new at a seed no probe or test here uses), 8 samples
each at temperature 1 and the probe's 32-token budget; each completion is judged by
the reward (``last_number``) and by ``skill.demo.reader.judge`` (its own reading: the last number written is the
sum). Prints the agreement and every completion they judge differently, as JSON.
Usage: python bench/last_number_against_reader.py [PROMPTS] [SEED]
"""

from __future__ import annotations

import json
import sys

from skill.data import addition_rows
from skill.demo.reader import judge
from skill.models.sources import EMBEDDED_MODEL_ID
from skill.rewards.answers import answers_equal, last_number
from skill.sampling.engines import sample_completions
from skill.sampling.schema import SamplingSettings

DEMO_ROWS = 200


def main(prompts: int = 64, seed: int = 20261208) -> dict:
    rows = addition_rows(DEMO_ROWS + prompts)[DEMO_ROWS:]
    settings = SamplingSettings(n=8, temperature=1.0, max_new_tokens=32, seed=seed)
    sampled = sample_completions(EMBEDDED_MODEL_ID, [row["prompt"] for row in rows], settings)
    differ = []
    total = 0
    for group in sampled.groups:
        answer = rows[group.prompt_index]["answer"]
        for completion in group.completions:
            total += 1
            read = last_number(completion)
            reward_pass = read is not None and answers_equal(read, answer)
            if reward_pass != (judge(completion, answer)["correctness"] == "pass"):
                differ.append({"completion": completion, "answer": answer, "last_number": read})
    return {"samples": total, "prompts": prompts, "seed": seed, "disagreements": len(differ), "differ": differ}


if __name__ == "__main__":
    print(json.dumps(main(*(int(arg) for arg in sys.argv[1:])), indent=1))
