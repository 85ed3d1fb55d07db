"""Crash-safe files for datasets: every file is written to a temporary name in the same folder and
renamed into place, so a reader (or a resumed run) sees either the whole file or none of it; and a
lock for work that many processes (or machines sharing the folder) should do once."""

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from filelock import FileLock


def _umask() -> int:
    mask = os.umask(0)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return mask


def atomic_write(path: str | Path, write: Callable[[str], None]) -> Path:
    """Call `write(tmp_path)`, then rename tmp_path to `path` (atomic on POSIX). The file gets the
    permissions a plain open() would give it (mkstemp's are owner-only)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def save_npz_atomic(path: str | Path, **arrays: np.ndarray) -> Path:
    def write(tmp):
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)

    return atomic_write(path, write)


def as_json(payload):
    """`payload` as a JSON file holds it (tuples become lists), to compare with one read back."""
    return json.loads(json.dumps(payload))


def write_json_atomic(path: str | Path, payload: dict) -> Path:
    return atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(payload, indent=2)))


def folder_lock(folder: str | Path) -> FileLock:
    """An exclusive lock on `folder` (the file `.lock` in it), held across processes and machines
    that share the folder (flock; filelock falls back to an exclusive-create lock where the file
    system has no flock). The kernel drops it when its holder dies, so a crashed job blocks no
    one. Use: `with folder_lock(path): ...`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(folder / ".lock")
