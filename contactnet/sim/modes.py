"""How a step runs: adaptively (Newton to the tolerance, with host reads) or as one fixed-shape flow.

`Stepper._step` is one sequence of operations; a step mode supplies the parts where the two ways
differ: how many Newton iterations and line-search trials run (and whether to stop early), which
candidate search (compacted or padded), how a Hessian that Cholesky cannot factorise is shifted,
what happens to non-finite results, how the new state is stored and how failures are reported.

`FixedShape` runs no host sync and no data-dependent shape (a CUDA graph can capture its step): it
records what it cannot check on the device, and `validate()` raises it later.
"""

from __future__ import annotations

import abc
import warnings
from collections.abc import Callable
from typing import NamedTuple

import torch

from contactnet.geometry.poses import unit_quaternion_poses
from contactnet.ops import ipc
from contactnet.ops.ipc.cholesky import cholesky_factor_solve
from contactnet.sim import contact_search
from contactnet.sim.packed import PackedScene, checked_script_poses
from contactnet.sim.potential import FrictionLag

__all__ = ["Adaptive", "CandidateOverflow", "FixedDofs", "FixedShape", "StepMode", "StepNotConverged"]


class StepNotConverged(RuntimeError):
    """A step whose Newton solve did not reach the tolerance (raised when on_failure='raise')."""


class CandidateOverflow(RuntimeError):
    """A fixed-capacity candidate search found more pairs than `max_candidates` / `max_contacts`
    (raised by `Stepper.validate`): contacts were dropped, so the state may penetrate."""


def report_unconverged(on_failure: str, unconverged: torch.Tensor, total: int, stacklevel: int) -> None:
    """Warn, raise StepNotConverged or stay quiet (per on_failure) about environments that did not
    converge within `total` Newton iterations; stacklevel counts from the caller."""
    if on_failure == "ignore":
        return
    envs = torch.nonzero(unconverged).flatten().tolist()
    msg = (f"Newton did not converge within {total} iterations in environments {envs[:10]}"
           f"{' ...' if len(envs) > 10 else ''} (state is intersection-free but not at the minimum)")
    if on_failure == "raise":
        raise StepNotConverged(msg)
    warnings.warn(msg, RuntimeWarning, stacklevel=stacklevel + 1)


