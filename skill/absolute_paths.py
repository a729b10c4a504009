"""Paths a caller names relative to where it stands, made absolute before any other process reads them.

A run's worker runs in its run directory and a reward scorer in a fresh interpreter: a model directory, a data
file, a ``PYTHONPATH`` entry (``PYTHONPATH=.``) or a ``GRPO_RLVR_HOME`` named relative to the caller's folder would
name other folders there. So a request's local model directory or data file is made absolute when the request is
read (``absolute_if_local``), and every process the project starts gets the parent's import path and state root,
absolute (``child_environment``): the project and a user's reward modules where they were, the same runs.
Owns: ``absolute_if_local``, ``LocalOrNamed`` and ``LocalModelOrNamed`` (the field types of such names),
``child_environment``. May import: ``state``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

from skill.state import STATE_ROOT_ENV, state_root

PROJECT_ROOT = str(Path(__file__).resolve().parents[1])  # where ``skill`` and ``server`` are imported from
REWARD_PATHS_ENV = "GRPO_RLVR_REWARD_PATHS"  # the folders user reward modules may lie in (read by ``rewards.registry``)


def absolute_if_local(name: str, directories_only: bool = False) -> str:
    """A name that is a local file or directory here (a directory only, with ``directories_only``), as an absolute
    path; any other name (a hub id, an embedded id, a path not there or not readable) as sent. A hub id that is
    also a local folder's name is the folder, as ``from_pretrained`` and ``load_dataset`` read it.

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(folder, "my-model"))
    >>> here = os.getcwd(); os.chdir(folder)
    >>> absolute_if_local("my-model") == os.path.join(os.path.realpath(folder), "my-model")
    True
    >>> absolute_if_local("Qwen/Qwen2.5-0.5B-Instruct"), absolute_if_local("embedded:addition")
    ('Qwen/Qwen2.5-0.5B-Instruct', 'embedded:addition')
    >>> absolute_if_local("x" * 300) == "x" * 300  # too long a file name: not a local path, not an error
    True
    >>> os.chdir(here)
    """
    path = Path(name).expanduser()
    try:
        local = path.is_dir() if directories_only else path.exists()
    except (OSError, ValueError):  # too long, unreadable, a NUL: no local path; whatever reads it says what is wrong
        return name
    return str(path.absolute()) if name and local else name


def _absolute_model(name: str) -> str:
    return absolute_if_local(name, directories_only=True)  # a model is a directory; a file named like a hub id is not


LocalOrNamed = Annotated[str, AfterValidator(absolute_if_local)]
"""A request's dataset name: made absolute when it is a local path (``absolute_if_local``)."""
LocalModelOrNamed = Annotated[str, AfterValidator(_absolute_model)]
"""A request's model name: made absolute when it is a local directory."""


def _absolute_entries(value: str) -> str:
    return os.pathsep.join(os.path.abspath(entry) for entry in value.split(os.pathsep) if entry)


def child_environment(whole_import_path: bool = False) -> dict[str, str]:
    """This environment, with the state root absolute, and ``PYTHONPATH`` and ``GRPO_RLVR_REWARD_PATHS`` entries
    absolute. ``PYTHONPATH`` starts with the project's import root (a run's launcher and ranks, maybe under another
    environment on a cluster's nodes, get no more of this interpreter's path); ``whole_import_path``: this
    interpreter's whole import path instead, for a child of the same interpreter that must import exactly what
    this process imports (the reward scorer).

    >>> environment = child_environment()
    >>> all(os.path.isabs(entry) for entry in environment["PYTHONPATH"].split(os.pathsep))
    True
    >>> environment["PYTHONPATH"].split(os.pathsep)[0] == PROJECT_ROOT, os.path.isabs(environment["GRPO_RLVR_HOME"])
    (True, True)
    """
    if whole_import_path:
        import_path = os.pathsep.join(os.path.abspath(entry or os.curdir) for entry in sys.path)
    else:
        import_path = os.pathsep.join(filter(None, [PROJECT_ROOT, _absolute_entries(os.environ.get("PYTHONPATH", ""))]))
    environment = {**os.environ, "PYTHONPATH": import_path, STATE_ROOT_ENV: str(state_root())}
    if os.environ.get(REWARD_PATHS_ENV):
        environment[REWARD_PATHS_ENV] = _absolute_entries(os.environ[REWARD_PATHS_ENV])
    return environment
