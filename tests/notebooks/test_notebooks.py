"""Notebooks run top to bottom on small data (their outputs are not stored in git)."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")))
def test_notebook_runs(name, tmp_path, monkeypatch):
    monkeypatch.setenv("CONTACTNET_NOTEBOOK_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("CONTACTNET_NOTEBOOK_EPOCHS", "2")
    monkeypatch.setenv("CONTACTNET_NOTEBOOK_SIM_SECONDS", "0.15")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
