"""Batched implicit stepper: affine bodies with IPC contact, smooth friction and CCD.

Each step minimises the incremental potential of every environment (`contactnet.sim.potential`)
with q̂ = qᵗ + h q̇ᵗ + h² (g, 0) for dynamic bodies (M⁻¹ of the gravity load is exactly (g, 0) for
affine bodies). Newton with PSD-projected Hessians, dense per environment and solved by batched
Cholesky; every Newton step is capped by CCD so no iterate penetrates, then backtracked on energy.
Static bodies keep their DOFs fixed. Units: metres, seconds, kilograms; float64 throughout.

The parts: the scenes packed into flat tensors (`contactnet.sim.packed`), candidate searches over
them (`contactnet.sim.contact_search`: a body-level broad phase over per-body rest-frame trees,
whose cost follows the contacts, not the scene's size, and Verlet lists over it that the adaptive
mode prunes to each Newton step), the potential and its derivatives
(`contactnet.sim.potential`, one fused op each), and the step mode (`contactnet.sim.modes`): adaptive, or with
`fixed_iterations` one uniform flow of fixed-shape tensor ops without host syncs (a CUDA graph can
capture it): fixed-capacity candidate lists padded with -1, masks instead of compaction, a fixed
number of line-search trials and Cholesky shifts, and the checks deferred to `Stepper.validate()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from contactnet.ops import ipc
from contactnet.ops._checks import check_count, check_float_tensor, check_number
from contactnet.ops.mesh_query import mesh_collide, mesh_distance
from contactnet.sim import contact_search, potential
from contactnet.sim.affine import q_to_pose, q_velocity_to_twist
from contactnet.sim.modes import Adaptive, CandidateOverflow, FixedDofs, FixedShape, StepMode, StepNotConverged
from contactnet.sim.packed import ABSENT, DYNAMIC, KINEMATIC, STATIC, PackedScene, pack_scenes
from contactnet.sim.potential import FrictionLag
from contactnet.sim.scene import Scene

__all__ = ["CandidateOverflow", "Stepper", "StepInfo", "StepNotConverged"]


class StepInfo(NamedTuple):
    iterations: int  # Newton iterations run (the most over environments)
    newton_iterations: torch.Tensor  # (E,) int64 iterations each environment needed
    converged: torch.Tensor  # (E,) bool: reached the tolerance
    contacts: torch.Tensor  # (E,) int64 barrier pairs (within d̂) at the end of the step
    min_distance: torch.Tensor  # (E,) m, smallest distance between bodies; inf when all are ≥ d̂ apart
    candidate_overflow: torch.Tensor | None = None  # () bool: a fixed-capacity search dropped pairs


def _packed(name: str):
    return property(lambda self: getattr(self.packed, name), doc=f"`PackedScene.{name}` of the packed scenes.")


class Stepper:
    """Steps many environments of affine bodies at once (CPU or GPU, float64).

    scenes: one `Scene` (replicated `num_envs` times) or a list of scenes, one per environment.
    dt: time step h (s). dhat: barrier activation distance d̂ (m). kappa: barrier stiffness κ
    (J/m⁴, on squared distances); None picks it so that one pair at d̂/2 carries 100× the heaviest
    dynamic body's weight: loads spread over several pairs then rest near d̂, where the barrier is
    stiff against rocking (a softer κ lets tall stacks lean). mu: default friction coefficient;
    eps_v: velocity (m/s) below which friction is static (smoothed). gravity: (3,) m/s².
    stiffness: κ_A (Pa) of the orthogonality energy.
    kinematic_stiffness: w of the pull of kinematic bodies to their script (times their mass).
    tolerance: Newton stops when no vertex would move faster than this (m/s) in the next Newton
    step. max_iterations: Newton iteration cap per step.
    fixed_iterations: run exactly this many Newton iterations every step, as one uniform flow of
    fixed-shape tensor ops with no host synchronisation, so a step can be captured in a CUDA graph
    and replayed. Environments that meet the tolerance early take zero steps for the remaining
    iterations (so with enough iterations the trajectory is the adaptive one). In this mode:
      - candidate searches return a fixed number of rows of face–vertex and of edge–edge pairs,
        padded with -1 (`ipc.body_candidates_padded`, on either device): `max_candidates` for
        the swept broad phase of each Newton segment, `max_contacts` for the pairs closer than d̂
        (friction, forces, the first iteration); pairs beyond that are dropped and reported,
        never silently (`StepInfo.candidate_overflow`, `validate`). A swept search keeps only
        the pairs that may come within d̂ on the segment (`prune=True`: `prune_candidates`'
        test as it finds them), and the lists carry their counts (`ipc.BoundedCandidates`), so
        CCD, the derivatives, the line-search energies and the forces skip the padding past them
        unread;
      - the line search tries exactly `line_search_steps` step lengths α, α/2, … (α the CCD bound);
      - a Hessian that Cholesky cannot factorise gets a fixed ladder of diagonal shifts; an
        environment none of them fixes stays where it is for that iteration;
      - a step does not check its result: an environment whose new state would be non-finite keeps
        its old one, and non-finite states, candidate overflow and non-convergence are recorded on
        the device and raised (or warned, per on_failure) by `validate()`, which syncs: call it
        outside the captured region, e.g. every few hundred steps and at the end.
    max_candidates, max_contacts: rows per kind of those padded lists (fixed_iterations only;
    every row costs memory and a little work, used or not); None: 12 (max_contacts: 2) per vertex
    of the dynamic bodies + 64 (128) per environment, at least twice the peaks seen in the
    cube-stack and bowl scenes (a swept search: up to 5 edge–edge pairs per dynamic vertex; pairs
    within d̂: 1.6).
    line_search_steps: energy trials per Newton iteration in fixed_iterations mode.
    on_failure: what a step that does not converge does: "warn" (default), "raise" or "ignore";
    `StepInfo.converged` always says which environments converged.
    """

    def __init__(self, scenes: Scene | Sequence[Scene], num_envs: int | None = None, dt: float = 0.01,
                 dhat: float = 1e-3, kappa: float | None = None, mu: float = 0.5, eps_v: float = 1e-3,
                 gravity=(0.0, 0.0, -9.81), stiffness: float = 1e8, kinematic_stiffness: float = 1e4,
                 tolerance: float = 1e-5, max_iterations: int = 100, fixed_iterations: int | None = None,
                 device: torch.device | str = "cpu", on_failure: str = "warn", max_candidates: int | None = None,
                 max_contacts: int | None = None, line_search_steps: int = 8):
        if isinstance(scenes, Scene):
            scenes = [scenes] * (1 if num_envs is None else int(num_envs))
        elif num_envs is not None and num_envs != len(scenes):
            raise ValueError(f"num_envs: {num_envs} given with {len(scenes)} scenes")
        scenes = list(scenes)
        if not scenes or not all(isinstance(s, Scene) for s in scenes):
            raise TypeError("scenes: expected a Scene or a non-empty list of Scenes")
        if any(len(s) == 0 for s in scenes):
            raise ValueError("scenes: every scene needs at least one body")
        for value, name in ((dt, "dt"), (dhat, "dhat"), (eps_v, "eps_v"), (stiffness, "stiffness"),
                            (kinematic_stiffness, "kinematic_stiffness"), (tolerance, "tolerance")):
            check_number(value, name)
        check_number(kappa, "kappa", allow_none=True)
        check_number(mu, "mu", inclusive=True)
        if on_failure not in ("warn", "raise", "ignore"):
            raise ValueError(f"on_failure: expected 'warn', 'raise' or 'ignore', got {on_failure!r}")
        check_count(fixed_iterations, "fixed_iterations", allow_none=True)
        check_count(max_iterations, "max_iterations")
        check_count(max_candidates, "max_candidates", allow_none=True)
        check_count(max_contacts, "max_contacts", allow_none=True)
        check_count(line_search_steps, "line_search_steps")
        self.scenes = scenes
        self.dt, self.dhat, self.mu, self.eps_v = float(dt), float(dhat), float(mu), float(eps_v)
        self.stiffness, self.kinematic_stiffness = float(stiffness), float(kinematic_stiffness)
        self.tolerance, self.max_iterations, self.fixed_iterations = float(tolerance), max_iterations, fixed_iterations
        self.on_failure = on_failure
        self.line_search_steps = line_search_steps
        self.device = torch.empty(0, device=device).device  # "cuda" -> cuda:0, as the state's tensors report it
        self.dtype = torch.float64
        self.gravity = torch.as_tensor(gravity, dtype=self.dtype, device=self.device)
        check_float_tensor(self.gravity, "gravity", (3,))
        if not bool(torch.isfinite(self.gravity).all()):
            raise ValueError(f"gravity: expected a finite (3,) vector in m/s², got {gravity!r}")
        self.packed: PackedScene = pack_scenes(scenes, self.mu, self.stiffness, self.device)
        self.q = self.packed.q_init.clone()
        self.qdot = torch.where((self.kind == DYNAMIC)[..., None], self.packed.qdot_init, 0.0)
        self.time = torch.zeros(self.num_envs, dtype=self.dtype, device=self.device)
        self._pending_forces = None  # (x, xᵗ, pairs, lag) of the last step, until `contact_forces` is read
        self.contact_forces = torch.zeros(self.num_envs, self.max_bodies, 3, dtype=self.dtype, device=self.device)
        dynamic_vertices = int((self.kind.reshape(-1)[self.vertex_body] == DYNAMIC).sum())
        self.max_candidates = max_candidates or 12 * dynamic_vertices + 64 * self.num_envs
        self.max_contacts = max_contacts or 2 * dynamic_vertices + 128 * self.num_envs
        # Searches and solves outside a step (initial checks, statistics) are always adaptive.
        self._adaptive = Adaptive(max_iterations, on_failure, self.device)
        self._mode: StepMode = self._adaptive if fixed_iterations is None else FixedShape(
            fixed_iterations, line_search_steps, self.max_candidates, self.max_contacts, self.num_envs, on_failure,
            self.device)
        # The DOFs of static and absent bodies, held in place in every Newton system.
        fixed = ~self.free_dof.repeat_interleave(12, dim=1)
        self._fixed_dofs = FixedDofs(fixed, torch.nonzero(fixed, as_tuple=True), fixed.to(self.dtype))
        self._moving = (self.free_dof & (self.kind == DYNAMIC))[..., None]  # (E, B, 1): bodies with a velocity
        self._checked_state = None  # the state tensors `_check_state` last passed (unchanged ones pass again)
        self.kappa = float(kappa) if kappa is not None else self._auto_kappa()
        self._end_contacts = None  # (q, d̂, positions, pairs within d̂) at the end of the last step
        self._frictionless = None  # (q, w, Hessian but friction's) of the last Newton iteration
        self._weights = None  # (kinematic_stiffness, w): the inertia weights, fixed unless it changes
        self._gravity_step = None  # (dt, gravity, its version, h² (g, 0)): q̂'s gravity term
        self._coefficients = potential.Coefficients(self.dt, self.dhat, self.kappa, self.eps_v)
        self._check_initial_state()

    # The packed scenes' fields that users and tests read from the stepper.
    num_envs = _packed("num_envs")
    max_bodies = _packed("max_bodies")
    library = _packed("library")
    mesh_id = _packed("mesh_id")
    kind = _packed("kind")
    M = _packed("M")
    mass = _packed("mass")
    friction = _packed("friction")
    rest = _packed("rest")
    faces = _packed("faces")
    edges = _packed("edges")
    vertex_body = _packed("vertex_body")
    free_dof = _packed("free_dof")

    def _auto_kappa(self) -> float:
        dynamic = self.kind == DYNAMIC
        weight = float((self.mass * dynamic).max()) * float(self.gravity.norm())
        if weight == 0:
            weight = 1.0  # no gravity or no dynamic body: any scale works; keep it finite
        d0 = torch.tensor([(0.5 * self.dhat) ** 2], dtype=self.dtype)
        first = ipc.barrier(d0, self.dhat).first
        unit_force = float(-first[0]) * 2 * 0.5 * self.dhat  # |∂b/∂d| = |b'(d²)|·2d at d = d̂/2
        return 100.0 * weight / unit_force

    # ---- geometry and potential -------------------------------------------------------------
    def positions(self, q: torch.Tensor) -> torch.Tensor:
        """(V, 3) vertex positions x = A x0 + p of all environments' bodies (each in its own
        environment's frame), packed in scene order."""
        return self.packed.positions(q)

    def _candidates(self, x: torch.Tensor, q: torch.Tensor | None = None) -> ipc.Candidates:
        """Face–vertex and edge–edge pairs closer than d̂, between bodies of one environment (x: the
        positions of state q, when given)."""
        return contact_search.search(self.packed, x, None, self.dhat, q)

    def _targets(self, time_next: torch.Tensor, mode: StepMode | None = None):
        """q̂ and the weights w of the inertia term for the coming step."""
        h, kind = self.dt, self.kind
        last = self._gravity_step  # a user may set dt or gravity (or change it in place) between steps
        if last is None or last[0] != h or last[1] is not self.gravity or last[2] != self.gravity._version:
            g = torch.zeros(12, dtype=self.dtype, device=self.device)
            g[:3] = self.gravity
            last = self._gravity_step = (h, self.gravity, self.gravity._version, h * h * g)
        q_hat = self.q + h * self.qdot + last[3]
        if self.packed.trajectories:
            q_hat = self.packed.script_targets(q_hat, time_next, (mode or self._adaptive).normalize_script)
        if self._weights is None or self._weights[0] != self.kinematic_stiffness:
            w = torch.where(kind == DYNAMIC, 1.0, 0.0) + torch.where(kind == KINEMATIC, self.kinematic_stiffness, 0.0)
            self._weights = (self.kinematic_stiffness, w.to(self.dtype))
        return q_hat, self._weights[1]

    def _friction_lag(self, cand: ipc.Candidates) -> FrictionLag:
        """Friction's lagged pairs: `cand`, the pairs within d̂ at the step's start, with their μ."""
        return FrictionLag(cand, self.packed.candidate_friction(cand))

    def _energy(self, q, q_hat, w, x_t, lag, cand: ipc.Candidates | None = None, x=None) -> torch.Tensor:
        """(E,) incremental potential of every environment at q. cand: a superset of the pairs
        closer than d̂ at q (searched when None); x: the positions at q (computed when None)."""
        x = self.positions(q) if x is None else x
        cand = self._candidates(x, q) if cand is None else cand
        return potential.energy(self.packed, self._coefficients, q, q_hat, w, x_t, lag, x, cand)

    def _gradient_hessian(self, q, q_hat, w, x_t, lag, cand: ipc.Candidates | None = None,
                          mode: StepMode | None = None, listed: torch.Tensor | None = None, x=None):
        """Gradient (E, B·12) and dense PSD-projected Hessian (E, B·12, B·12) of the potential
        (cand and x as in `_energy`).

        With a mode that reuses between steps, each environment keeps the Hessian of every term but
        friction from its last call whose `cand` listed its pairs (listed (E,) bool; None: all),
        and a call where every environment's kept state is q and w takes those instead of computing
        them: a converged step's last Newton iteration is at the next step's start, which then
        computes only the gradient and friction (the barrier's projections are most of a
        contact-rich step's cost)."""
        x = self.positions(q) if x is None else x
        cand = self._candidates(x, q) if cand is None else cand
        c = self._coefficients  # fixed at construction, like the scene: not part of the key
        if mode is None or not mode.reuses_between_steps:
            return potential.gradient_hessian(self.packed, c, q, q_hat, w, x_t, lag, x, cand)
        last = self._frictionless
        reuse = None
        if last is not None and torch.equal(last[0], q) and torch.equal(last[1], w):
            reuse = last[2]
        grad, H, kept = potential.gradient_hessian(self.packed, c, q, q_hat, w, x_t, lag, x, cand,
                                                   frictionless_hessian=reuse, keep_frictionless=True)
        if listed is not None and not bool(listed.all()):
            # The other environments' pairs are not in cand: theirs stay as this step left them.
            if last is None or last[1] is not w:
                self._frictionless = None
                return grad, H
            q = torch.where(listed[:, None, None], q, last[0])
            kept = torch.where(listed[:, None, None], kept, last[2])
        # q's clone: the state a user may change in place afterwards may be this very tensor.
        self._frictionless = (q.clone(), w, kept)
        return grad, H

    # The tests' oracles reach the parts through these.
    def _chain_rule(self, st, lg, lh, is_fv):
        return potential.chain_rule(self.packed, st, lg, lh, is_fv)

    def _to_q_order(self, t: torch.Tensor, dim: int) -> torch.Tensor:
        return self.packed.to_q_order(t, dim)

    def _pair_friction(self, stencils: torch.Tensor) -> torch.Tensor:
        return self.packed.pair_friction(stencils)

    def _solve(self, grad, H, mode: StepMode) -> tuple[torch.Tensor, torch.Tensor]:
        """Newton direction −H⁻¹g per environment with the DOFs of static and absent bodies fixed,
        and (E,) bool: H factorised (see the mode's `solve`). H, fresh from `_gradient_hessian`,
        is overwritten (no copies of the (E, n, n) systems)."""
        return mode.solve(H, grad, self._fixed_dofs)

    def _ccd(self, x0, x1, cand: ipc.Candidates) -> torch.Tensor:
        """(E,) largest collision-free fraction of the move x0 → x1 (V, 3) (conservative). cand: a
        superset of the pairs whose swept boxes meet."""
        return ipc.collision_free_steps(x0, x1, self.faces, self.edges, cand, self.packed.vertex_env, self.num_envs,
                                        0.0, 0.9)

    # ---- stepping ---------------------------------------------------------------------------
    def step(self) -> StepInfo:
        """Advance every environment by dt. Returns a `StepInfo`.

        With fixed_iterations the step runs no host sync and checks nothing (call `validate()`),
        and it updates `q`, `qdot`, `time` and `contact_forces` in place, so replaying a CUDA graph
        captured around one `step()` advances the stepper."""
        # Every tensor the step hands the ops is built by the packed scene or by the ops themselves
        # from the state checked here: checking them again, op after op, would only cost Python
        # time and (index values on a GPU) host reads.
        self._check_state()
        with ipc.trusted_inputs():
            return self._step(self._mode)

    def _check_state(self) -> None:
        """The state a user may have replaced between steps has the stepper's dtype, shape and device
        (tensors that passed before and were not replaced since pass again unread)."""
        state = (self.q, self.qdot, self.time, self._contact_forces)  # pending forces: the step's own
        if self._checked_state is not None and all(a is b for a, b in zip(state, self._checked_state)):
            return
        E, B = self.num_envs, self.max_bodies
        for t, name, shape in zip(state, ("q", "qdot", "time", "contact_forces"),
                                  ((E, B, 12), (E, B, 12), (E,), (E, B, 3))):
            check_float_tensor(t, name, shape)
            if t.dtype != self.dtype or t.device != self.device:
                raise TypeError(f"{name}: expected a {self.dtype} tensor on {self.device}, got {t.dtype} on {t.device}")
        self._checked_state = state

    def validate(self) -> None:
        """Raise on what fixed-iteration steps since the last call recorded (they check nothing, to
        stay free of host syncs; this call syncs): FloatingPointError for environments whose state
        went non-finite (they kept their last finite state), CandidateOverflow when a candidate
        search found more pairs of a kind than its capacity (contacts were dropped: raise
        max_candidates / max_contacts and re-run), then non-convergence within fixed_iterations
        (or a Hessian that did not factorise) as on_failure says: warn, raise StepNotConverged,
        or ignore. Clears the record. Adaptive steps check themselves, so after them this finds
        nothing."""
        self._mode.validate(stacklevel=2)

    def _store(self, mode: StepMode, name: str, value: torch.Tensor) -> None:
        if mode.updates_in_place:
            getattr(self, name).copy_(value)
        else:
            setattr(self, name, value)

    def _step(self, mode: StepMode) -> StepInfo:
        E, B = self.num_envs, self.max_bodies
        mode.start()
        time_next = self.time + self.dt
        q_hat, w = self._targets(time_next, mode)
        # Pairs within d̂ at the start: friction's lagged pairs, and the candidates of the first
        # energy and Newton iteration (later ones use the pairs along the last Newton segment).
        x_t, near = self._contacts_at_start(mode)
        lag = self._friction_lag(near)
        q = self.q.clone()
        x = x_t  # the positions at q, kept along with it
        # The start energy serves the first line search: a step that starts converged (a body at
        # rest) never needs it, unless the mode checks it.
        start_near = near
        energy = self._energy(q, q_hat, w, x_t, lag, near, x) if mode.needs_start_energy else None
        mode.begin_newton(energy)
        done = torch.zeros(E, dtype=torch.bool, device=self.device)
        converged = torch.zeros(E, dtype=torch.bool, device=self.device)
        iterations = torch.zeros(E, dtype=torch.int64, device=self.device)
        listed = None  # the environments whose pairs `near` lists (None: all)
        friction = lag  # friction's lagged pairs of those environments
        it = 0
        for it in range(1, mode.newton_iterations + 1):
            grad, H = self._gradient_hessian(q, q_hat, w, x_t, friction, near, mode, listed, x)
            dq, factorised = self._solve(grad, H, mode)
            dq = mode.screen(dq.reshape(E, B, 12), factorised)
            # Environments whose step is within tolerance are done (their dq zeroed).
            dq, done, converged, iterations = ipc.newton_check(dq, self.packed.radius, self.tolerance * self.dt,
                                                               done, converged, iterations)
            if mode.stop(done):
                it -= 1
                break
            # One swept search serves the whole segment q → q + dq: every pair that meets (CCD)
            # or comes within d̂ (line-search energies, the next Newton iteration) on the way.
            q1 = q + dq
            x1 = self.positions(q1)
            listed = ~done
            near = mode.search(self.packed, x, x1, self.dhat, q, q1, listed)
            friction = mode.friction_pairs(self.packed, lag, listed)
            alpha = self._ccd(x, x1, near)
            if energy is None:  # still at the start: q, x and the pairs are the step's first
                energy = self._energy(q, q_hat, w, x_t, lag, start_near, x)
            accepted = done.clone()
            for _ in range(mode.line_search_trials):
                trial = q + alpha[:, None, None] * dq
                x_trial = self.positions(trial)
                e_trial = self._energy(trial, q_hat, w, x_t, friction, near, x_trial)
                # The first decrease is accepted; the others halve their alpha.
                q, x, energy, accepted, alpha = ipc.line_search_accept(q, trial, x, x_trial, self.packed.vertex_env,
                                                                       energy, e_trial, accepted, alpha)
                if mode.stop(accepted):
                    break
            # No decrease along a descent direction: the iterate is stationary to rounding.
            converged |= ~accepted & ~done
            done |= ~accepted
        settled, converged = mode.settle(q, self.q, converged)
        x_end = x if settled is q else None  # a mode may take environments back to their old state
        # No environment moved (all met the tolerance at the start): the pairs at the end are the
        # start's, which a search there would find again (the lists are as the start left them).
        end_near = start_near if it == 0 and settled is q and mode.reuses_between_steps else None
        q = settled
        qdot = torch.where(self._moving, (q - self.q) / self.dt, 0.0)
        self._store(mode, "qdot", qdot)
        self._store(mode, "q", q)
        self._store(mode, "time", time_next)
        info = self._finish(x_t, lag, iterations, converged, it, mode, x_end, end_near)
        self._checked_state = (self.q, self.qdot, self.time, self._contact_forces)  # made here: valid
        mode.report(converged, stacklevel=3)
        return info

    def _contacts_at_start(self, mode: StepMode) -> tuple[torch.Tensor, ipc.Candidates]:
        """Positions at q (V, 3) and the pairs within d̂ there: what the last step's `_finish`
        found, when the mode allows and q and d̂ are still what they were then."""
        last = self._end_contacts
        if mode.reuses_between_steps and last is not None and last[1] == self.dhat and torch.equal(last[0], self.q):
            return last[2], last[3]
        x = self.positions(self.q)
        return x, mode.search(self.packed, x, None, self.dhat, self.q)

    def _finish(self, x_t, lag, iterations, converged, it, mode: StepMode, x=None, cand=None) -> StepInfo:
        """Contact forces (−∇ of barrier and friction per body) and contact statistics (x: the
        positions at the new q, computed when None; cand: the pairs within d̂ there, searched when
        None)."""
        E, B = self.num_envs, self.max_bodies
        x = self.positions(self.q) if x is None else x
        cand = mode.search(self.packed, x, None, self.dhat, self.q) if cand is None else cand
        if mode.reuses_between_steps:  # the next step starts here unless q is changed in between
            self._end_contacts = (self.q.clone(), self.dhat, x, cand)
        if mode.updates_in_place:  # into the captured tensor, in the step
            forces, contacts, min_distance = self._contact_forces_at(x, x_t, cand, lag)
            self._store(mode, "contact_forces", forces)
        else:  # computed when read (`contact_forces`)
            contacts, min_distance = ipc.contact_statistics(x, self.faces, self.edges, self.vertex_body, cand, E, B)
            self._pending_forces = (x, x_t, cand, lag)
        return StepInfo(it, iterations, converged, contacts, min_distance, mode.step_overflow)

    def _contact_forces_at(self, x, x_t, cand: ipc.Candidates, lag: FrictionLag):
        """Forces (E, B, 3) on the bodies at positions x, contacts and min_distance (E,) each: the
        barrier of the pairs within d̂ `cand` and the friction of the step's lagged pairs (xᵗ the
        step's start positions)."""
        E, B = self.num_envs, self.max_bodies
        fcand, fmu = lag
        forces, contacts, min_distance = ipc.affine_contact_forces(
            x, x_t, self.rest, self.faces, self.edges, self.vertex_body, cand, fcand, fmu, E, B, self.dt,
            self.dhat, self.kappa, self.eps_v)
        return forces.reshape(E, B, 3), contacts, min_distance

    @property
    def contact_forces(self) -> torch.Tensor:
        """(E, B, 3) N: the contact force on every body at the end of the last step, −∇ of the
        barrier and of friction summed over its vertices. An adaptive step leaves it to the first
        read (as MuJoCo's `mj_contactForce`: most steps' forces are never read); a fixed-iteration
        step writes it into this tensor in place."""
        if self._pending_forces is not None:
            with ipc.trusted_inputs():  # tensors of the stepper's own making
                self._contact_forces = self._contact_forces_at(*self._pending_forces)[0]
            self._pending_forces = None
        return self._contact_forces

    @contact_forces.setter
    def contact_forces(self, value: torch.Tensor) -> None:
        self._pending_forces = None
        self._contact_forces = value

    # ---- state ------------------------------------------------------------------------------
    @property
    def poses(self) -> torch.Tensor:
        """(E, B, 7) body poses [p, quaternion of the polar rotation of A]; absent bodies: identity."""
        return q_to_pose(self.q)

    @property
    def velocities(self) -> torch.Tensor:
        """(E, B, 6) [v, ω]: frame-origin velocity (m/s) and angular velocity (rad/s)."""
        return q_velocity_to_twist(self.q, self.qdot)

    @property
    def body_mask(self) -> torch.Tensor:
        """(E, B) bool: the body exists in its environment (environments are padded)."""
        return self.kind != ABSENT

    def reset(self, env_ids=None) -> None:
        """Return the chosen environments (all by default) to their initial state and time 0."""
        ids = torch.arange(self.num_envs, device=self.device) if env_ids is None else torch.as_tensor(
            env_ids, dtype=torch.int64, device=self.device).reshape(-1)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.num_envs):
            raise ValueError(f"env_ids: expected ids in [0, {self.num_envs}), got {ids.tolist()}")
        self.q[ids] = self.packed.q_init[ids]
        self.qdot[ids] = torch.where((self.kind[ids] == DYNAMIC)[..., None], self.packed.qdot_init[ids], 0.0)
        self.time[ids] = 0.0
        self.contact_forces[ids] = 0.0

    def exact_min_distance(self) -> torch.Tensor:
        """(E,) exact minimum surface distance between an environment's bodies (BVH mesh_distance at
        the bodies' rigid poses), excluding pairs of scripted bodies; an independent check of
        `StepInfo.min_distance`. inf for environments with fewer than two bodies."""
        E, B = self.num_envs, self.max_bodies
        ia, ib = torch.triu_indices(B, B, 1, device=self.device)
        kind = self.kind
        pair_ok = (kind[:, ia] != ABSENT) & (kind[:, ib] != ABSENT) & (
            (kind[:, ia] == DYNAMIC) | (kind[:, ib] == DYNAMIC))
        env, k = torch.nonzero(pair_ok, as_tuple=True)
        out = torch.full((E,), float("inf"), dtype=self.dtype, device=self.device)
        if env.numel() == 0:
            return out
        a, b = ia[k], ib[k]
        poses = self.poses
        res = mesh_distance(self.library, self.mesh_id[env, a], self.mesh_id[env, b], poses[env, a], poses[env, b])
        return out.scatter_reduce(0, env, res.distance.to(self.dtype), "amin")

    def contact_pair_distances(self):
        """Exact distances of the body pairs in contact (some primitive pair closer than d̂): the
        (env, body_a, body_b) ids (K,) each and the BVH mesh distance (K,) m at the bodies' rigid
        poses. LOCC's min-|sd| at contacts (Table II) is this distance: 0 for an ideal simulator,
        the penetration depth or the gap of a false contact for others."""
        x = self.positions(self.q)
        cand = self._candidates(x, self.q)
        empty = torch.zeros(0, dtype=torch.int64, device=self.device)
        if cand.count == 0:
            return empty, empty, empty, torch.zeros(0, dtype=self.dtype, device=self.device)
        st = ipc.candidate_stencils(self.faces, self.edges, cand)
        pairs = torch.sort(self.vertex_body[st[:, [0, 3]]], dim=1).values
        pairs = torch.unique(pairs, dim=0)
        B = self.max_bodies
        env, a, b = pairs[:, 0] // B, pairs[:, 0] % B, pairs[:, 1] % B
        poses = self.poses
        res = mesh_distance(self.library, self.mesh_id[env, a], self.mesh_id[env, b], poses[env, a], poses[env, b])
        return env, a, b, res.distance.to(self.dtype)

    def _check_initial_state(self) -> None:
        if not bool(torch.isfinite(self.q).all()):
            raise ValueError("scenes: initial state contains NaN or Inf")
        B = self.max_bodies
        ia, ib = torch.triu_indices(B, B, 1, device=self.device)
        kind = self.kind
        pair_ok = (kind[:, ia] != ABSENT) & (kind[:, ib] != ABSENT) & (
            (kind[:, ia] == DYNAMIC) | (kind[:, ib] == DYNAMIC) | (kind[:, ia] != kind[:, ib]))
        pair_ok &= ~(((kind[:, ia] == STATIC) | (kind[:, ia] == KINEMATIC))
                     & ((kind[:, ib] == STATIC) | (kind[:, ib] == KINEMATIC)))
        env, k = torch.nonzero(pair_ok, as_tuple=True)
        if env.numel():
            a, b = ia[k], ib[k]
            poses = self.poses
            hit = mesh_collide(self.library, self.mesh_id[env, a], self.mesh_id[env, b], poses[env, a], poses[env, b])
            if bool(hit.any()):
                i = int(torch.nonzero(hit)[0])
                e, ba, bb = int(env[i]), int(a[i]), int(b[i])
                names = self.scenes[e].bodies
                raise ValueError(f"scenes: in environment {e}, bodies {ba} ({names[ba].name!r}) and {bb} "
                                 f"({names[bb].name!r}) overlap in their initial poses")
        x = self.positions(self.q)
        cand = self._candidates(x, self.q)
        if cand.count:
            d = contact_search.candidate_distances(self.packed, x, cand)
            if bool((d <= 0).any()):
                raise ValueError("scenes: some bodies touch (distance 0) in their initial poses; "
                                 "leave a gap > 0 between them")
