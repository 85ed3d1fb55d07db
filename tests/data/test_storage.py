"""Crash-safe files: whole or absent, and readable like any file the process writes."""

import json
import os
import stat

import numpy as np
import pytest
from filelock import Timeout

from contactnet.data.storage import atomic_write, folder_lock, save_npz_atomic, write_json_atomic


def test_atomic_files_get_the_umask_permissions_not_mkstemps(tmp_path):
    mask = os.umask(0o022)
    try:
        json_path = write_json_atomic(tmp_path / "a.json", {"x": 1})
        npz_path = save_npz_atomic(tmp_path / "b.npz", x=np.zeros(3))
    finally:
        os.umask(mask)
    for path in (json_path, npz_path):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644  # mkstemp alone would leave 0o600
    assert json.loads(json_path.read_text()) == {"x": 1}


def test_a_failed_write_leaves_nothing(tmp_path):
    def fail(tmp):
        open(tmp, "w").write("partial")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "c.txt", fail)
    assert list(tmp_path.iterdir()) == []


def test_folder_lock_admits_one_holder_at_a_time(tmp_path):
    with folder_lock(tmp_path / "set"):
        with pytest.raises(Timeout):  # another holder (another file description, as another process has)
            folder_lock(tmp_path / "set").acquire(timeout=0)
    with folder_lock(tmp_path / "set").acquire(timeout=0):
        pass
