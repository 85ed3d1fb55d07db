"""The certified hybrid's deferral rule, and choosing its threshold on validation data.

`CollisionChecker(world, "hybrid", model=net, tau=tau)` answers each query in one of three ways:
- the two meshes' convex hulls are certainly apart (`contactnet.ops.mesh_query.hulls_separated`,
  a few microseconds of GJK): "free", exactly, whatever the network says;
- otherwise a confident "collide" verdict of the network, logit >= tau, is kept;
- everything else goes to the exact kernels (`defer`): every "free" verdict (a colliding pair's
  hulls always overlap, so a learned "free" there could be a missed collision) and every
  "collide" verdict below tau.
So the hybrid never calls a colliding pair free: its only errors are confident learned "collide"
verdicts on free pairs whose hulls overlap. On labelled validation queries its error rate is
#{those kept} / #queries, which `choose_tau` bounds by a target and `hybrid_summary` reports with
the share deferred (the fraction of queries that pay for an exact check). The bound holds on the
validation data; on new queries it holds as far as they resemble it. The missed-collision
guarantee holds always.

This replaces a rule on |logit| alone (with "free" verdicts on nested boxes deferred too): its
errors were confident "free" verdicts on sub-millimetre penetrations, which no threshold reached
at an affordable deferral (docs/results.md).
"""

from __future__ import annotations

import math

import torch

__all__ = ["certified_verdicts", "choose_tau", "defer", "hybrid_summary", "hybrid_verdict"]


def defer(logit: torch.Tensor, tau: float, separated: torch.Tensor | None = None) -> torch.Tensor:
    """Which queries the hybrid hands to the exact kernels (bool, logit's shape): all but the
    "collide" verdicts with logit >= tau (a logit of 0 or NaN is never kept, whatever tau), except
    where `separated` (bool, logit's shape: `hulls_separated`; None: nothing certified) decides
    "free". A logit of -inf (a disabled slot) is never deferred."""
    out = ~((logit >= tau) & (logit > 0)) & ~torch.isneginf(logit)
    if separated is not None:
        out = out & ~separated
    return out


def hybrid_verdict(logit: torch.Tensor, deferred: torch.Tensor, exact: torch.Tensor,
                   separated: torch.Tensor | None = None) -> torch.Tensor:
    """The hybrid's "colliding" (bool, logit's shape) given `deferred` (`defer`) and the exact
    verdicts `exact` there: False where the hulls are separated, `exact` where deferred, logit > 0
    elsewhere."""
    out = torch.where(deferred, exact, logit > 0)
    return out if separated is None else out & ~separated


