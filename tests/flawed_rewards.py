"""Deliberately flawed reward functions: inspection must catch each one with a named flag."""

from __future__ import annotations

import re
import subprocess
import sys


def _text(completion) -> str:
    return completion[-1]["content"] if isinstance(completion, list) else completion


def lenient_format(prompts, completions, **kwargs):
    """Unanchored search: pays for empty tags, repeated blocks and trailing junk."""
    return [1.0 if re.search(r"<answer>.*</answer>", _text(c)) else 0.0 for c in completions]


def substring_match(prompts, completions, answer, **kwargs):
    """Gold answer anywhere in the text: pays for candidate lists."""
    return [1.0 if str(a) in _text(c) else 0.0 for c, a in zip(completions, answer, strict=True)]


def no_dotall_format(prompts, completions, **kwargs):
    """'.' stops at newlines: a multi-line reasoning section never matches."""
    return [1.0 if re.fullmatch(r"<think>.*</think>\n<answer>.+</answer>", _text(c)) else 0.0 for c in completions]


def one_on_exception(prompts, completions, answer, **kwargs):
    """Swallows errors as success."""
    scores = []
    for c, a in zip(completions, answer, strict=True):
        try:
            scores.append(1.0 if int(_text(c).strip()) == int(a) else 0.0)
        except ValueError:
            scores.append(1.0)
    return scores


def exit_code_grader(prompts, completions, tests, **kwargs):
    """Passes any program that exits 0: sys.exit(0) wins."""
    scores = []
    for c, _ in zip(completions, tests, strict=True):
        code = re.sub(r"^```\w*\n|```$", "", _text(c).strip(), flags=re.MULTILINE)
        run = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, timeout=10)
        scores.append(1.0 if run.returncode == 0 else 0.0)
    return scores


def colon_judge(prompts, completions, **kwargs):
    """A judge fooled by a master key: anything short with a colon reads as a confident answer."""
    return [1.0 if ":" in _text(c) and len(_text(c)) < 40 else 0.3 for c in completions]
