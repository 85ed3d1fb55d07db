"""Collision metrics against hand-computed examples: balanced accuracy, per-band accuracy, AP, ECE."""

import math

import pytest
import torch
from torchmetrics.functional.classification import binary_average_precision, binary_calibration_error

from contactnet.training.metrics import BANDS, collision_report, flat_metrics, format_reports


def test_report_on_a_hand_computed_example():
    # 8 queries: signed distance, exact label, predicted probability.
    sd = torch.tensor([-0.05, -0.005, -0.0005, 0.0005, 0.0005, 0.005, 0.02, 0.03])
    label = torch.tensor([1, 1, 1, 0, 0, 0, 0, 0])
    prob = torch.tensor([0.9, 0.2, 0.7, 0.6, 0.1, 0.4, 0.3, 0.05])
    r = collision_report(prob, label, sd)
    # Predictions: 1 0 1 1 0 0 0 0 -> TP 2 of 3, TN 4 of 5.
    assert r["tpr"] == pytest.approx(2 / 3) and r["tnr"] == pytest.approx(4 / 5)
    assert r["balanced_acc"] == pytest.approx((2 / 3 + 4 / 5) / 2) and r["acc"] == pytest.approx(6 / 8)
    assert r["n"] == 8 and r["positive_rate"] == pytest.approx(3 / 8)
    bands = r["bands"]
    assert list(bands) == [name for name, _, _ in BANDS]
    assert bands["< -1 cm"] == {"n": 1, "positive_rate": 1.0, "acc": 1.0, "balanced_acc": pytest.approx(math.nan, nan_ok=True)}
    assert bands["-1 cm..-1 mm"]["n"] == 1 and bands["-1 cm..-1 mm"]["acc"] == 0.0
    # ±1 mm: one colliding (right), two free (one wrong): balanced (1 + 1/2) / 2.
    assert bands["±1 mm"]["n"] == 3 and bands["±1 mm"]["acc"] == pytest.approx(2 / 3)
    assert bands["±1 mm"]["balanced_acc"] == pytest.approx(0.75)
    assert bands["1 mm..1 cm"]["acc"] == 1.0 and bands["> 1 cm"]["n"] == 2
    # AP and ECE agree with torchmetrics on these distinct scores.
    assert r["ap"] == pytest.approx(float(binary_average_precision(prob, label)), abs=1e-6)
    assert r["ece"] == pytest.approx(float(binary_calibration_error(prob, label, n_bins=10)), abs=1e-6)


def test_band_edges_are_half_open():
    sd = torch.tensor([-0.01, -0.001, 0.001, 0.01], dtype=torch.float64)
    r = collision_report(torch.full((4,), 0.9), torch.ones(4), sd)
    assert [b["n"] for b in r["bands"].values()] == [0, 1, 1, 1, 1]


def test_flat_metrics_and_table():
    r = collision_report(torch.tensor([0.9, 0.1]), torch.tensor([1, 0]), torch.tensor([-0.02, 0.02]))
    flat = flat_metrics({"boundary_unknown": r})
    assert flat["boundary_unknown/balanced_acc"] == 1.0 and flat["boundary_unknown/band < -1 cm/acc"] == 1.0
    table = format_reports({"boundary_unknown": r})
    assert "boundary_unknown" in table and "±1 mm" in table


def test_mismatched_sizes_are_a_clear_error():
    with pytest.raises(ValueError, match="prob, label, signed_distance: expected equal sizes"):
        collision_report(torch.zeros(3), torch.zeros(3), torch.zeros(2))
