"""Batched implicit stepper: affine bodies with IPC contact, smooth friction and CCD.

Each step minimises the incremental potential of every environment (ZeMa eq. 2–4, 11):

    E(q) = Σ_b ½ w_b (q_b − q̂_b)ᵀ M_b (q_b − q̂_b)            inertia + gravity (dynamic bodies),
                                                                or a stiff pull to the script target
                                                                (kinematic bodies, w_b ≫ 1)
         + h² Σ_b κ_A V_b ‖A_b A_bᵀ − I‖²_F                    orthogonality (near-rigid bodies)
         + h² κ Σ_k b(d_k², d̂²)                                 IPC barrier between bodies
         + h² Σ_k μ_k N_k f₀(‖T_kᵀ (x − xᵗ)‖)                   smooth friction, lagged N_k and T_k

with q̂ = qᵗ + h q̇ᵗ + h² (g, 0) for dynamic bodies (M⁻¹ of the gravity load is exactly (g, 0) for
affine bodies). Newton with PSD-projected Hessians, dense per environment and solved by batched
Cholesky; every Newton step is capped by CCD so no iterate penetrates, then backtracked on energy.
Static bodies keep their DOFs fixed. Units: metres, seconds, kilograms; float64 throughout.

Environments share one packed vertex array. For the broad phase each environment is shifted along
x into its own slot (distances do not change under the shift; candidates that would still join two
environments are dropped), so one candidate search serves all of them.

With `fixed_iterations` a step is one uniform flow of fixed-shape tensor ops without host syncs (a
CUDA graph can capture it): fixed-capacity candidate lists padded with -1, masks instead of
compaction, a fixed number of line-search trials and Cholesky shifts, and the checks deferred to
`Stepper.validate()`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import NamedTuple

import torch

from contactnet.geometry.mesh import MeshLibrary
from contactnet.geometry.poses import normalize_poses, unit_quaternion_poses
from contactnet.ops import ipc
from contactnet.ops.mesh_query import mesh_collide, mesh_distance
from contactnet.sim.affine import (
    mass_matrix,
    orthogonality_energy,
    pose_to_q,
    q_to_pose,
    q_velocity_to_twist,
    twist_to_q_velocity,
)
from contactnet.sim.scene import Scene

__all__ = ["CandidateOverflow", "Stepper", "StepInfo", "StepNotConverged"]

_DYNAMIC, _STATIC, _KINEMATIC, _ABSENT = 0, 1, 2, 3
_KIND_CODE = {"dynamic": _DYNAMIC, "static": _STATIC, "kinematic": _KINEMATIC}


class StepNotConverged(RuntimeError):
    """A step whose Newton solve did not reach the tolerance (raised when on_failure='raise')."""


class CandidateOverflow(RuntimeError):
    """A fixed-capacity candidate search found more pairs than `max_candidates` / `max_contacts`
    (raised by `Stepper.validate`): contacts were dropped, so the state may penetrate."""


class StepInfo(NamedTuple):
    iterations: int  # Newton iterations run (the most over environments)
    newton_iterations: torch.Tensor  # (E,) int64 iterations each environment needed
    converged: torch.Tensor  # (E,) bool: reached the tolerance
    contacts: torch.Tensor  # (E,) int64 barrier pairs (within d̂) at the end of the step
    min_distance: torch.Tensor  # (E,) m, smallest distance between bodies; inf when all are ≥ d̂ apart
    candidate_overflow: torch.Tensor | None = None  # () bool: a fixed-capacity search dropped pairs


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
        padded with -1 (`ipc.collision_candidates_padded`): `max_candidates` for the swept broad
        phase of each Newton segment, `max_contacts` for the pairs closer than d̂ (friction,
        forces, the first iteration); pairs beyond that are dropped and reported, never silently
        (`StepInfo.candidate_overflow`, `validate`);
      - the line search tries exactly `line_search_steps` step lengths α, α/2, … (α the CCD bound);
      - a Hessian that Cholesky cannot factorise gets a fixed ladder of diagonal shifts; an
        environment none of them fixes stays where it is for that iteration;
      - a step does not check its result: an environment whose new state would be non-finite keeps
        its old one, and non-finite states, candidate overflow and non-convergence are recorded on
        the device and raised (or warned, per on_failure) by `validate()`, which syncs: call it
        outside the captured region, e.g. every few hundred steps and at the end.
    max_candidates, max_contacts: rows per kind of those padded lists (fixed_iterations only;
    every row costs work, used or not); None: 12 (max_contacts: 2) per vertex of the dynamic
    bodies + 64 (128) per environment, at least twice the peaks seen in the cube-stack and bowl
    scenes (a swept search: up to 5 edge–edge pairs per dynamic vertex; pairs within d̂: 1.6).
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
            if not (isinstance(value, (int, float)) and value > 0 and value < float("inf")):
                raise ValueError(f"{name}: expected a finite number > 0, got {value!r}")
        if kappa is not None and not (kappa > 0 and kappa < float("inf")):
            raise ValueError(f"kappa: expected a finite number > 0 or None, got {kappa!r}")
        if not (mu >= 0 and mu < float("inf")):
            raise ValueError(f"mu: expected a finite number >= 0, got {mu!r}")
        if on_failure not in ("warn", "raise", "ignore"):
            raise ValueError(f"on_failure: expected 'warn', 'raise' or 'ignore', got {on_failure!r}")
        if fixed_iterations is not None and not (isinstance(fixed_iterations, int) and fixed_iterations > 0):
            raise ValueError(f"fixed_iterations: expected a positive int or None, got {fixed_iterations!r}")
        if not (isinstance(max_iterations, int) and max_iterations > 0):
            raise ValueError(f"max_iterations: expected a positive int, got {max_iterations!r}")
        for value, name in ((max_candidates, "max_candidates"), (max_contacts, "max_contacts")):
            if value is not None and not (isinstance(value, int) and value > 0):
                raise ValueError(f"{name}: expected a positive int or None, got {value!r}")
        if not (isinstance(line_search_steps, int) and line_search_steps > 0):
            raise ValueError(f"line_search_steps: expected a positive int, got {line_search_steps!r}")
        self.scenes = scenes
        self.dt, self.dhat, self.mu, self.eps_v = float(dt), float(dhat), float(mu), float(eps_v)
        self.stiffness, self.kinematic_stiffness = float(stiffness), float(kinematic_stiffness)
        self.tolerance, self.max_iterations, self.fixed_iterations = float(tolerance), max_iterations, fixed_iterations
        self.on_failure = on_failure
        self.line_search_steps = line_search_steps
        self._uniform = False  # inside a fixed-iteration step: padded searches, no host syncs
        self.device = torch.device(device)
        self.dtype = torch.float64
        self.gravity = torch.as_tensor(gravity, dtype=self.dtype, device=self.device)
        if self.gravity.shape != (3,) or not bool(torch.isfinite(self.gravity).all()):
            raise ValueError(f"gravity: expected a finite (3,) vector in m/s², got {gravity!r}")
        self._pack(scenes)
        dynamic_vertices = int((self.kind.reshape(-1)[self.vertex_body] == _DYNAMIC).sum())
        self.max_candidates = max_candidates or 12 * dynamic_vertices + 64 * self.num_envs
        self.max_contacts = max_contacts or 2 * dynamic_vertices + 128 * self.num_envs
        # What fixed-iteration steps leave for validate(): per environment, and for the searches.
        self._pending_nonfinite = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self._pending_unconverged = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self._pending_overflow = torch.zeros((), dtype=torch.bool, device=self.device)
        self.kappa = float(kappa) if kappa is not None else self._auto_kappa()
        self._check_initial_state()

    # ---- packing ----------------------------------------------------------------------------
    def _pack(self, scenes: list[Scene]) -> None:
        f64, dev = self.dtype, self.device
        E, B = len(scenes), max(len(s) for s in scenes)
        self.num_envs, self.max_bodies = E, B
        kind = torch.full((E, B), _ABSENT, dtype=torch.int64)
        M = torch.eye(12, dtype=f64).repeat(E, B, 1, 1)
        ortho_w = torch.zeros(E, B, dtype=f64)
        mass = torch.zeros(E, B, dtype=f64)
        friction = torch.full((E, B), self.mu, dtype=f64)
        radius = torch.zeros(E, B, dtype=f64)
        q0 = torch.zeros(E, B, 12, dtype=f64)
        q0[..., 3:] = torch.eye(3, dtype=f64).reshape(9)
        twist0 = torch.zeros(E, B, 6, dtype=f64)
        rest, faces, body_of_vertex = [], [], []
        unique_meshes: dict[int, int] = {}
        mesh_id = torch.full((E, B), -1, dtype=torch.int64)
        trajectories: dict[int, tuple] = {}
        nv = 0
        for e, scene in enumerate(scenes):
            for b, body in enumerate(scene.bodies):
                kind[e, b] = _KIND_CODE[body.kind]
                M[e, b] = mass_matrix(body.mass)
                mass[e, b] = body.mass.mass
                ortho_w[e, b] = self.stiffness * body.mass.volume if body.kind == "dynamic" else 0.0
                if body.friction is not None:
                    friction[e, b] = body.friction
                v = body.mesh.vertices
                radius[e, b] = v.norm(dim=1).max()
                q0[e, b] = pose_to_q(body.pose)
                twist0[e, b] = body.velocity
                rest.append(v)
                faces.append(body.mesh.faces + nv)
                body_of_vertex.append(torch.full((v.shape[0],), e * B + b, dtype=torch.int64))
                nv += v.shape[0]
                mesh_id[e, b] = unique_meshes.setdefault(id(body.mesh), len(unique_meshes))
                if body.kind == "kinematic":
                    trajectories.setdefault(id(body.trajectory), (body.trajectory, []))[1].append((e, b))
        meshes = {}
        for scene in scenes:
            for body in scene.bodies:
                meshes.setdefault(unique_meshes[id(body.mesh)], body.mesh)
        self.library = MeshLibrary([meshes[i] for i in range(len(meshes))], dtype=f64, device=dev)
        self.mesh_id = mesh_id.to(dev)
        self.kind = kind.to(dev)
        self.M = M.to(dev)
        self.mass = mass.to(dev)
        self.ortho_weight = ortho_w.to(dev)
        self.friction = friction.to(dev)
        self.radius = radius.to(dev)
        self.rest = torch.cat(rest).to(dev).contiguous()
        self.faces = torch.cat(faces).to(dev).contiguous()
        self.edges = ipc.mesh_edges(self.faces)
        self.vertex_body = torch.cat(body_of_vertex).to(dev)  # flat body id e·B + b
        self.vertex_env = self.vertex_body // B
        self._xbar = torch.cat([torch.ones_like(self.rest[:, :1]), self.rest], dim=1)  # x̄ = (1, x0)
        # q = (p, a1, a2, a3) position of the (coordinate i, x̄ component α) DOF ordering
        order = [i if a == 0 else 3 + 3 * i + a - 1 for i in range(3) for a in range(4)]
        self._dof_order = torch.argsort(torch.tensor(order, device=dev))
        # Broad-phase groups: every dynamic body is its own group; an environment's scripted
        # (static and kinematic) bodies share one, since scripts never push each other.
        flat_kind = self.kind.reshape(-1)
        scripted = (flat_kind == _STATIC) | (flat_kind == _KINEMATIC)
        first_scripted = torch.where(scripted.reshape(E, B), torch.arange(B, device=dev), B).min(1).values
        group = torch.arange(E * B, device=dev)
        group = torch.where(scripted, torch.arange(E, device=dev).repeat_interleave(B) * B
                            + first_scripted.repeat_interleave(B), group)
        self.vertex_group = group[self.vertex_body].contiguous()
        self.free_dof = (self.kind == _DYNAMIC) | (self.kind == _KINEMATIC)  # (E, B)
        self._trajectories = [(fn, torch.tensor([e for e, _ in where], device=dev),
                               torch.tensor([b for _, b in where], device=dev)) for fn, where in trajectories.values()]
        self._q_init = q0.to(dev)
        self._qdot_init = twist_to_q_velocity(self._q_init, twist0.to(dev))
        self.time = torch.zeros(E, dtype=f64, device=dev)
        self._q_init = self._script_targets(self._q_init, self.time)  # kinematic bodies start on their script
        self.q = self._q_init.clone()
        self.qdot = torch.where((self.kind == _DYNAMIC)[..., None], self._qdot_init, 0.0)
        self.contact_forces = torch.zeros(E, B, 3, dtype=f64, device=dev)
        # Environment slots along x for the broad phase.
        x = self.positions(self.q)
        lo = torch.full((E, 3), float("inf"), dtype=f64, device=dev).scatter_reduce(
            0, self.vertex_env[:, None].expand(-1, 3), x, "amin")
        hi = torch.full((E, 3), -float("inf"), dtype=f64, device=dev).scatter_reduce(
            0, self.vertex_env[:, None].expand(-1, 3), x, "amax")
        spacing = float((hi - lo)[:, 0].max()) * 2 + 1.0
        self._slot = torch.zeros(E, 3, dtype=f64, device=dev)
        self._slot[:, 0] = torch.arange(E, dtype=f64, device=dev) * spacing

    def _script_targets(self, q: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """q with every kinematic body set to its trajectory's pose at the environments' times t."""
        q = q.clone()
        for fn, envs, bodies in self._trajectories:
            poses = torch.as_tensor(fn(t[envs]), dtype=self.dtype, device=self.device).expand(envs.shape[0], 7)
            if self._uniform:  # unchecked (a check syncs); a bad script shows up in validate()
                poses = unit_quaternion_poses(poses)
            else:
                poses = normalize_poses(poses, "trajectory(t)")
            q[envs, bodies] = pose_to_q(poses)
        return q

    def _auto_kappa(self) -> float:
        dynamic = self.kind == _DYNAMIC
        weight = float((self.mass * dynamic).max()) * float(self.gravity.norm())
        if weight == 0:
            weight = 1.0  # no gravity or no dynamic body: any scale works; keep it finite
        d0 = torch.tensor([(0.5 * self.dhat) ** 2], dtype=self.dtype)
        first = ipc.barrier(d0, self.dhat).first
        unit_force = float(-first[0]) * 2 * 0.5 * self.dhat  # |∂b/∂d| = |b'(d²)|·2d at d = d̂/2
        return 100.0 * weight / unit_force

    # ---- geometry ---------------------------------------------------------------------------
    def positions(self, q: torch.Tensor) -> torch.Tensor:
        """(V, 3) vertex positions x = A x0 + p of all environments' bodies (each in its own
        environment's frame), packed in scene order."""
        qf = q.reshape(-1, 12)[self.vertex_body]
        A = qf[:, 3:].reshape(-1, 3, 3)
        return torch.einsum("vij,vj->vi", A, self.rest) + qf[:, :3]

    def _candidates(self, x: torch.Tensor) -> ipc.Candidates:
        """Face–vertex and edge–edge pairs closer than d̂, between bodies of one environment."""
        return self._search(x, None, self.dhat)

    def _search(self, x0: torch.Tensor, x1: torch.Tensor | None, reach: float) -> ipc.Candidates:
        """Pairs closer than `reach` at x0 (x1 None), or whose boxes swept along x0 → x1 come
        within `reach` (a superset of the pairs that come within `reach` on the way).

        Only primitives whose box comes within `reach` of another collision group's box in their
        environment enter the broad phase: a bowl's far wall, or a resting body's top, never can
        touch anything this step, and left in they would only add grid entries and box tests."""
        lo = x0 if x1 is None else torch.minimum(x0, x1)
        hi = x0 if x1 is None else torch.maximum(x0, x1)
        G = self.num_envs * self.max_bodies
        index = self.vertex_group[:, None].expand(-1, 3)
        glo = torch.full((G, 3), float("inf"), dtype=x0.dtype, device=x0.device).scatter_reduce(0, index, lo, "amin")
        ghi = torch.full((G, 3), -float("inf"), dtype=x0.dtype, device=x0.device).scatter_reduce(0, index, hi, "amax")
        glo, ghi = glo - reach, ghi + reach
        B = self.max_bodies
        env_groups = torch.arange(G, device=x0.device).reshape(self.num_envs, B)  # groups of each env

        def near_other_group(prim_lo, prim_hi, prim_group):
            others = env_groups[prim_group // B]  # (N, B)
            overlap = ((prim_lo[:, None, :] <= ghi[others]) & (prim_hi[:, None, :] >= glo[others])).all(-1)
            return (overlap & (others != prim_group[:, None])).any(1)

        flo, fhi = lo[self.faces].amin(1), hi[self.faces].amax(1)
        elo, ehi = lo[self.edges].amin(1), hi[self.edges].amax(1)
        if self._uniform:
            return self._search_padded(x0, x1, reach, near_other_group(lo, hi, self.vertex_group),
                                       near_other_group(flo, fhi, self.vertex_group[self.faces[:, 0]]),
                                       near_other_group(elo, ehi, self.vertex_group[self.edges[:, 0]]))
        keep_v = torch.nonzero(near_other_group(lo, hi, self.vertex_group)).flatten()
        keep_f = torch.nonzero(near_other_group(flo, fhi, self.vertex_group[self.faces[:, 0]])).flatten()
        keep_e = torch.nonzero(near_other_group(elo, ehi, self.vertex_group[self.edges[:, 0]])).flatten()
        used = torch.unique(torch.cat([keep_v, self.faces[keep_f].reshape(-1), self.edges[keep_e].reshape(-1)]))
        local = torch.full((x0.shape[0],), -1, dtype=torch.int64, device=x0.device)
        local[used] = torch.arange(used.numel(), device=x0.device)
        slot = self._slot[self.vertex_env[used]]
        faces, edges, group = local[self.faces[keep_f]], local[self.edges[keep_e]], self.vertex_group[used]
        if x1 is None:
            c = ipc.collision_candidates(x0[used] + slot, faces, edges, reach, group)
        else:
            c = ipc.swept_candidates(x0[used] + slot, x1[used] + slot, faces, edges, reach, group)
        # Vertices that came in only as corners of kept faces / edges are points too: harmless
        # (any pair they form is a real candidate).
        fv = torch.stack([used[c.face_vertex[:, 0]], keep_f[c.face_vertex[:, 1]]], 1)
        ee = keep_e[c.edge_edge]
        ee = torch.sort(ee, dim=1).values
        return self._same_env(ipc.Candidates(fv.contiguous(), ee.contiguous()))

    def _search_padded(self, x0, x1, reach, keep_v, keep_f, keep_e) -> ipc.Candidates:
        """`_search` with fixed shapes: primitives far from other groups are masked out of the sweep
        instead of compacted away, the lists have `max_contacts` (x1 None) or `max_candidates`
        rows (-1 padding) and an overflow is recorded for `validate`."""
        slot = self._slot[self.vertex_env]
        masks = dict(vertex_body=self.vertex_group, vertex_active=keep_v, face_active=keep_f, edge_active=keep_e)
        if x1 is None:
            found = ipc.collision_candidates_padded(x0 + slot, self.faces, self.edges, reach, self.max_contacts,
                                                    **masks)
        else:
            found = ipc.swept_candidates_padded(x0 + slot, x1 + slot, self.faces, self.edges, self.max_candidates,
                                                reach, **masks)
        self._pending_overflow |= found.overflow
        self._step_overflow |= found.overflow
        fv, ee = found.candidates
        # Padding rows index -1 (the last element): harmless to gather, masked here.
        fv_ok, ee_ok = self._same_env_masks(fv, ee)
        fv_ok &= fv[:, 0] >= 0
        ee_ok &= ee[:, 0] >= 0
        return ipc.Candidates(torch.where(fv_ok[:, None], fv, -1), torch.where(ee_ok[:, None], ee, -1))

    def _same_env_masks(self, fv: torch.Tensor, ee: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Which face–vertex / edge–edge pairs join primitives of one environment."""
        env = self.vertex_env
        return (env[fv[:, 0]] == env[self.faces[fv[:, 1], 0]],
                env[self.edges[ee[:, 0], 0]] == env[self.edges[ee[:, 1], 0]])

    def _same_env(self, c: ipc.Candidates) -> ipc.Candidates:
        fv, ee = c
        fv_ok, ee_ok = self._same_env_masks(fv, ee)
        return ipc.Candidates(fv[fv_ok].contiguous(), ee[ee_ok].contiguous())

    def _candidate_env(self, stencils: torch.Tensor) -> torch.Tensor:
        return self.vertex_env[stencils[:, 0]]

    def _pair_friction(self, stencils: torch.Tensor) -> torch.Tensor:
        mu = self.friction.reshape(-1)
        return torch.sqrt(mu[self.vertex_body[stencils[:, 0]]] * mu[self.vertex_body[stencils[:, 3]]])

    # ---- energy and derivatives -------------------------------------------------------------
    def _targets(self, time_next: torch.Tensor):
        """q̂ and the weights w of the inertia term for the coming step."""
        h = self.dt
        g = torch.zeros(12, dtype=self.dtype, device=self.device)
        g[:3] = self.gravity
        q_hat = self.q + h * self.qdot + h * h * g
        q_hat = torch.where((self.kind == _KINEMATIC)[..., None], self._script_targets(self.q, time_next), q_hat)
        w = torch.where(self.kind == _DYNAMIC, 1.0, 0.0) + torch.where(self.kind == _KINEMATIC,
                                                                       self.kinematic_stiffness, 0.0)
        return q_hat, w.to(self.dtype)

    def _energy(self, q, q_hat, w, x_t, lag, cand: ipc.Candidates | None = None) -> torch.Tensor:
        """(E,) incremental potential of every environment at q. cand: a superset of the pairs
        closer than d̂ at q (searched when None)."""
        h2 = self.dt ** 2
        dq = q - q_hat
        energy = 0.5 * (w * torch.einsum("ebi,ebij,ebj->eb", dq, self.M, dq)).sum(1)
        A = q.reshape(-1, 12)[:, 3:].reshape(-1, 3, 3)
        ortho = self.ortho_weight.reshape(-1)
        phi = ortho * ((A @ A.transpose(1, 2) - torch.eye(3, dtype=q.dtype, device=q.device)) ** 2).sum((1, 2))
        energy = energy + h2 * phi.reshape(self.num_envs, -1).sum(1)
        x = self.positions(q)
        cand = self._candidates(x) if cand is None else cand
        if cand.count:
            b = ipc.barrier_potential(x, self.faces, self.edges, cand, self.dhat, h2 * self.kappa, self.rest,
                                      per_candidate=True)
            st = ipc.candidate_stencils(self.faces, self.edges, cand)
            energy = energy.index_add(0, self._candidate_env(st), b)
        fcand, fmu = lag
        if fcand.count:
            d = ipc.friction_potential(x - x_t, x_t, self.faces, self.edges, fcand, self.dhat, self.kappa, 1.0,
                                       self.eps_v * self.dt, self.rest, per_candidate=True)
            st = ipc.candidate_stencils(self.faces, self.edges, fcand)
            energy = energy.index_add(0, self._candidate_env(st), h2 * fmu * d)
        return energy

    def _gradient_hessian(self, q, q_hat, w, x_t, lag, cand: ipc.Candidates | None = None):
        """Gradient (E, B·12) and dense PSD-projected Hessian (E, B·12, B·12) of the potential
        (cand as in `_energy`)."""
        E, B = self.num_envs, self.max_bodies
        n, h2 = 12 * B, self.dt ** 2
        dq = q - q_hat
        grad = w[..., None] * torch.einsum("ebij,ebj->ebi", self.M, dq)  # (E, B, 12)
        H = torch.zeros(E, B, 12, B, 12, dtype=q.dtype, device=q.device)
        diag = w[..., None, None] * self.M  # (E, B, 12, 12)
        A = q.reshape(-1, 12)[:, 3:].reshape(-1, 3, 3)
        _, og, oh = orthogonality_energy(A, self.ortho_weight.reshape(-1))
        grad[..., 3:] += h2 * og.reshape(E, B, 9)
        diag[..., 3:, 3:] += h2 * oh.reshape(E, B, 9, 9)
        idx = torch.arange(B, device=q.device)
        H[:, idx, :, idx, :] = diag.permute(1, 0, 2, 3)
        x = self.positions(q)
        locals_g, locals_h, stencils, cands = [], [], [], []
        cand = self._candidates(x) if cand is None else cand
        if cand.count:
            hb = ipc.barrier_potential_hessian(x, self.faces, self.edges, cand, self.dhat, h2 * self.kappa,
                                               self.rest, project_to_psd=True, assemble=False)
            locals_g.append(ipc.barrier_potential_gradient(x, self.faces, self.edges, cand, self.dhat,
                                                           h2 * self.kappa, self.rest, per_candidate=True))
            locals_h.append(hb.local)
            stencils.append(hb.stencils)
            cands.append(cand)
        fcand, fmu = lag
        if fcand.count:
            u = x - x_t
            args = (u, x_t, self.faces, self.edges, fcand, self.dhat, self.kappa, 1.0, self.eps_v * self.dt, self.rest)
            hf = ipc.friction_potential_hessian(*args, assemble=False)
            scale = (h2 * fmu)[:, None]
            locals_g.append(scale * ipc.friction_potential_gradient(*args, per_candidate=True))
            locals_h.append(scale[..., None] * hf.local)
            stencils.append(hf.stencils)
            cands.append(fcand)
        if stencils:
            gy, hy, body = self._chain_rule(torch.cat(stencils), torch.cat(locals_g), torch.cat(locals_h),
                                            torch.cat([torch.arange(c.count, device=q.device) < c.face_vertex.shape[0]
                                                       for c in cands]))
            g_pair = torch.zeros(E * B, 12, dtype=q.dtype, device=q.device).index_add_(
                0, body.reshape(-1), gy.reshape(-1, 12))
            grad = grad + self._to_q_order(g_pair, 1).reshape(E, B, 12)
            # Sum whole 144-entry body-pair blocks into (E, B_s, B_t, α, i, j, β): one index per
            # block (env·B² + b_s·B + b_t = body_s·B + b_t) rather than one per entry; reorder once.
            key = body[:, :, None] * B + (body % B)[:, None, :]  # (N, s, t)
            blocks = hy.permute(0, 1, 5, 2, 3, 4, 6).reshape(-1, 144)  # [(n, s, t), (α, i, j, β)]
            G = torch.zeros(E * B * B, 144, dtype=q.dtype, device=q.device).index_add_(0, key.reshape(-1), blocks)
            G = G.reshape(E, B, B, 4, 3, 3, 4).permute(0, 1, 4, 3, 2, 5, 6).reshape(E, B, 12, B, 12)
            H = H + self._to_q_order(self._to_q_order(G, 2), 4)
        return grad.reshape(E, n), H.reshape(E, n, n)

    def _chain_rule(self, st, lg, lh, is_fv):
        """Stencil derivatives → the two bodies of each pair (ZeMa eq. 7–8): ∇ỹ = J̃ᵀ ∇x̃ and
        ∇²ỹ = J̃ᵀ ∇²x̃ J̃, J̃ the stencil vertices' affine Jacobians.

        Face–vertex stencils (p | t0 t1 t2) and edge–edge stencils (ea0 ea1 | eb0 eb1) split 1 | 3
        and 2 | 2 between their two bodies. With DOFs ordered (p_i, a_i) per coordinate i, a
        vertex's Jacobian is I₃ ⊗ x̄ᵀ, x̄ = (1, x0), so a body-pair block is
        Σ_{v∈s, w∈t} H_vw ⊗ x̄_v x̄_wᵀ: two small batched products instead of 12 × 24 Jacobians.
        Returns gradients (N, 2, 3, 4) [s, i, α], blocks (N, 2, 4, 3, 3, 2, 4) [s, α, i, j, t, β]
        in that per-coordinate order (see `_to_q_order`) and the (N, 2) flat body ids.
        """
        N = st.shape[0]
        member = torch.zeros(N, 4, 2, dtype=lg.dtype, device=lg.device)  # vertex v belongs to body s
        member[:, 0, 0] = 1
        member[:, 2:, 1] = 1
        member[:, 1, 1] = is_fv.to(lg.dtype)
        member[:, 1, 0] = (~is_fv).to(lg.dtype)
        X = (member[:, :, :, None] * self._xbar[st][:, :, None, :]).reshape(N, 4, 8)  # [v, (s, α)]
        H = lh.reshape(N, 4, 3, 4, 3).permute(0, 1, 2, 4, 3).reshape(N, 36, 4)  # [(v, i, j), w]
        T = torch.bmm(H, X).reshape(N, 4, 72)  # Σ_w H_vw x̄_w: [v, (i, j, t, β)]
        hy = torch.bmm(X.transpose(1, 2), T).reshape(N, 2, 4, 3, 3, 2, 4)  # [s, α, i, j, t, β]
        gy = torch.einsum("nvsa,nvi->nsia", X.reshape(N, 4, 2, 4), lg.reshape(N, 4, 3))
        return gy, hy, self.vertex_body[st[:, [0, 3]]]

    def _to_q_order(self, t: torch.Tensor, dim: int) -> torch.Tensor:
        """Reorder a dimension of 12 DOFs from (coordinate i, x̄ component α) to q = (p, a1, a2, a3)."""
        return t.index_select(dim, self._dof_order)

    def _solve(self, grad, H) -> tuple[torch.Tensor, torch.Tensor]:
        """Newton direction −H⁻¹g per environment with the DOFs of static and absent bodies fixed,
        and (E,) bool: H factorised. In a fixed-iteration step the direction is 0 where H did not
        factorise and non-finite where grad or H are."""
        E, n = grad.shape
        free = self.free_dof.repeat_interleave(12, dim=1)  # (E, n)
        fixed = ~free
        H = H.masked_fill(fixed[:, :, None] | fixed[:, None, :], 0.0)
        H = H + torch.diag_embed(fixed.to(H.dtype))
        grad = grad.masked_fill(fixed, 0.0)
        scale = torch.diagonal(H, dim1=1, dim2=2).abs().amax(1).clamp_min(1e-300)
        eye = torch.eye(n, dtype=H.dtype, device=H.device)
        if self._uniform:
            # A fixed ladder of shifts; each environment keeps the first that factorises.
            L, info = torch.linalg.cholesky_ex(H)
            for shift in (1e-9, 1e-4):
                L2, info2 = torch.linalg.cholesky_ex(H + (shift * scale)[:, None, None] * eye)
                use = (info != 0) & (info2 == 0)
                L = torch.where(use[:, None, None], L2, L)
                info = torch.where(use, 0, info)
            dq = -torch.cholesky_solve(grad[..., None], L)[..., 0]
            finite_input = torch.isfinite(grad).all(1) & torch.isfinite(H).all((1, 2))
            return torch.where(((info == 0) | ~finite_input)[:, None], dq, 0.0), info == 0
        shift = torch.zeros(E, dtype=H.dtype, device=H.device)
        for _ in range(8):  # regularise singular systems (flat shells, free affine modes) only
            L, info = torch.linalg.cholesky_ex(H + (shift * scale)[:, None, None] * eye)
            bad = info != 0
            if not bool(bad.any()):
                break
            shift = torch.where(bad, torch.where(shift == 0, 1e-12, shift * 100), shift)
        return -torch.cholesky_solve(grad[..., None], L)[..., 0], info == 0

    def _step_bound(self, dq: torch.Tensor) -> torch.Tensor:
        """(E,) bound on the largest vertex displacement of a step dq (E, B, 12)."""
        return (dq[..., :3].norm(dim=-1) + dq[..., 3:].norm(dim=-1) * self.radius).amax(1)

    def _ccd(self, q0, q1, cand: ipc.Candidates | None = None) -> torch.Tensor:
        """(E,) largest collision-free fraction of the move q0 → q1 (conservative). cand: a
        superset of the pairs whose swept boxes meet (searched when None)."""
        x0, x1 = self.positions(q0), self.positions(q1)
        c = self._search(x0, x1, 0.0) if cand is None else cand
        alpha = torch.ones(self.num_envs, dtype=self.dtype, device=self.device)
        if c.count:  # a shape, not a value: no sync
            toi = ipc.ccd_time_of_impact(x0, x1, self.faces, self.edges, c, 0.0, 1.0, 0.9)
            st = ipc.candidate_stencils(self.faces, self.edges, c)
            alpha = alpha.scatter_reduce(0, self._candidate_env(st), toi, "amin")
        return alpha

    # ---- stepping ---------------------------------------------------------------------------
    def step(self) -> StepInfo:
        """Advance every environment by dt. Returns a `StepInfo`.

        With fixed_iterations the step runs no host sync and checks nothing (call `validate()`),
        and it updates `q`, `qdot`, `time` and `contact_forces` in place, so replaying a CUDA graph
        captured around one `step()` advances the stepper."""
        if self.fixed_iterations is None:
            return self._step()
        self._uniform = True
        try:
            with ipc.trusted_indices():
                return self._step()
        finally:
            self._uniform = False

    def validate(self) -> None:
        """Raise on what fixed-iteration steps since the last call recorded (they check nothing, to
        stay free of host syncs; this call syncs): FloatingPointError for environments whose state
        went non-finite (they kept their last finite state), CandidateOverflow when a candidate
        search found more pairs of a kind than its capacity (contacts were dropped: raise
        max_candidates / max_contacts and re-run), then non-convergence within fixed_iterations
        (or a Hessian that did not factorise) as on_failure says: warn, raise StepNotConverged,
        or ignore. Clears the record. Adaptive steps check themselves, so after them this finds
        nothing."""
        nonfinite, unconverged = self._pending_nonfinite.clone(), self._pending_unconverged.clone()
        overflow = bool(self._pending_overflow)
        self._pending_nonfinite.zero_()
        self._pending_unconverged.zero_()
        self._pending_overflow.zero_()
        if bool(nonfinite.any()):
            bad = torch.nonzero(nonfinite).flatten().tolist()
            raise FloatingPointError(f"a step produced a non-finite state in environments {bad} "
                                     "(they kept their last finite state)")
        if overflow:
            raise CandidateOverflow(f"a candidate search found more pairs of one kind than its capacity "
                                    f"(max_candidates={self.max_candidates}, max_contacts={self.max_contacts}); "
                                    "contacts were dropped (raise them)")
        if bool(unconverged.any()):
            self._report_unconverged(unconverged, self.fixed_iterations, stacklevel=3)

    def _report_unconverged(self, unconverged: torch.Tensor, total: int, stacklevel: int) -> None:
        if self.on_failure == "ignore":
            return
        envs = torch.nonzero(unconverged).flatten().tolist()
        msg = (f"Newton did not converge within {total} iterations in environments {envs[:10]}"
               f"{' ...' if len(envs) > 10 else ''} (state is intersection-free but not at the minimum)")
        if self.on_failure == "raise":
            raise StepNotConverged(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=stacklevel)

    def _step(self) -> StepInfo:
        E, B = self.num_envs, self.max_bodies
        self._step_overflow = torch.zeros((), dtype=torch.bool, device=self.device)
        time_next = self.time + self.dt
        q_hat, w = self._targets(time_next)
        x_t = self.positions(self.q)
        fc = self._candidates(x_t)
        lag = (fc, self._pair_friction(ipc.candidate_stencils(self.faces, self.edges, fc)))
        q = self.q.clone()
        energy = self._energy(q, q_hat, w, x_t, lag)
        done = torch.zeros(E, dtype=torch.bool, device=self.device)
        converged = torch.zeros(E, dtype=torch.bool, device=self.device)
        iterations = torch.zeros(E, dtype=torch.int64, device=self.device)
        broken = ~torch.isfinite(energy)  # fixed mode: non-finite energy or Newton direction
        stuck = torch.zeros(E, dtype=torch.bool, device=self.device)  # fixed mode: H never factorised
        fixed = self.fixed_iterations
        total = fixed if fixed is not None else self.max_iterations
        it = 0
        near = None  # pairs that can come within d̂ along the last Newton segment
        for it in range(1, total + 1):
            grad, H = self._gradient_hessian(q, q_hat, w, x_t, lag, near)
            dq, factorised = self._solve(grad, H)
            dq = dq.reshape(E, B, 12)
            if fixed is not None:  # recorded for validate(); no step for such an environment
                broken |= ~torch.isfinite(dq).all(2).all(1)
                stuck |= ~factorised
                dq = torch.where(broken[:, None, None], 0.0, dq)
            small = self._step_bound(dq) <= self.tolerance * self.dt
            converged |= small & ~done
            done |= small
            if fixed is None and bool(done.all()):
                it -= 1
                break
            iterations += (~done).long()
            dq = torch.where(done[:, None, None], 0.0, dq)
            # One swept search serves the whole segment q → q + dq: every pair that meets (CCD)
            # or comes within d̂ (line-search energies, the next Newton iteration) on the way.
            near = self._search(self.positions(q), self.positions(q + dq), self.dhat)
            alpha = self._ccd(q, q + dq, near)
            accepted = done.clone()
            for _ in range(40 if fixed is None else self.line_search_steps):
                trial = q + alpha[:, None, None] * dq
                e_trial = self._energy(trial, q_hat, w, x_t, lag, near)
                ok = (e_trial <= energy + 1e-12 * energy.abs()) & ~accepted
                q = torch.where(ok[:, None, None], trial, q)
                energy = torch.where(ok, e_trial, energy)
                accepted |= ok
                if fixed is None and bool(accepted.all()):
                    break
                alpha = torch.where(accepted, alpha, 0.5 * alpha)
            # No decrease along a descent direction: the iterate is stationary to rounding.
            converged |= ~accepted & ~done
            done |= ~accepted
        if fixed is None:
            if not bool(torch.isfinite(q).all()):
                bad = torch.nonzero(~torch.isfinite(q).all(2).all(1)).flatten().tolist()
                raise FloatingPointError(f"step produced a non-finite state in environments {bad}")
        else:  # recorded for validate(); a non-finite environment keeps its state
            finite = torch.isfinite(q).all(2).all(1) & ~broken
            converged &= ~stuck
            self._pending_nonfinite |= ~finite
            self._pending_unconverged |= ~converged
            q = torch.where(finite[:, None, None], q, self.q)
        qdot = torch.where(self.free_dof[..., None], (q - self.q) / self.dt, 0.0)
        qdot = torch.where((self.kind == _DYNAMIC)[..., None], qdot, 0.0)
        if self._uniform:  # in place, so a replayed CUDA graph advances the state
            self.qdot.copy_(qdot)
            self.q.copy_(q)
            self.time.copy_(time_next)
        else:
            self.qdot, self.q, self.time = qdot, q, time_next
        info = self._finish(x_t, lag, iterations, converged, it)
        if fixed is None and not bool(converged.all()):
            self._report_unconverged(~converged, total, stacklevel=4)
        return info

    def _finish(self, x_t, lag, iterations, converged, it) -> StepInfo:
        """Contact forces (−∇ of barrier and friction per body) and contact statistics."""
        E, B = self.num_envs, self.max_bodies
        x = self.positions(self.q)
        cand = self._candidates(x)
        forces = torch.zeros(E * B, 3, dtype=self.dtype, device=self.device)
        contacts = torch.zeros(E, dtype=torch.int64, device=self.device)
        min_distance = torch.full((E,), float("inf"), dtype=self.dtype, device=self.device)
        if cand.count:
            st = ipc.candidate_stencils(self.faces, self.edges, cand)
            g = ipc.barrier_potential_gradient(x, self.faces, self.edges, cand, self.dhat, self.kappa, self.rest,
                                               per_candidate=True)
            forces.index_add_(0, self.vertex_body[st].reshape(-1), -g.reshape(-1, 3))
            env = self._candidate_env(st)
            real = torch.cat([cand.face_vertex[:, 0], cand.edge_edge[:, 0]]) >= 0  # not -1 padding
            contacts.index_add_(0, env, real.long())
            d = torch.where(real, self._candidate_distances(x, cand), float("inf"))
            min_distance = min_distance.scatter_reduce(0, env, d, "amin")
        fcand, fmu = lag
        if fcand.count:
            st = ipc.candidate_stencils(self.faces, self.edges, fcand)
            g = ipc.friction_potential_gradient(x - x_t, x_t, self.faces, self.edges, fcand, self.dhat, self.kappa,
                                                1.0, self.eps_v * self.dt, self.rest, per_candidate=True)
            forces.index_add_(0, self.vertex_body[st].reshape(-1), -(fmu[:, None] * g).reshape(-1, 3))
        if self._uniform:
            self.contact_forces.copy_(forces.reshape(E, B, 3))
        else:
            self.contact_forces = forces.reshape(E, B, 3)
        return StepInfo(it, iterations, converged, contacts, min_distance, self._step_overflow)

    def _candidate_distances(self, x, cand: ipc.Candidates) -> torch.Tensor:
        fv, ee = cand
        p, t = x[fv[:, 0]], x[self.faces[fv[:, 1]]]
        d_fv = ipc.point_triangle_distance_squared(p, t[:, 0].contiguous(), t[:, 1].contiguous(), t[:, 2].contiguous())
        ea, eb = x[self.edges[ee[:, 0]]], x[self.edges[ee[:, 1]]]
        d_ee = ipc.edge_edge_distance_squared(ea[:, 0].contiguous(), ea[:, 1].contiguous(),
                                              eb[:, 0].contiguous(), eb[:, 1].contiguous())
        return torch.cat([d_fv, d_ee]).clamp_min(0).sqrt()

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
        return self.kind != _ABSENT

    def reset(self, env_ids=None) -> None:
        """Return the chosen environments (all by default) to their initial state and time 0."""
        ids = torch.arange(self.num_envs, device=self.device) if env_ids is None else torch.as_tensor(
            env_ids, dtype=torch.int64, device=self.device).reshape(-1)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.num_envs):
            raise ValueError(f"env_ids: expected ids in [0, {self.num_envs}), got {ids.tolist()}")
        self.q[ids] = self._q_init[ids]
        self.qdot[ids] = torch.where((self.kind[ids] == _DYNAMIC)[..., None], self._qdot_init[ids], 0.0)
        self.time[ids] = 0.0
        self.contact_forces[ids] = 0.0

    def exact_min_distance(self) -> torch.Tensor:
        """(E,) exact minimum surface distance between an environment's bodies (BVH mesh_distance at
        the bodies' rigid poses), excluding pairs of scripted bodies; an independent check of
        `StepInfo.min_distance`. inf for environments with fewer than two bodies."""
        E, B = self.num_envs, self.max_bodies
        ia, ib = torch.triu_indices(B, B, 1, device=self.device)
        kind = self.kind
        pair_ok = (kind[:, ia] != _ABSENT) & (kind[:, ib] != _ABSENT) & (
            (kind[:, ia] == _DYNAMIC) | (kind[:, ib] == _DYNAMIC))
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
        cand = self._candidates(x)
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
        E, B = self.num_envs, self.max_bodies
        ia, ib = torch.triu_indices(B, B, 1, device=self.device)
        kind = self.kind
        pair_ok = (kind[:, ia] != _ABSENT) & (kind[:, ib] != _ABSENT) & (
            (kind[:, ia] == _DYNAMIC) | (kind[:, ib] == _DYNAMIC) | (kind[:, ia] != kind[:, ib]))
        pair_ok &= ~(((kind[:, ia] == _STATIC) | (kind[:, ia] == _KINEMATIC))
                     & ((kind[:, ib] == _STATIC) | (kind[:, ib] == _KINEMATIC)))
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
        cand = self._candidates(x)
        if cand.count:
            d = self._candidate_distances(x, cand)
            if bool((d <= 0).any()):
                raise ValueError("scenes: some bodies touch (distance 0) in their initial poses; "
                                 "leave a gap > 0 between them")
