"""An independent check that a stepper never lets bodies penetrate, for the scene and stepper tests.

The stepper's own `StepInfo.min_distance` only looks at primitive pairs within d̂ (it is +inf when
none is), so a body that tunnels through another, or ends up wholly inside it, passes it. This
oracle uses nothing of the stepper but its public state (`q`, `positions`, `poses`, `scenes`) and
checks, for every step:

- the end state: `mesh_collide` (surface intersection or containment, by the winding number) is
  false for every pair of bodies that can meet (at least one of them dynamic), at their poses;
- the motion: every vertex moves on a straight line from its position before the step to its
  position after it (the affine DOFs move linearly, so the vertices do), and the CCD kernels find
  no time of impact on that motion, for every face–vertex and edge–edge pair of two such bodies.

Checks are recorded per step and run batched (every recorded step's pairs in one `mesh_collide`
call, every step's motion in one swept broad phase and one CCD call), so checking every step costs
about what the old every-50-steps distance check did.
"""

from __future__ import annotations

import torch

from contactnet.geometry.mesh import MeshLibrary
from contactnet.ops import ipc, mesh_collide, mesh_distance

# ACCD stops once a pair's gap has shrunk to (1 - s) of its initial value. With s = 0.99 a step
# is reported unsafe only when some pair's gap shrank by 99% or more during it (or closed): the
# stepper's own line search keeps 10% (s = 0.9) of the gap of every Newton segment.
CCD_RESCALING = 0.99