def certified_verdicts(separated: torch.Tensor, logits_at, collide_at, tau: float, dtype: torch.dtype,
                       live: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The hybrid's verdicts on K queries, each part run only where it decides something: the
    network on the queries whose hulls are not certified apart, the exact check on those `defer`
    picks among them (on real meshes an exact check costs as much as the network, so the hulls'
    certificate, a few microseconds, halves the work on pairs near contact).

    separated (K,) bool: `hulls_separated`; logits_at(rows) -> (R,) logits and collide_at(rows) ->
    (R,) bool exact verdicts of the queries `rows` (R,) int64; dtype: the logits'; live (K,) bool or
    None (all): the queries to answer (e.g. enabled slots). Returns (colliding (K,) bool, logit (K,)
    with -inf where separated or not live, deferred (K,) bool). Syncs (which rows run is data)."""
    skip = separated if live is None else separated | ~live
    logit = torch.full(separated.shape, -math.inf, dtype=dtype, device=separated.device)
    rows = torch.nonzero(~skip).squeeze(1)
    if rows.numel():
        logit[rows] = logits_at(rows)
    deferred = defer(logit, tau)  # -inf, the skipped queries, is never deferred
    exact = torch.zeros_like(deferred)
    rows = torch.nonzero(deferred).squeeze(1)
    if rows.numel():
        exact[rows] = collide_at(rows)
    return hybrid_verdict(logit, deferred, exact), logit, deferred


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
               separated: torch.Tensor | None = None) -> float:
    """The smallest threshold tau whose hybrid error on these validation queries is <= max_error.

    logits (...) float: the network's collision logits; labels (...) bool or 0/1: the exact verdicts
    (1: colliding); max_error in [0, 1]: the target error rate of the hybrid, i.e. its wrong
    answers (confident learned "collide" verdicts kept on free pairs) divided by the number of ALL
    queries; separated (...) bool, optional: `hulls_separated` of each query (those answer "free"
    whatever tau; None: none is certified, so every "free" verdict is deferred).

    Candidates are 0 and the observed positive logits (between two of them every tau makes the
    same decisions here), so the answer is:
    - 0.0 when keeping every "collide" verdict already meets max_error (the checker requires
      tau > 0: pass a tiny one);
    - otherwise the smallest positive logit that is kept: "collide" verdicts with that logit or
      more are kept, those below it are deferred (ties are kept or deferred together);
    - inf when even the most confident "collide" verdict is wrong and max_error leaves no room
      for it: every verdict not certified by the hulls is deferred.
    """
    logits, labels = _validation(logits, labels)
    if isinstance(max_error, bool) or not isinstance(max_error, (int, float)) or not 0 <= max_error <= 1:
        raise ValueError(f"max_error: expected an error rate in [0, 1], got {max_error!r}")
    separated = _separated(separated, logits)
    n = logits.numel()
    # Certified answers are never wrong by construction; a label that disagrees (float32 rounding
    # within min_gap of touching) is counted, whatever tau.
    fixed = 0 if separated is None else int((separated & labels).sum())
    candidate = logits > 0
    if separated is not None:
        candidate &= ~separated
    conf, order = logits[candidate].sort()
    wrong = ~labels[candidate][order]
    # kept[k]: wrong "collide" verdicts kept when tau = conf[k] (every one from k on is kept).
    kept = wrong.flip(0).cumsum(0).flip(0)
    budget = max_error * n
    if fixed + (int(kept[0]) if len(kept) else 0) <= budget:
        return 0.0
    # Only the first of equal logits is a threshold: tau = conf[k] keeps the whole tie.
    first = torch.ones_like(wrong)
    first[1:] = conf[1:] != conf[:-1]
    ok = first & (fixed + kept.double() <= budget)
    if not bool(ok.any()):
        return math.inf
    return float(conf[ok.int().argmax()])


def _separated(separated, logits: torch.Tensor) -> torch.Tensor | None:
    """`separated` flattened like the validation logits, checked (None stays None)."""
    if separated is None:
        return None
    if not isinstance(separated, torch.Tensor) or separated.dtype != torch.bool or separated.numel() != logits.numel():
        raise ValueError(f"separated: expected a bool tensor with one entry per logit ({logits.numel()}), got "
                         f"{getattr(separated, 'dtype', type(separated).__name__)} of "
                         f"{tuple(getattr(separated, 'shape', ()))}")
    return separated.reshape(-1).to(logits.device)


def _balanced(correct: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean recall over the classes present (one class only: its recall)."""
    recalls = [correct[labels == c].double().mean() for c in (True, False) if bool((labels == c).any())]
    return float(sum(recalls) / len(recalls))


def hybrid_summary(logits: torch.Tensor, labels: torch.Tensor, tau: float,
                   separated: torch.Tensor | None = None) -> dict[str, float]:
    """How the hybrid with threshold tau (>= 0) does on labelled queries.

    logits (...) float, labels (...) bool or 0/1 (1: colliding), separated (...) bool, optional
    (`hulls_separated`). Returns floats:
    - "deferred": the fraction of queries sent to the exact check (`defer`);
    - "certified": the fraction answered "free" by the hulls' separation alone;
    - "accuracy", "balanced_accuracy": of the hybrid (`hybrid_verdict`, the exact kernels
      deciding what it defers); balanced: the mean of the recalls of the classes present;
    - "missed_collisions": colliding queries the hybrid calls free (0 unless a label disagrees
      with a hull certificate);
    - "learned_accuracy", "learned_balanced_accuracy": of the network alone (logit > 0).
    """
    logits, labels = _validation(logits, labels)
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not tau >= 0:
        raise ValueError(f"tau: expected a threshold >= 0, got {tau!r}")
    separated = _separated(separated, logits)
    learned = (logits > 0) == labels
    deferred = defer(logits, tau, separated)
    hybrid = hybrid_verdict(logits, deferred, labels, separated)
    return {"deferred": float(deferred.double().mean()),
            "certified": 0.0 if separated is None else float(separated.double().mean()),
            "accuracy": float((hybrid == labels).double().mean()),
            "balanced_accuracy": _balanced(hybrid == labels, labels),
            "missed_collisions": float((labels & ~hybrid).sum()),
            "learned_accuracy": float(learned.double().mean()),
            "learned_balanced_accuracy": _balanced(learned, labels)}
