"""Notebooks run top to bottom on small data (their outputs are not stored in git), and their results
are right: each notebook ends with a `summary` dict, which the test reads back and checks."""

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def check_data(s):
    for split, rate in s["positive_rate"].items():
        lo, hi = s["positive_rate_band"][split]
        assert lo <= rate <= hi, f"{split}: positive rate {rate} outside its band [{lo}, {hi}]"
    assert 0 < s["positive_rate"]["train"] < 1  # both classes to learn from


def check_models(s):
    assert s["accuracy"], "no test split was evaluated"
    for split, acc in s["accuracy"].items():
        majority = s["majority_accuracy"][split]
        assert acc > majority, f"{split}: accuracy {acc} <= majority baseline {majority}"


def check_planning(s):
    assert s["free_after"] > s["free_before"], s
    assert s["chosen"] is not None and s["chosen_collides"] is False, s
    if s.get("panda_final_cost") is not None:  # the Panda section runs where a robosuite wheel is cached
        assert s["panda_collides"] is False and s["panda_path_collides"] is False, s
        assert s["panda_goal_error"] < 0.02, s  # the fingertip reaches its target between the objects


def check_simulation(s):
    assert s["steps"] > 0 and s["colliding_steps"] == 0, s
    assert s["exact_min_distance"] > 0, s


CHECKS = {"01_data.ipynb": check_data, "02_models.ipynb": check_models, "03_planning.ipynb": check_planning,
          "04_simulation.ipynb": check_simulation}


def test_every_notebook_has_a_check():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_notebook_runs_and_its_results_hold(name, tiny_data, monkeypatch):
    monkeypatch.setenv("CONTACTNET_NOTEBOOK_DATA", str(tiny_data))  # the session's tiny dataset, not a new one
    monkeypatch.setenv("CONTACTNET_NOTEBOOK_EPOCHS", "40")  # 2 or 8 epochs: every prediction is "colliding"
    monkeypatch.setenv("CONTACTNET_NOTEBOOK_SIM_SECONDS", "0.15")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nb.cells.append(new_code_cell("import json as _json\nprint(_json.dumps(summary))"))
    # execute() raises CellExecutionError on the first failing cell
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    printed = "".join(o.get("text", "") for o in nb.cells[-1].get("outputs", []) if o.output_type == "stream")
    CHECKS[name](json.loads(printed))