class PenetrationOracle:
    """Wraps `sim`: call `step()` instead of `sim.step()`, then `check()` (every step recorded
    since the last check is verified; raises AssertionError naming the first bad step)."""

    def __init__(self, sim):
        self.sim = sim
        E = len(sim.scenes)
        meshes, mesh_index, body_of_vertex, faces, kinds = [], {}, [], [], []
        nv = 0
        self.mesh_id = []  # per (env, body)
        for e, scene in enumerate(sim.scenes):
            ids = []
            for b, body in enumerate(scene.bodies):
                m = mesh_index.setdefault(id(body.mesh), len(meshes))
                if m == len(meshes):
                    meshes.append(body.mesh)
                ids.append(m)
                # Scripted (static, kinematic) bodies of an environment form one group: scripts may
                # overlap each other (a bowl standing on the ground); only pairs with a dynamic
                # body are checked, as the stepper promises.
                group = e * (sim.max_bodies + 1) + (b if body.kind == "dynamic" else sim.max_bodies)
                kinds.append(body.kind)
                n = body.mesh.vertices.shape[0]
                body_of_vertex.append(torch.full((n,), group, dtype=torch.int64))
                faces.append(body.mesh.faces + nv)
                nv += n
            self.mesh_id.append(ids)
        self.library = MeshLibrary(meshes, dtype=torch.float64, device=sim.device)
        self.group = torch.cat(body_of_vertex).to(sim.device)
        self.env_of_vertex = self.group // (sim.max_bodies + 1)
        self.faces = torch.cat(faces).to(sim.device)
        self.edges = ipc.mesh_edges(self.faces)
        pairs = [(e, a, b) for e, scene in enumerate(sim.scenes) for a in range(len(scene.bodies))
                 for b in range(a + 1, len(scene.bodies))
                 if "dynamic" in (scene.bodies[a].kind, scene.bodies[b].kind)]
        self.pairs = torch.tensor(pairs, dtype=torch.int64, device=sim.device).reshape(-1, 3)
        ids = torch.tensor([[m for m in row] + [0] * (sim.max_bodies - len(row)) for row in self.mesh_id],
                           dtype=torch.int64, device=sim.device).reshape(E, sim.max_bodies)
        self.ids_a = ids[self.pairs[:, 0], self.pairs[:, 1]]
        self.ids_b = ids[self.pairs[:, 0], self.pairs[:, 2]]
        self.steps_checked = 0
        self._positions = [sim.positions(sim.q).clone()]  # state before the first unchecked step
        self._poses = []

    def step(self):
        """`sim.step()`, recording the new state."""
        info = self.sim.step()
        self.record()
        return info

    def record(self) -> None:
        """Record the stepper's current state as the end of one more step."""
        self._positions.append(self.sim.positions(self.sim.q).clone())
        self._poses.append(self.sim.poses.clone())

    def check(self) -> None:
        """Verify every step recorded since the last check; keep the last state as the next start."""
        if not self._poses:
            return
        first = self.steps_checked
        self._check_end_states(torch.stack(self._poses), first)
        self._check_motions(torch.stack(self._positions), first)
        self.steps_checked += len(self._poses)
        self._positions = self._positions[-1:]
        self._poses = []

    def pair_distances(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The (P, 3) (env, body_a, body_b) pairs that can meet and their exact surface distances
        (P,) m at the current poses (BVH `mesh_distance`)."""
        e, a, b = self.pairs.unbind(1)
        poses = self.sim.poses
        return self.pairs, mesh_distance(self.library, self.ids_a, self.ids_b, poses[e, a], poses[e, b]).distance

    def _check_end_states(self, poses: torch.Tensor, first: int) -> None:
        """poses (S, E, B, 7): no pair collides at any recorded step."""
        if self.pairs.shape[0] == 0:
            return
        S, P = poses.shape[0], self.pairs.shape[0]
        e, a, b = self.pairs.unbind(1)
        pa = poses[:, e, a].reshape(S * P, 7)
        pb = poses[:, e, b].reshape(S * P, 7)
        hit = mesh_collide(self.library, self.ids_a.repeat(S), self.ids_b.repeat(S), pa, pb).reshape(S, P)
        if bool(hit.any()):
            s, k = (int(i) for i in torch.nonzero(hit)[0])
            env, ba, bb = (int(i) for i in self.pairs[k])
            names = self.sim.scenes[env].bodies
            raise AssertionError(f"step {first + s}: bodies {ba} ({names[ba].name!r}) and {bb} ({names[bb].name!r}) "
                                 f"of environment {env} collide (mesh_collide)")

    def _check_motions(self, positions: torch.Tensor, first: int) -> None:
        """positions (S + 1, V, 3): every step's straight-line motion is free of impacts."""
        S, V = positions.shape[0] - 1, positions.shape[1]
        E, B = len(self.sim.scenes), self.sim.max_bodies
        # Every (step, environment) in its own slot along x, so one broad phase serves them all.
        span = float((positions.amax((0, 1)) - positions.amin((0, 1)))[0]) + 1.0
        slot = torch.arange(S, device=positions.device)[:, None] * E + self.env_of_vertex[None, :]  # (S, V)
        shift = torch.zeros(S, V, 3, dtype=positions.dtype, device=positions.device)
        shift[..., 0] = slot.to(positions.dtype) * span
        x0 = (positions[:-1] + shift).reshape(S * V, 3)
        x1 = (positions[1:] + shift).reshape(S * V, 3)
        step_offset = torch.arange(S, device=positions.device)
        faces = (self.faces[None] + (step_offset * V)[:, None, None]).reshape(-1, 3)
        edges = (self.edges[None] + (step_offset * V)[:, None, None]).reshape(-1, 2)
        group = (self.group[None] + (step_offset * E * (B + 1))[:, None]).reshape(-1)
        cand = ipc.swept_candidates(x0, x1, faces, edges, 0.0, group)
        if cand.count == 0:
            return
        toi = ipc.ccd_time_of_impact(x0, x1, faces, edges, cand, 0.0, 1.0, CCD_RESCALING)
        bad = toi < 1.0
        if bool(bad.any()):
            k = int(torch.nonzero(bad)[0])
            st = ipc.candidate_stencils(faces, edges, cand)
            s = int(st[k, 0]) // V
            raise AssertionError(f"step {first + s}: the motion of the step has an impact at t = {float(toi[k]):.3g} "
                                 f"(CCD, {'face-vertex' if k < cand.face_vertex.shape[0] else 'edge-edge'} pair)")


def run_checked(sim, steps: int):
    """Step `sim` `steps` times, checking every step with a `PenetrationOracle`; the last StepInfo."""
    oracle = PenetrationOracle(sim)
    info = None
    for _ in range(steps):
        info = oracle.step()
    oracle.check()
    return info
