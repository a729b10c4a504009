"""The recipes and launch files of tests/recipe_matrix.py, byte for byte as committed in tests/golden/.

A change to what a user receives for any configuration shows here as a diff to read, not only as a changed
assertion elsewhere. Only this machine's facts are written as placeholders: the installed library versions a
recipe records and the Hub cache's path. After a change meant to alter recipes, rewrite the files with
``GRPO_RLVR_WRITE_GOLDEN=1 pytest tests/test_recipe_golden.py`` and read the diff before committing it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from recipe_matrix import CONFIGURATIONS, rendered_files

from skill.recipe.checking.trl_contract import installed_versions
from skill.recipe.launching.launch import SCRIPT_FILE, launch_files
from skill.recipe.launching.script import render_script
from skill.recipe.schema import load_recipe

GOLDEN = Path(__file__).parent / "golden" / "recipe_matrix"
WRITE_ENV = "GRPO_RLVR_WRITE_GOLDEN"


def _placeholders(text: str) -> str:
    for package, version in installed_versions().items():
        text = text.replace(f'"{package}_version": "{version}"', f'"{package}_version": "<installed {package}>"')
        text = text.replace(f"{package} {version}", f"{package} <installed {package}>")
        text = text.replace(f"installed {version}", f"installed <installed {package}>")
    return re.sub(r"Hub cache \([^)]*\)", "Hub cache (<HF cache>)", text)


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=lambda configuration: configuration.name)
def test_recipe_files_match_the_golden_files(configuration):
    files = {name: _placeholders(text) for name, text in rendered_files(configuration).items()}
    directory = GOLDEN / configuration.name
    if os.environ.get(WRITE_ENV):
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.iterdir():
            stale.unlink()
        for name, text in files.items():
            (directory / name).write_text(text)
    committed = {path.name: path.read_text() for path in sorted(directory.iterdir())} if directory.is_dir() else {}
    assert sorted(files) == sorted(committed), f"{configuration.name}: files differ from {directory}"
    for name, text in files.items():
        assert text == committed[name], f"{configuration.name}/{name} differs from its golden file"


def test_every_golden_directory_is_a_configuration():
    assert sorted(path.name for path in GOLDEN.iterdir()) == sorted(c.name for c in CONFIGURATIONS)


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=lambda configuration: configuration.name)
def test_a_committed_recipe_file_loads_and_renders_its_committed_files(configuration):
    """A recipe.json as an earlier version wrote it (the golden one) is read by today's loader and renders the same
    script and launch files: a user's saved recipe keeps working across these changes."""
    directory = GOLDEN / configuration.name
    recipe = load_recipe(directory / "recipe.json")
    files = {SCRIPT_FILE: render_script(recipe)}
    if configuration.gpus_per_node * configuration.nodes > 1:
        files = launch_files(recipe, configuration.sharding).files
    for name, text in files.items():
        assert _placeholders(text) == (directory / name).read_text(), f"{configuration.name}/{name}"
