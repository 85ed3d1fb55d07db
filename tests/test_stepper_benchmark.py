"""benchmarks.stepper's device rows (`--device cuda`), run on the CPU here: every mode's figures
reach the JSON, a mode that fails is reported in its row while the others still run, and
`--modes` / `--profile` time only the chosen steps and put the fixed step's costliest ops in the row."""

import argparse
import json

from benchmarks import stepper


def test_device_rows_report_each_mode_and_keep_going_past_a_failure(tmp_path, monkeypatch):
    real_run = stepper.Ours.run

    def run(self, steps):
        if self.sim.fixed_iterations is not None:
            raise MemoryError("out of memory (simulated)")
        return real_run(self, steps)

    monkeypatch.setattr(stepper.Ours, "run", run)
    out = tmp_path / "stepper.json"
    args = argparse.Namespace(quick=False, envs=[1, 2], steps=1, rounds=2, dt=0.01, scenes=["stack"], threads=None,
                              out=str(out), fixed_iterations=None, device="cpu", profile=0,
                              modes=list(stepper.DEVICE_MODES))
    stepper.gpu_main(args, device="cpu")
    rows = json.loads(out.read_text())["rows"]
    assert [r["envs"] for r in rows] == [1, 2]
    for row in rows:
        assert row["adaptive_env_steps_per_s"] > 0 and row["adaptive_newton_iterations"] >= 0
        assert row["fixed_error"].startswith("MemoryError") and "fixed_env_steps_per_s" not in row
        assert "graph_error" not in row  # no CUDA-graph mode without CUDA


def test_device_rows_carry_a_profile_of_the_fixed_step(tmp_path):
    out = tmp_path / "stepper.json"
    args = argparse.Namespace(quick=False, envs=[1], steps=1, rounds=1, dt=0.01, scenes=["stack"], threads=None,
                              out=str(out), fixed_iterations=2, device="cpu", profile=2, modes=["fixed"])
    stepper.gpu_main(args, device="cpu")
    (row,) = json.loads(out.read_text())["rows"]
    assert "fixed_env_steps_per_s" in row and not any(k.startswith("adaptive") for k in row)  # --modes fixed
    profile = row["profile"]
    assert 0 < len(profile) <= 15 and "profile_error" not in row
    times = [op["self_ms_per_step"] for op in profile]
    assert times == sorted(times, reverse=True) and times[0] > 0
    assert 0 < sum(op["share"] for op in profile) <= 1 + 1e-9
    assert all(op["calls_per_step"] > 0 for op in profile)
