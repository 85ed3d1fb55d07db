"""Every environment's scene packed into flat tensors: what the stepper reads and never changes.

Environments are padded to the largest body count B (absent bodies have kind ABSENT); body b of
environment e has the flat id e·B + b. All vertices share one array in scene order, with the flat
body, environment and broad-phase group of each. For the broad phase each environment is shifted
along x into its own slot (distances do not change under the shift), so one candidate search serves
all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from contactnet.geometry.mesh import MeshLibrary
from contactnet.geometry.poses import normalize_poses
from contactnet.ops import ipc
from contactnet.sim.affine import mass_matrix, pose_to_q, twist_to_q_velocity
from contactnet.sim.scene import Scene

__all__ = ["ABSENT", "DYNAMIC", "KINEMATIC", "STATIC", "PackedScene", "pack_scenes"]

DYNAMIC, STATIC, KINEMATIC, ABSENT = 0, 1, 2, 3
_KIND_CODE = {"dynamic": DYNAMIC, "static": STATIC, "kinematic": KINEMATIC}


def checked_script_poses(poses: torch.Tensor) -> torch.Tensor:
    """Normalise a trajectory's poses, raising on NaN (syncs with the host)."""
    return normalize_poses(poses, "trajectory(t)")


@dataclass(frozen=True, eq=False)
class PackedScene:
    """The packed scenes (float64 on one device). E environments, B bodies each, V vertices."""

    num_envs: int  # E
    max_bodies: int  # B
    library: MeshLibrary  # the distinct meshes, for exact BVH queries at rigid poses
    mesh_id: torch.Tensor  # (E, B) int64 row of `library`; -1 for absent bodies
    kind: torch.Tensor  # (E, B) int64 DYNAMIC, STATIC, KINEMATIC or ABSENT
    present: torch.Tensor  # (E, B) bool: kind != ABSENT
    M: torch.Tensor  # (E, B, 12, 12) affine mass matrices (identity for absent bodies)
    mass: torch.Tensor  # (E, B) kg
    ortho_weight: torch.Tensor  # (E, B) κ_A·V of the orthogonality energy (0 unless dynamic)
    friction: torch.Tensor  # (E, B) μ of each body
    uniform_friction: float | None  # the μ every body shares, if they all do (see `candidate_friction`)
    friction_version: int  # `friction._version` when that was found: an in-place change since voids it
    radius: torch.Tensor  # (E, B) m, largest distance of a vertex from its body's origin
    rest: torch.Tensor  # (V, 3) rest-frame vertices x0
    faces: torch.Tensor  # (F, 3) int64 into the packed vertices
    edges: torch.Tensor  # (Ed, 2) int64
    vertex_body: torch.Tensor  # (V,) int64 flat body id e·B + b
    vertex_env: torch.Tensor  # (V,) int64 environment
    edge_env: torch.Tensor  # (Ed,) int64 environment of each edge
    vertex_group: torch.Tensor  # (V,) int64 broad-phase group (see `pack_scenes`)
    xbar: torch.Tensor  # (V, 4) x̄ = (1, x0), the affine Jacobian's per-vertex factor
    dof_order: torch.Tensor  # (12,) permutation from (coordinate i, x̄ component α) to q order
    free_dof: torch.Tensor  # (E, B) bool: the body's DOFs are unknowns (dynamic and kinematic)
    trajectories: list[tuple[Callable, torch.Tensor, torch.Tensor]]  # (script, envs, bodies)
    slot: torch.Tensor  # (E, 3) m, each environment's broad-phase shift
    body_pairs: torch.Tensor  # (P, 2) int64 flat ids a < b of the body pairs that may collide (one env, two groups)
    trees: ipc.BodyTrees  # every body's rest-frame trees for the body-level search
    q_init: torch.Tensor  # (E, B, 12) initial state, kinematic bodies on their script at t = 0
    qdot_init: torch.Tensor  # (E, B, 12) initial velocities (all bodies, as given)

    def positions(self, q: torch.Tensor) -> torch.Tensor:
        """(V, 3) vertex positions x = A x0 + p of all environments' bodies (each in its own
        environment's frame), packed in scene order."""
        return ipc.affine_positions(q, self.rest, self.vertex_body)

    def script_targets(self, q: torch.Tensor, t: torch.Tensor,
                       normalize: Callable[[torch.Tensor], torch.Tensor] = checked_script_poses) -> torch.Tensor:
        """q with every kinematic body set to its trajectory's pose at the environments' times t;
        `normalize` makes the scripts' quaternions unit (checked or not, per step mode)."""
        return _on_script(self.trajectories, q, t, normalize)

    def to_q_order(self, t: torch.Tensor, dim: int) -> torch.Tensor:
        """Reorder a dimension of 12 DOFs from (coordinate i, x̄ component α) to q = (p, a1, a2, a3)."""
        return t.index_select(dim, self.dof_order)

    def shifted(self, x: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Positions x (V, 3) and states q (E, B, 12) moved into the environments' broad-phase
        slots (bitwise the shift of the all-primitive search; nothing to add for one environment)."""
        if self.num_envs == 1:
            return x, q
        q = q.clone()
        q[..., :3] += self.slot[:, None, :]
        return x + self.slot[self.vertex_env], q

    def same_env_masks(self, fv: torch.Tensor, ee: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Which face–vertex / edge–edge pairs join primitives of one environment."""
        env = self.vertex_env
        return (env[fv[:, 0]] == env[self.faces[fv[:, 1], 0]],
                env[self.edges[ee[:, 0], 0]] == env[self.edges[ee[:, 1], 0]])

    def candidate_env(self, cand: ipc.Candidates) -> torch.Tensor:
        """(N,) environment of each candidate (face–vertex rows, then edge–edge): that of its
        first stencil vertex."""
        fv, ee = cand  # padding rows (-1) read the last entry: harmless, the caller masks them
        return torch.cat([self.vertex_env[fv[:, 0]], self.edge_env[ee[:, 0]]])

    def pair_friction(self, stencils: torch.Tensor) -> torch.Tensor:
        """(N,) μ of each candidate: √(μ_a μ_b) of its two bodies."""
        mu = self.friction.reshape(-1)
        return torch.sqrt(mu[self.vertex_body[stencils[:, 0]]] * mu[self.vertex_body[stencils[:, 3]]])

    def candidate_friction(self, cand: ipc.Candidates) -> torch.Tensor:
        """(N,) μ of each candidate pair (face–vertex rows, then edge–edge), as `pair_friction`.
        Where every body shares one μ, √(μ·μ) rounds to μ itself (binary floating point, no
        underflow), so the stencils' gathers (about 4% of a small scene's step) are skipped, unless
        `friction` was changed in place since packing (a user setting one body's μ mid-run)."""
        if self.uniform_friction is not None and self.friction._version == self.friction_version:
            return torch.full((cand.count,), self.uniform_friction, dtype=self.friction.dtype,
                              device=self.friction.device)
        return self.pair_friction(ipc.candidate_stencils(self.faces, self.edges, cand))


def _shared_friction(friction: torch.Tensor) -> float | None:
    """The μ every body has, if they all have one, and √(μ·μ) = μ holds exactly for it (μ² neither
    underflows nor overflows); else None."""
    mu = float(friction.reshape(-1)[0])
    if not bool((friction == mu).all()) or not (mu == 0 or 1e-150 < mu < 1e150):
        return None
    return mu


def _on_script(trajectories, q: torch.Tensor, t: torch.Tensor, normalize) -> torch.Tensor:
    q = q.clone()
    for fn, envs, bodies in trajectories:
        poses = torch.as_tensor(fn(t[envs]), dtype=q.dtype, device=q.device).expand(envs.shape[0], 7)
        q[envs, bodies] = pose_to_q(normalize(poses))
    return q


def pack_scenes(scenes: list[Scene], mu: float, stiffness: float, device: torch.device) -> PackedScene:
    """Pack `scenes` (one per environment) for the stepper. mu: friction of bodies that set none;
    stiffness: κ_A (Pa) of the orthogonality energy."""
    f64, dev = torch.float64, device
    E, B = len(scenes), max(len(s) for s in scenes)
    kind = torch.full((E, B), ABSENT, dtype=torch.int64)
    M = torch.eye(12, dtype=f64).repeat(E, B, 1, 1)
    ortho_w = torch.zeros(E, B, dtype=f64)
    mass = torch.zeros(E, B, dtype=f64)
    friction = torch.full((E, B), mu, dtype=f64)
    radius = torch.zeros(E, B, dtype=f64)
    q0 = torch.zeros(E, B, 12, dtype=f64)
    q0[..., 3:] = torch.eye(3, dtype=f64).reshape(9)
    twist0 = torch.zeros(E, B, 6, dtype=f64)
    rest, faces, body_of_vertex = [], [], []
    unique_meshes: dict[int, int] = {}
    mesh_id = torch.full((E, B), -1, dtype=torch.int64)
    scripts: dict[int, tuple] = {}  # id(trajectory) -> (trajectory, [(env, body)])
    nv = 0
    for e, scene in enumerate(scenes):
        for b, body in enumerate(scene.bodies):
            kind[e, b] = _KIND_CODE[body.kind]
            M[e, b] = mass_matrix(body.mass)
            mass[e, b] = body.mass.mass
            ortho_w[e, b] = stiffness * body.mass.volume if body.kind == "dynamic" else 0.0
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
                scripts.setdefault(id(body.trajectory), (body.trajectory, []))[1].append((e, b))
    meshes = {}
    for scene in scenes:
        for body in scene.bodies:
            meshes.setdefault(unique_meshes[id(body.mesh)], body.mesh)
    kind = kind.to(dev)
    rest = torch.cat(rest).to(dev).contiguous()
    faces = torch.cat(faces).to(dev).contiguous()
    vertex_body = torch.cat(body_of_vertex).to(dev)
    # q = (p, a1, a2, a3) position of the (coordinate i, x̄ component α) DOF ordering
    order = [i if a == 0 else 3 + 3 * i + a - 1 for i in range(3) for a in range(4)]
    # Broad-phase groups: every dynamic body is its own group; an environment's scripted
    # (static and kinematic) bodies share one, since scripts never push each other.
    flat_kind = kind.reshape(-1)
    scripted = (flat_kind == STATIC) | (flat_kind == KINEMATIC)
    first_scripted = torch.where(scripted.reshape(E, B), torch.arange(B, device=dev), B).min(1).values
    group = torch.arange(E * B, device=dev)
    group = torch.where(scripted, torch.arange(E, device=dev).repeat_interleave(B) * B
                        + first_scripted.repeat_interleave(B), group)
    trajectories = [(fn, torch.tensor([e for e, _ in where], device=dev), torch.tensor([b for _, b in where], device=dev))
                    for fn, where in scripts.values()]
    q0 = q0.to(dev)
    # Body pairs that may collide: two present bodies of one environment in different groups.
    ia, ib = torch.triu_indices(B, B, 1, device=dev)
    present = kind != ABSENT
    group_eb = group.reshape(E, B)
    ok = present[:, ia] & present[:, ib] & (group_eb[:, ia] != group_eb[:, ib])
    env_of, k = torch.nonzero(ok, as_tuple=True)
    body_pairs = torch.stack([env_of * B + ia[k], env_of * B + ib[k]], 1).contiguous()
    edges = ipc.mesh_edges(faces)
    friction = friction.to(dev)
    # Built once on the host and moved: on a GPU the fixed-shape step's padded search traverses
    # them too.
    trees = ipc.BodyTrees(*(t.to(dev) for t in ipc.body_trees(rest.cpu(), faces.cpu(), edges.cpu(),
                                                               vertex_body.cpu(), E * B)))
    packed = PackedScene(
        num_envs=E, max_bodies=B,
        library=MeshLibrary([meshes[i] for i in range(len(meshes))], dtype=f64, device=dev),
        mesh_id=mesh_id.to(dev), kind=kind, present=present, M=M.to(dev), mass=mass.to(dev),
        ortho_weight=ortho_w.to(dev),
        friction=friction, uniform_friction=_shared_friction(friction), friction_version=friction._version,
        radius=radius.to(dev), rest=rest,
        faces=faces, edges=edges, vertex_body=vertex_body, vertex_env=vertex_body // B,
        edge_env=vertex_body[edges[:, 0]] // B, vertex_group=group[vertex_body].contiguous(),
        xbar=torch.cat([torch.ones_like(rest[:, :1]), rest], dim=1),
        dof_order=torch.argsort(torch.tensor(order, device=dev)),
        free_dof=(kind == DYNAMIC) | (kind == KINEMATIC),
        trajectories=trajectories, slot=torch.zeros(E, 3, dtype=f64, device=dev), body_pairs=body_pairs, trees=trees,
        # kinematic bodies start on their script
        q_init=_on_script(trajectories, q0, torch.zeros(E, dtype=f64, device=dev), checked_script_poses),
        qdot_init=twist_to_q_velocity(q0, twist0.to(dev)))
    # Environment slots along x for the broad phase, wide enough for the initial extents.
    x = packed.positions(packed.q_init)
    index = packed.vertex_env[:, None].expand(-1, 3)
    lo = torch.full((E, 3), float("inf"), dtype=f64, device=dev).scatter_reduce(0, index, x, "amin")
    hi = torch.full((E, 3), -float("inf"), dtype=f64, device=dev).scatter_reduce(0, index, x, "amax")
    spacing = float((hi - lo)[:, 0].max()) * 2 + 1.0
    packed.slot[:, 0] = torch.arange(E, dtype=f64, device=dev) * spacing
    return packed
