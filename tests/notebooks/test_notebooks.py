"""Notebooks run top to bottom on small data (their outputs are not stored in git), and their results
are right: each notebook ends with a `summary` dict, which the test reads back and checks. 05_paper
reads the paper experiments' results: its test makes their --quick runs first."""

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


def in_unit_interval(x) -> bool:
    return not (x < 0 or x > 1)  # NaN passes: a split of one class has no balanced accuracy


def check_paper(s):
    assert s["experiments"] == ["fig6", "scale", "table1", "table2"], s["experiments"]
    assert s["fig6"]["rows"] > 0 and "test_unknown" in s["fig6"]["splits"], s["fig6"]
    assert s["scale"]["scales"] == [0.7, 2.0], s["scale"]
    assert set(s["table1"]) == {f"{m} | {n}" for m in ("locc", "global_ocn") for n in (2, 4)}, s["table1"]
    for value in [*s["fig6"]["balanced_acc"], *s["scale"]["balanced_acc"], *s["table1"].values()]:
        assert in_unit_interval(value), s
    ours = s["table2"]["ours"]
    # Intersection-free contact within d̂: every event's closest pair is apart, by less than d̂.
    assert ours["events"] > 0 and ours["penetrating_fraction"] == 0, ours
    assert 0 < ours["average"] <= ours["top10_average"] <= ours["maximum"] < s["table2_dhat"], ours
    if "mujoco" in s["table2"]:
        mujoco = s["table2"]["mujoco"]
        assert mujoco["events"] > 0 and mujoco["average"] <= mujoco["top10_average"] <= mujoco["maximum"], mujoco


CHECKS = {"01_data.ipynb": check_data, "02_models.ipynb": check_models, "03_planning.ipynb": check_planning,
          "04_simulation.ipynb": check_simulation, "05_paper.ipynb": check_paper}
PAPER = "05_paper.ipynb"


def test_every_notebook_has_a_check():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(CHECKS)


def run_notebook(name: str) -> dict:
    """Execute notebook `name` top to bottom; its final `summary`."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nb.cells.append(new_code_cell("import json as _json\nprint(_json.dumps(summary))"))
    # execute() raises CellExecutionError on the first failing cell
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    printed = "".join(o.get("text", "") for o in nb.cells[-1].get("outputs", []) if o.output_type == "stream")
    return json.loads(printed)


@pytest.mark.parametrize("name", sorted(set(CHECKS) - {PAPER}))
def test_notebook_runs_and_its_results_hold(name, tiny_data, monkeypatch):
    monkeypatch.setenv("CONTACTNET_NOTEBOOK_DATA", str(tiny_data))  # the session's tiny dataset, not a new one
    monkeypatch.setenv("CONTACTNET_NOTEBOOK_EPOCHS", "40")  # 2 or 8 epochs: every prediction is "colliding"
    monkeypatch.setenv("CONTACTNET_NOTEBOOK_SIM_SECONDS", "0.15")
    CHECKS[name](run_notebook(name))


def test_paper_notebook_on_quick_results(tiny_data, tmp_path, monkeypatch):
    """05_paper on the four paper experiments' --quick runs, made here on the tiny data set (Fig. 6
    and scale without UCF-GJK, whose CoACD pass tests/baselines covers)."""
    pytest.importorskip("matplotlib")
    from benchmarks import paper_fig6, paper_scale, paper_table1, paper_table2

    root = str(tiny_data / "procedural_tiny")
    light = ["--gjk-thresholds", "--iscd-points", "8", "--device", "cpu", "--data-root", root]
    outputs = {"fig6": paper_fig6.main(["--quick", "--out-dir", str(tmp_path / "fig6"), *light]),
               "scale": paper_scale.main(["--quick", "--out-dir", str(tmp_path / "scale"), *light]),
               "table1": paper_table1.main(["--quick", "--data-dir", str(tiny_data), "--out-dir",
                                            str(tmp_path / "table1")]),
               "table2": paper_table2.main(["--quick", "--out-dir", str(tmp_path / "table2")])}
    for name, folder in outputs.items():
        monkeypatch.setenv(f"CONTACTNET_PAPER_{name.upper()}", str(folder))
    CHECKS[PAPER](run_notebook(PAPER))
