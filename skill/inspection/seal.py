"""The seal: what an inspection must not show before the labels, kept where no file read finds it.

Scores, extracted answers, errors, statistics and the hack probes' figures are computed once, in the scoring
process (judge and sandbox scores are not deterministic: they are never recomputed), and the whole report is
kept encrypted (Fernet: AES-128-CBC with an HMAC) as ``inspections/<id>.sealed``. What a reader may see now is
written in the clear beside it (``<id>.json``, ``.md``, ``.html``), and grows as labels reveal samples. The key
is ``inspections/.seal-key`` (mode 0600), created on first use.

Resists: labelling from the report file, a grep of the state root, the reading page's source. Not resisted: a
program that reads the key and decrypts on purpose, which is as deliberate as labelling by running the reward
(the read's rule says so of that reader too). Owns: ``seal``, ``unseal``. May import: ``state``.
"""

from __future__ import annotations

import os
from pathlib import Path

from skill.state import exclusive_lock, write_atomically

KEY_FILE = ".seal-key"


def _key(directory: Path) -> bytes:
    from cryptography.fernet import Fernet

    path = directory / KEY_FILE
    with exclusive_lock(directory / ".seal.lock"):  # two first writers must not make two keys
        if not path.is_file():
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as out:
                out.write(Fernet.generate_key())
    return path.read_bytes().strip()


def seal(path: Path, text: str) -> None:
    """Write ``text`` encrypted to ``path`` (atomically), with the key of ``path``'s directory.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "r.sealed"
    >>> seal(target, "score 0.7316"); "0.7316" in target.read_text(), unseal(target)
    (False, 'score 0.7316')
    """
    from cryptography.fernet import Fernet

    write_atomically(path, Fernet(_key(path.parent)).encrypt(text.encode()).decode("ascii"))


def unseal(path: Path) -> str:
    """The text ``seal`` wrote to ``path``."""
    from cryptography.fernet import Fernet, InvalidToken

    try:
        return Fernet(_key(path.parent)).decrypt(path.read_bytes()).decode()
    except InvalidToken as exc:
        raise ValueError(f"{path} is not sealed with this state root's key ({path.parent / KEY_FILE})") from exc
