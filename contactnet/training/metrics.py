"""Collision metrics per split and per band of true signed distance.

Plain accuracy hides misses when one class dominates (uniform pairs are mostly free), so every
report leads with balanced accuracy, the mean of TPR and TNR. Per band of the stored signed
distance (exact when separated, the bisected lower bound when penetrating) it gives the count, the
positive rate and the accuracy: inside a band one class often dominates (everything below -1 cm
collides), so a band's balanced accuracy is reported only where both classes occur.
"""

import math

import torch

# (name, low, high) in metres: low <= signed distance < high.
BANDS = (
    ("< -1 cm", -math.inf, -0.01),
    ("-1 cm..-1 mm", -0.01, -0.001),
    ("±1 mm", -0.001, 0.001),
    ("1 mm..1 cm", 0.001, 0.01),
    ("> 1 cm", 0.01, math.inf),
)


def _rates(pred: torch.Tensor, label: torch.Tensor) -> dict[str, float]:
    pos, neg = label.sum().item(), (~label).sum().item()
    tpr = (pred & label).sum().item() / pos if pos else math.nan
    tnr = (~pred & ~label).sum().item() / neg if neg else math.nan
    return {"acc": (pred == label).float().mean().item() if label.numel() else math.nan,
            "balanced_acc": (tpr + tnr) / 2, "tpr": tpr, "tnr": tnr}


def average_precision(prob: torch.Tensor, label: torch.Tensor) -> float:
    """Average precision: the mean, over the positives, of the precision at each positive's rank
    (scores sorted descending; equal scores keep their input order)."""
    if not bool(label.any()):
        return math.nan
    order = prob.argsort(descending=True, stable=True)
    hits = label[order].double()
    precision = hits.cumsum(0) / torch.arange(1, len(hits) + 1, dtype=torch.float64)
    return float((precision * hits).sum() / hits.sum())


def calibration_error(prob: torch.Tensor, label: torch.Tensor, bins: int = 10) -> float:
    """Expected calibration error of the predicted class's confidence, `bins` equal-width bins."""
    confidence = torch.where(prob >= 0.5, prob, 1 - prob)
    correct = ((prob >= 0.5) == label).double()
    index = ((confidence - 0.5) * 2 * bins).long().clamp(0, bins - 1)
    gap = torch.zeros(bins, dtype=torch.float64).index_add_(0, index, confidence.double() - correct)
    return float(gap.abs().sum() / max(len(prob), 1))


def collision_report(prob: torch.Tensor, label: torch.Tensor, signed_distance: torch.Tensor) -> dict:
    """prob (Q,) predicted collision probabilities, label (Q,) exact labels (bool or 0/1), signed
    distance (Q,) metres -> {acc, balanced_acc, tpr, tnr, ap, ece, n, positive_rate, bands: {name:
    {n, positive_rate, acc, balanced_acc}}}; NaN where a quantity is undefined."""
    prob, label = prob.detach().flatten().cpu().double(), label.detach().flatten().cpu().bool()
    sd = signed_distance.detach().flatten().cpu().double()
    if not prob.shape == label.shape == sd.shape:
        raise ValueError(f"prob, label, signed_distance: expected equal sizes, got {prob.numel()}, "
                         f"{label.numel()}, {sd.numel()}")
    pred = prob >= 0.5
    report = {**_rates(pred, label), "ap": average_precision(prob, label), "ece": calibration_error(prob, label),
              "n": int(label.numel()), "positive_rate": label.double().mean().item() if label.numel() else math.nan}
    report["bands"] = {}
    for name, lo, hi in BANDS:
        inside = (sd >= lo) & (sd < hi)
        rates = _rates(pred[inside], label[inside])
        report["bands"][name] = {"n": int(inside.sum()), "positive_rate": label[inside].double().mean().item()
                                 if inside.any() else math.nan, "acc": rates["acc"], "balanced_acc": rates["balanced_acc"]}
    return report


def flat_metrics(reports: dict[str, dict]) -> dict[str, float]:
    """{split: report} -> {"split/metric": value, "split/band <name>/acc": value, ...} for loggers."""
    out = {}
    for split, report in reports.items():
        for key, value in report.items():
            if key == "bands":
                for band, stats in value.items():
                    out[f"{split}/band {band}/acc"] = stats["acc"]
            elif isinstance(value, dict):
                out.update({f"{split}/{key}/{k}": float(v) for k, v in value.items()})
            else:
                out[f"{split}/{key}"] = float(value)
    return out


def format_reports(reports: dict[str, dict], baselines: dict[str, dict] | None = None) -> str:
    """A plain-text table: one row per split (balanced accuracy first), then the accuracy per band."""
    head = f"{'split':18s} {'bal.acc':>7s} {'acc':>6s} {'TPR':>6s} {'TNR':>6s} {'AP':>6s} {'ECE':>6s} {'n':>7s}"
    if baselines:
        head += "   baselines (bal.acc): boxes-overlap"
    lines = [head]
    for split, r in reports.items():
        line = (f"{split:18s} {r['balanced_acc']:7.3f} {r['acc']:6.3f} {r['tpr']:6.3f} {r['tnr']:6.3f} "
                f"{r['ap']:6.3f} {r['ece']:6.3f} {r['n']:7d}")
        if baselines and split in baselines:
            line += f"   {baselines[split]['boxes_overlap']['balanced_acc']:.3f}"
        lines.append(line)
    hybrid = {split: r["hybrid"] for split, r in reports.items() if "hybrid" in r}
    if hybrid:
        tau = next(iter(hybrid.values()))["tau"]
        lines += ["", f"hybrid (tau {tau:.3f}): {'deferred':>9s} {'hulls':>6s} {'acc':>6s} {'bal.acc':>7s} {'missed':>6s}"]
        lines += [f"  {split:28s} {h['deferred']:9.3f} {h['certified']:6.3f} {h['accuracy']:6.3f} "
                  f"{h['balanced_accuracy']:7.3f} {int(h['missed_collisions']):6d}" for split, h in hybrid.items()]
    lines.append("")
    lines.append(f"{'accuracy by true signed distance':18s} " + " ".join(f"{name:>13s}" for name, _, _ in BANDS))
    for split, r in reports.items():
        cells = [f"{b['acc']:6.3f} ({b['n']:5d})" if b["n"] else f"{'-':>13s}" for b in r["bands"].values()]
        lines.append(f"{split:18s} " + " ".join(f"{c:>13s}" for c in cells))
    return "\n".join(lines)
