"""Table I (benchmarks/paper_table1.py): the rows' objects, and the table collected from each
cell's metrics.json (fake ones here: the training itself runs in the notebook test's quick run)."""

import json
from collections import Counter

import pytest

from benchmarks import paper_table1
from benchmarks.paper_table1 import cell_row, pick_objects


def test_rows_spread_their_objects_over_the_families_and_nest():
    families = [f for f in "abcdefghijkl" for _ in range(10)]  # stored family by family, as the data sets are
    known = list(range(len(families)))
    five = pick_objects(known, families, 5, seed=0)
    assert len({families[i] for i in five}) == 5
    hundred = pick_objects(known, families, 100, seed=0)
    assert len(set(hundred)) == 100 and max(Counter(families[i] for i in hundred).values()) <= 9
    assert pick_objects(known, families, 20, seed=0)[:5] == five  # smaller rows' objects are among larger rows'
    assert pick_objects(known, families, 5, seed=1) != five
    with pytest.raises(ValueError, match="count: expected 1..120"):
        pick_objects(known, families, 121, seed=0)


def report(balanced_acc: float) -> dict:
    return {"balanced_acc": balanced_acc, "acc": balanced_acc - 0.05, "tpr": 1.0, "tnr": 0.5, "n": 100,
            "ap": 0.9, "bands": {}}


def fake_run(out, model: str, count: int, seed: int, uniform: float, boundary: float, known: float = 0.99):
    run = out / "runs" / f"{model}_n{count}_s{seed}"
    run.mkdir(parents=True)
    reports = {"test_known": report(known), "test_unknown": report(uniform), "boundary_unknown": report(boundary),
               "nested_unknown": report(0.1)}
    (run / "metrics.json").write_text(json.dumps({"metrics": {}, "reports": reports}))


# (model, objects) -> uniform balanced accuracy of seeds 0 and 1; boundary is 0.1 lower
UNIFORM = {("locc", 5): (0.7, 0.9), ("locc", 20): (0.9, 0.9), ("global_ocn", 5): (0.6, 0.6),
           ("global_ocn", 20): (0.8, 0.82)}


def test_table_collects_every_cells_metrics(tmp_path):
    out = tmp_path / "table1"
    for (model, count), values in UNIFORM.items():
        for seed, value in enumerate(values):
            fake_run(out, model, count, seed, value, value - 0.1)
    argv = ["--quick", "--out-dir", str(out), "--counts", "5", "20", "--seeds", "0", "1",
            "--data-dir", str(tmp_path / "no_data")]  # every cell has its metrics: no data set is read
    paper_table1.main(argv)
    results = json.loads((out / "results.json").read_text())
    assert len(results["rows"]) == 8 and results["paper"]["locc"]["5"] == [0.77, 0.02]
    summary = {(s["model"], s["objects"]): s for s in paper_table1.summarize(results["rows"])}
    mean, std = summary[("locc", 5)]["test_unknown/balanced_acc"]
    assert mean == pytest.approx(0.8) and std == pytest.approx(0.1414, abs=1e-4)  # sample std of the seeds
    assert summary[("global_ocn", 20)]["boundary_unknown/balanced_acc"][0] == pytest.approx(0.71)
    assert summary[("locc", 20)]["test_known/balanced_acc"] == pytest.approx((0.99, 0.0))
    assert summary[("global_ocn", 5)]["test_unknown/acc"][0] == pytest.approx(0.55)
    table = (out / "results.md").read_text()
    assert "| locc | 0.800 ± 0.141 | 0.900 |" in table  # uniform section, 5 and 20 objects
    assert "| global_ocn | 0.500 | 0.710 ± 0.014 |" in table  # boundary section
    assert "| paper: locc | 0.770 ± 0.020 | 0.900 ± 0.020 | 0.930 ± 0.010 | 0.930 ± 0.010 |" in table
    assert (out / "results.png").stat().st_size > 0
    # A rerun finds every cell in the record; other training data in the same folder is refused.
    paper_table1.main(argv)
    assert len(json.loads((out / "results.json").read_text())["rows"]) == 8
    with pytest.raises(SystemExit, match="epochs: 1 there, 2 now"):
        paper_table1.main(argv + ["--epochs", "2"])


def test_cell_row_needs_a_finished_run_with_every_split(tmp_path):
    with pytest.raises(FileNotFoundError, match="run_dir"):
        cell_row(tmp_path / "missing")
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"reports": {"test_unknown": report(0.9)}}))
    with pytest.raises(ValueError, match="boundary_unknown"):
        cell_row(run)


def test_bad_counts_and_sizes_are_refused():
    with pytest.raises(SystemExit, match="--counts"):
        paper_table1.parse_args(["--counts", "0"])
    with pytest.raises(SystemExit, match="--train-pairs"):
        paper_table1.parse_args(["--train-pairs", "-1"])
