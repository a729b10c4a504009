"""Paths a caller names relative to where it stands, made absolute before any other process reads them.

A run's worker runs in its run directory and a reward scorer in a fresh interpreter: a model directory, a data
file, a ``PYTHONPATH`` entry (``PYTHONPATH=.``) or a ``GRPO_RLVR_HOME`` named relative to the caller's folder would
name other folders there. So a request's local model directory or data file is made absolute when the request is
read (``absolute_if_local``), and every process the project starts gets the parent's import path and state root,
absolute (``child_environment``): the same modules (a user's reward module beside them included), the same runs.
Owns: ``absolute_if_local``, ``LocalOrNamed`` (the field type of such names), ``child_environment``. May import:
``state``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

from skill.state import STATE_ROOT_ENV, state_root


def absolute_if_local(name: str) -> str:
    """A name that is a local file or directory here, as an absolute path; any other name (a hub id, an embedded
    id, a path not there) as sent. A hub id that is also a local folder's name is the folder, as ``from_pretrained``
    and ``load_dataset`` read it.

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(folder, "my-model"))
    >>> here = os.getcwd(); os.chdir(folder)
    >>> absolute_if_local("my-model") == os.path.join(os.path.realpath(folder), "my-model")
    True
    >>> absolute_if_local("Qwen/Qwen2.5-0.5B-Instruct"), absolute_if_local("embedded:addition")
    ('Qwen/Qwen2.5-0.5B-Instruct', 'embedded:addition')
    >>> os.chdir(here)
    """
    path = Path(name).expanduser()
    if not name or not path.exists():
        return name
    return str(path.absolute())


LocalOrNamed = Annotated[str, AfterValidator(absolute_if_local)]
"""A request's model or dataset name: made absolute when it is a local path (``absolute_if_local``)."""


def child_environment() -> dict[str, str]:
    """This environment, with ``PYTHONPATH`` as this interpreter's whole import path and the state root, both
    absolute.

    >>> environment = child_environment()
    >>> all(os.path.isabs(entry) for entry in environment["PYTHONPATH"].split(os.pathsep))
    True
    >>> os.path.isabs(environment["GRPO_RLVR_HOME"])
    True
    """
    import_path = os.pathsep.join(os.path.abspath(entry or os.curdir) for entry in sys.path)
    return {**os.environ, "PYTHONPATH": import_path, STATE_ROOT_ENV: str(state_root())}
