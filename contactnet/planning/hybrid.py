"""The certified hybrid's deferral rule, and choosing its threshold on validation data.

`CollisionChecker(world, "hybrid", model=net, tau=tau)` keeps the network's verdict (logit > 0:
colliding) where it is confident, |logit| >= tau, and sends the rest, |logit| < tau, to the exact
kernels (`defer`). It also defers every "free" verdict on a pair whose boxes are nested (one posed
box wholly inside the other, `contactnet.geometry.boxes.boxes_nested`): there one object may lie
deep inside the other with no surfaces near each other, the containment a net reading local crops
cannot see, and where its most confident errors were (docs/results.md). So its only errors are the learned errors it keeps:
on labelled validation queries, the error rate of the hybrid is #{wrong and kept} / #queries, which
`choose_tau` bounds by a target and `hybrid_summary` reports with the share deferred (the
fraction of queries that pay for an exact check). The bound holds on the validation data; on new
queries it holds as far as they resemble it.
"""

from __future__ import annotations

import math

import torch

__all__ = ["choose_tau", "defer", "hybrid_summary"]


def defer(logit: torch.Tensor, tau: float, nested: torch.Tensor | None = None) -> torch.Tensor:
    """Which queries the hybrid hands to the exact kernels (bool, logit's shape): |logit| < tau,
    and, given `nested` (bool, logit's shape: `boxes_nested`), every finite "free" verdict (logit < 0)
    of a nested pair. A logit of -inf (a disabled slot) is never deferred."""
    out = logit.abs() < tau
    if nested is not None:
        out = out | (nested & (logit < 0) & (logit > -math.inf))
    return out


def _validation(logits, labels) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat float logits (N,) and bool labels (N,), checked."""
    if not isinstance(logits, torch.Tensor) or not logits.dtype.is_floating_point:
        raise ValueError(f"logits: expected a float tensor of collision logits, got "
                         f"{getattr(logits, 'dtype', type(logits).__name__)}")
    if not isinstance(labels, torch.Tensor):
        raise ValueError(f"labels: expected a tensor of 0/1 or bool labels, got {type(labels).__name__}")
    if logits.shape != labels.shape:
        raise ValueError(f"labels: shape {tuple(labels.shape)} differs from logits' {tuple(logits.shape)}")
    if logits.numel() == 0:
        raise ValueError("logits: expected at least one validation query, got an empty tensor")
    if bool(torch.isnan(logits).any()):
        raise ValueError("logits: contains NaN")
    if labels.dtype != torch.bool and not bool(((labels == 0) | (labels == 1)).all()):
        raise ValueError("labels: expected bool or 0/1 values (1: colliding)")
    return logits.reshape(-1), labels.reshape(-1).bool()


def choose_tau(logits: torch.Tensor, labels: torch.Tensor, max_error: float,
               nested: torch.Tensor | None = None) -> float:
    """The smallest threshold tau whose hybrid error on these validation queries is <= max_error.

    logits (...) float: the network's collision logits; labels (...) bool or 0/1: the exact verdicts
    (1: colliding); max_error in [0, 1]: the target error rate of the hybrid, i.e. learned errors
    that are kept (not deferred) divided by the number of ALL queries; nested (...) bool, optional:
    `boxes_nested` of each query, whose "free" verdicts are deferred whatever tau (`defer`).

    Candidates are 0 and the observed |logit| values (between two observed values every tau makes
    the same decisions here), so the answer is:
    - 0.0 when the learned verdict already meets max_error with nothing deferred by threshold
      (nested queries aside). The hybrid checker requires tau > 0: pass a tiny one to keep the
      nested rule, or use the learned backend.
    - otherwise the smallest |logit| that is kept: queries with that |logit| or more keep the
      learned verdict, those below it are deferred (ties are kept or deferred together);
    - inf when even the most confident query is wrong and max_error leaves no room for it:
      everything is deferred (the exact backend).
    """
    logits, labels = _validation(logits, labels)
    if isinstance(max_error, bool) or not isinstance(max_error, (int, float)) or not 0 <= max_error <= 1:
        raise ValueError(f"max_error: expected an error rate in [0, 1], got {max_error!r}")
    always = _nested(nested, logits)
    n = logits.numel()
    conf, order = logits.abs().sort()
    wrong = (((logits > 0) != labels) & ~defer(logits, 0.0, always))[order]
    # kept[k]: learned errors kept when tau = conf[k] (every query from k on keeps its verdict).
    kept = wrong.flip(0).cumsum(0).flip(0)
    # Only the first of equal |logit| values is a threshold: tau = conf[k] keeps the whole tie.
    first = torch.ones_like(wrong)
    first[1:] = conf[1:] != conf[:-1]
    ok = first & (kept.double() / n <= max_error)
    if bool(ok[0]):
        return 0.0
    if not bool(ok.any()):
        return math.inf
    return float(conf[ok.int().argmax()])


def _nested(nested, logits: torch.Tensor) -> torch.Tensor | None:
    """`nested` flattened like the validation logits, checked (None stays None)."""
    if nested is None:
        return None
    if not isinstance(nested, torch.Tensor) or nested.dtype != torch.bool or nested.numel() != logits.numel():
        raise ValueError(f"nested: expected a bool tensor with one entry per logit ({logits.numel()}), got "
                         f"{getattr(nested, 'dtype', type(nested).__name__)} of {getattr(nested, 'shape', '?')}")
    return nested.reshape(-1)


def _balanced(correct: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean recall over the classes present (one class only: its recall)."""
    recalls = [correct[labels == c].double().mean() for c in (True, False) if bool((labels == c).any())]
    return float(sum(recalls) / len(recalls))


def hybrid_summary(logits: torch.Tensor, labels: torch.Tensor, tau: float,
                   nested: torch.Tensor | None = None) -> dict[str, float]:
    """How the hybrid with threshold tau (>= 0; 0 defers nothing by threshold) does on labelled
    queries.

    logits (...) float, labels (...) bool or 0/1 (1: colliding), nested (...) bool, optional
    (`boxes_nested`). Returns floats:
    - "deferred": the fraction of queries sent to the exact check (`defer`);
    - "accuracy", "balanced_accuracy": of the hybrid, deferred queries counting as correct (the
      exact kernels decide them); balanced: the mean of the recalls of the classes present;
    - "learned_accuracy", "learned_balanced_accuracy": of the network alone (logit > 0).
    """
    logits, labels = _validation(logits, labels)
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not tau >= 0:
        raise ValueError(f"tau: expected a threshold >= 0, got {tau!r}")
    learned = (logits > 0) == labels
    deferred = defer(logits, tau, _nested(nested, logits))
    hybrid = learned | deferred
    return {"deferred": float(deferred.double().mean()),
            "accuracy": float(hybrid.double().mean()),
            "balanced_accuracy": _balanced(hybrid, labels),
            "learned_accuracy": float(learned.double().mean()),
            "learned_balanced_accuracy": _balanced(learned, labels)}