class FixedDofs(NamedTuple):
    """The DOFs held in place in every Newton system (those of static and absent bodies): (E, n)
    bool; the same as (environment, DOF) index pairs, whose clearing touches 2n entries of a
    system each, not all n²; and the unit diagonal that replaces them."""

    mask: torch.Tensor
    index: tuple[torch.Tensor, torch.Tensor]
    diagonal: torch.Tensor

    def hold(self, H: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        """H's fixed rows and columns set to the identity's, in place; grad with zeros there."""
        env, dof = self.index
        zero = H.new_zeros(())  # on H's device: a Python 0.0 would be copied from the host (refused in graph capture)
        H.index_put_((env, dof), zero)
        H.transpose(1, 2).index_put_((env, dof), zero)
        H.diagonal(dim1=1, dim2=2).add_(self.diagonal)
        return grad.masked_fill(self.mask, 0.0)


def diagonal_scale(H: torch.Tensor) -> torch.Tensor:
    """(E,) the largest |diagonal entry| of each system (E, n, n): the unit of a shift."""
    return torch.diagonal(H, dim1=1, dim2=2).abs().amax(1).clamp_min(1e-300)


class StepMode(abc.ABC):
    """The parts of a step that depend on the mode, in the order `Stepper._step` calls them; and a
    per-step candidate-overflow flag (for `StepInfo`)."""

    newton_iterations: int  # the most Newton iterations a step runs
    line_search_trials: int  # the most energy trials per Newton iteration
    updates_in_place: bool  # the step writes q, qdot, time, contact_forces into the old tensors
    reuses_between_steps: bool  # a step may reuse what the last one found (never under graph capture)
    needs_start_energy: bool  # begin_newton reads the start energy (else it waits for a line search)

    def __init__(self, on_failure: str, device: torch.device):
        self.on_failure = on_failure
        self.device = device

    def start(self) -> None:
        """A step begins (before its first search)."""
        self.step_overflow = torch.zeros((), dtype=torch.bool, device=self.device)

    normalize_script: Callable[[torch.Tensor], torch.Tensor]  # makes scripted poses' quaternions unit

    @abc.abstractmethod
    def search(self, scene: PackedScene, x0, x1, reach: float, q0, q1=None, active=None) -> ipc.Candidates:
        """Pairs within `reach` at x0, or along x0 → x1, the positions of states q0, q1 (see
        `contact_search`); active (E,) bool: the environments still iterating (a mode may leave
        out the others' pairs: their Newton steps are zero)."""

    def begin_newton(self, energy: torch.Tensor | None) -> None:
        """Newton iterations follow; energy: the step's starting energy (E,), or None where the
        mode does not need it (`needs_start_energy`)."""

    def friction_pairs(self, scene: PackedScene, lag: FrictionLag, active: torch.Tensor) -> FrictionLag:
        """Friction's lagged pairs for the coming energies and derivatives; active (E,) bool as in
        `search` (a mode may leave out the other environments' pairs, as its search does)."""
        return lag

    @abc.abstractmethod
    def solve(self, H, grad, fixed: FixedDofs) -> tuple[torch.Tensor, torch.Tensor]:
        """Newton direction −H⁻¹g (E, n) with the `fixed` DOFs held (H's rows and columns
        overwritten, see `FixedDofs.hold`), and (E,) bool: H factorised (shifts, where needed, are
        multiples of `diagonal_scale(H)` of the held H)."""

    @abc.abstractmethod
    def screen(self, dq: torch.Tensor, factorised: torch.Tensor) -> torch.Tensor:
        """The Newton step to take from a solved direction dq (E, B, 12)."""

    @abc.abstractmethod
    def stop(self, mask: torch.Tensor) -> bool:
        """Whether a loop (Newton, line search) ends early because `mask` (E,) holds everywhere."""

    @abc.abstractmethod
    def settle(self, q: torch.Tensor, q_old: torch.Tensor, converged: torch.Tensor):
        """The step's final state (E, B, 12) and convergence (E,), given the one it started from."""

    @abc.abstractmethod
    def report(self, converged: torch.Tensor, stacklevel: int) -> None:
        """After the step is stored: report what did not converge (stacklevel as `warnings.warn`
        would take it in the caller)."""

    @abc.abstractmethod
    def validate(self, stacklevel: int) -> None:
        """Raise what steps left unchecked (see `Stepper.validate`)."""


class Adaptive(StepMode):
    """Newton until every environment meets the tolerance (at most `max_iterations`), a line search
    that stops at the first decrease, checked scripts and candidate lists compacted to their size;
    a step raises on a non-finite state and reports non-convergence as on_failure says."""

    line_search_trials = 40
    updates_in_place = False
    reuses_between_steps = True
    needs_start_energy = False

    def __init__(self, max_iterations: int, on_failure: str, device: torch.device):
        super().__init__(on_failure, device)
        self.newton_iterations = max_iterations
        self.neighbours = contact_search.NeighbourList()
        self._no_shift: torch.Tensor | None = None  # (E,) zeros: the first solve's shifts

    def stop(self, mask: torch.Tensor) -> bool:
        return bool(mask.all())  # a host read

    normalize_script = staticmethod(checked_script_poses)

    def search(self, scene: PackedScene, x0, x1, reach: float, q0, q1=None, active=None) -> ipc.Candidates:
        """Compacted pairs of the active environments only, pruned to those that may really come
        within reach (`ipc.prune_candidates`: the broad phase's boxes keep about a hundred times
        more, e.g. around a shaken bowl), from a Verlet list that a broad-phase search refreshes
        only when the bodies leave its margin (`contact_search.NeighbourList`): CCD, the
        derivatives and the line-search energies of the next iterations then cost in proportion
        to the contacts of the environments still iterating, not to the scene."""
        return self.neighbours.query(scene, x0, x1, reach, q0, q1, active)

    def friction_pairs(self, scene: PackedScene, lag: FrictionLag, active: torch.Tensor) -> FrictionLag:
        """The active environments' lagged pairs only (in their order: the sums of those
        environments keep their bits). Once most environments have converged, the friction terms
        of all the others would otherwise be most of an iteration's derivatives and energies."""
        if bool(active.all()):
            return lag
        keep_fv, keep_ee = contact_search.in_envs(scene, lag.candidates, active)
        fv, ee = lag.candidates
        return FrictionLag(ipc.Candidates(fv[keep_fv], ee[keep_ee]), lag.mu[torch.cat([keep_fv, keep_ee])])

    def solve(self, H, grad, fixed: FixedDofs):
        """−H⁻¹g, shifting only environments whose H does not factorise (flat shells, free affine
        modes) by growing multiples of H's diagonal scale; and (E,) bool: H factorised. The solve
        holds the fixed DOFs itself (on the CPU inside the op, without index_put_'s cost)."""
        shift = self._no_shift
        if shift is None or shift.shape[0] != H.shape[0] or shift.dtype != H.dtype:
            shift = self._no_shift = torch.zeros(H.shape[0], dtype=H.dtype, device=H.device)
        x, ok = ipc.cholesky_solve(H, grad, shift, fixed.mask)  # nearly always enough
        scale = None
        for _ in range(7):
            if bool(ok.all()):
                break
            bad = ~ok
            scale = diagonal_scale(H) if scale is None else scale
            shift = torch.where(bad, torch.where(shift == 0, 1e-12, shift * 100), shift)
            x, ok = ipc.cholesky_solve(H, grad, shift * scale, fixed.mask)
        return -x, ok

    def screen(self, dq: torch.Tensor, factorised: torch.Tensor) -> torch.Tensor:
        return dq

    def settle(self, q: torch.Tensor, q_old: torch.Tensor, converged: torch.Tensor):
        """The step's final state and convergence: raises FloatingPointError if q is non-finite."""
        if not bool(torch.isfinite(q).all()):
            bad = torch.nonzero(~torch.isfinite(q).all(2).all(1)).flatten().tolist()
            raise FloatingPointError(f"step produced a non-finite state in environments {bad}")
        return q, converged

    def report(self, converged: torch.Tensor, stacklevel: int) -> None:
        """Warn, raise or stay quiet (per on_failure) about environments that did not converge."""
        if not bool(converged.all()):
            report_unconverged(self.on_failure, ~converged, self.newton_iterations, stacklevel + 1)

    def validate(self, stacklevel: int) -> None:
        """Adaptive steps check themselves: nothing is left to raise."""


class FixedShape(StepMode):
    """Exactly `iterations` Newton iterations and `line_search_steps` trials, padded candidate lists
    of `max_candidates` (swept) / `max_contacts` (within d̂) rows, a fixed ladder of Cholesky shifts,
    and no checks: an environment whose direction or state goes non-finite keeps its old state, and
    non-finite states, candidate overflow and non-convergence are recorded for `validate()`."""

    updates_in_place = True  # a replayed CUDA graph advances the state
    reuses_between_steps = False  # tensors from before a capture would be stale in its replays
    needs_start_energy = True  # its finiteness is recorded

    def __init__(self, iterations: int, line_search_steps: int, max_candidates: int, max_contacts: int,
                 num_envs: int, on_failure: str, device: torch.device):
        super().__init__(on_failure, device)
        self.newton_iterations, self.line_search_trials = iterations, line_search_steps
        self.max_candidates, self.max_contacts = max_candidates, max_contacts
        # What steps leave for validate(): per environment, and for the searches.
        self.pending_nonfinite = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.pending_unconverged = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.pending_overflow = torch.zeros((), dtype=torch.bool, device=device)

    def begin_newton(self, energy: torch.Tensor) -> None:
        self.broken = ~torch.isfinite(energy)  # non-finite energy or Newton direction
        self.stuck = torch.zeros_like(self.broken)  # H never factorised

    def stop(self, mask: torch.Tensor) -> bool:
        return False  # no host read: environments that are done take zero steps

    # Unchecked (a check syncs); a bad script shows up in validate().
    normalize_script = staticmethod(unit_quaternion_poses)

    def search(self, scene: PackedScene, x0, x1, reach: float, q0, q1=None, active=None) -> ipc.Candidates:
        # All environments (fixed shapes): the finished ones take zero steps. Around a shaken bowl
        # the swept boxes keep 30-250 times more pairs than can come within reach (its motion,
        # which the objects riding it share, is larger than d̂): the search prunes them (the
        # body-level search as it finds them), so CCD, the derivatives and every line-search
        # energy see only the rest, and skip the rows past them unread (the lists' extents).
        found = contact_search.search_padded(scene, x0, x1, reach,
                                             self.max_contacts if x1 is None else self.max_candidates, q0, q1,
                                             prune=True)
        self.pending_overflow |= found.overflow
        self.step_overflow |= found.overflow
        return found.candidates

    def solve(self, H, grad, fixed: FixedDofs):
        """−H⁻¹g with the first of a fixed ladder of shifts that factorises; 0 where none does
        (non-finite where grad or H are); and (E,) bool: H factorised."""
        grad = fixed.hold(H, grad)  # index pairs: no host sync
        scale = diagonal_scale(H)
        eye = torch.eye(H.shape[1], dtype=H.dtype, device=H.device)
        L, info = torch.linalg.cholesky_ex(H)
        for shift in (1e-9, 1e-4):
            L2, info2 = torch.linalg.cholesky_ex(H + (shift * scale)[:, None, None] * eye)
            use = (info != 0) & (info2 == 0)
            L = torch.where(use[:, None, None], L2, L)
            info = torch.where(use, 0, info)
        dq = -cholesky_factor_solve(L, grad)
        finite_input = torch.isfinite(grad).all(1) & torch.isfinite(H).all((1, 2))
        return torch.where(((info == 0) | ~finite_input)[:, None], dq, 0.0), info == 0

    def screen(self, dq: torch.Tensor, factorised: torch.Tensor) -> torch.Tensor:
        """No step for an environment whose direction went non-finite (recorded for validate)."""
        self.broken |= ~torch.isfinite(dq).all(2).all(1)
        self.stuck |= ~factorised
        return torch.where(self.broken[:, None, None], 0.0, dq)

    def settle(self, q: torch.Tensor, q_old: torch.Tensor, converged: torch.Tensor):
        """A non-finite environment keeps its old state; both are recorded for validate()."""
        finite = torch.isfinite(q).all(2).all(1) & ~self.broken
        converged = converged & ~self.stuck
        self.pending_nonfinite |= ~finite
        self.pending_unconverged |= ~converged
        return torch.where(finite[:, None, None], q, q_old), converged

    def report(self, converged: torch.Tensor, stacklevel: int) -> None:
        """Nothing now (that would sync): `validate()` reports."""

    def validate(self, stacklevel: int) -> None:
        """Raise what steps since the last call recorded, then clear the record (syncs)."""
        nonfinite, unconverged = self.pending_nonfinite.clone(), self.pending_unconverged.clone()
        overflow = bool(self.pending_overflow)
        self.pending_nonfinite.zero_()
        self.pending_unconverged.zero_()
        self.pending_overflow.zero_()
        if bool(nonfinite.any()):
            bad = torch.nonzero(nonfinite).flatten().tolist()
            raise FloatingPointError(f"a step produced a non-finite state in environments {bad} "
                                     "(they kept their last finite state)")
        if overflow:
            raise CandidateOverflow(f"a candidate search found more pairs of one kind than its capacity "
                                    f"(max_candidates={self.max_candidates}, max_contacts={self.max_contacts}); "
                                    "contacts were dropped (raise them)")
        if bool(unconverged.any()):
            report_unconverged(self.on_failure, unconverged, self.newton_iterations, stacklevel + 1)
