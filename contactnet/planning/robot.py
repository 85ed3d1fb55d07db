"""Robots from URDF, checked link by link with the mesh backends: `Robot` (kinematics, collision
bodies, attached objects, self-collision pairs) and `RobotChecker` (verdicts, cost and its gradient
with respect to the joint angles).

Bodies. Every link with `<collision>` geometry is one body: its collision shapes merged into one
mesh (urdf.py), registered in the world as `"<robot name>/<link>"` (re-centred on its AABB centre,
like every world mesh). An object attached to a link (`Robot.attach`: a grasped mug) is one more
body, riding on that link at a fixed pose. Body b's pose is

    T_world_b(q) = T_base  T_link(b)(q)  T_offset(b)

with T_link from pytorch_kinematics' forward kinematics (differentiable, batched; its analytical
backward gives the joint-space gradient) and T_offset the fixed link-to-mesh-frame transform.

Self-collision. Bodies i < j are checked unless they are adjacent or ignored. Adjacent: one's link
is the other's nearest ancestor link that has collision geometry (parent / child joints, skipping
links without geometry such as the Panda's `panda_link8`), or an attached object and the link it
rides on (the nearest one with geometry, if its own has none). `ignore` (Robot and attach) adds
pairs a user knows to be harmless (fingers touching the grasped mug; link pairs in contact by
design).

Joints. `q` holds the independent joints only, `Robot.joint_names` (pytorch_kinematics' order of
the movable joints, mimic joints left out): the Panda's q has 7 arm joints and one finger. URDF
`<mimic>` joints (urdf.py; pytorch_kinematics ignores them) follow their leader through a fixed
linear map, q_full = A q + b (`Robot.full_q`), onto pytorch_kinematics' full joint vector
(`Robot.full_joint_names`): A holds 1 for an independent joint and the multiplier at the leader's
column for a mimic one, b the offsets. It is linear, so the gradient with respect to a leader
sums its followers' contributions (d q_full / d q = A). `joint_limits` are the independent joints'
own URDF limits (a follower's limits are not turned into limits on its leader).

Syncs. The learned backends with `validate=False` (the checker's flag) have fixed shapes and no host
synchronisation: FK, the body gather, the per-(body, obstacle) logits and the self pairs are all
dense. `validate=True` checks `q` (shape, NaN) on the host. The exact backend synchronises where
the checker does (disabled slots skipped, penetrations bisected) — it is the verifier.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from contactnet.geometry.poses import matrix_to_pose, pose_to_matrix
from contactnet.planning.checker import CollisionChecker
from contactnet.planning.cost import collision_cost, learned_collision_cost
from contactnet.planning.pose_input import checked_poses
from contactnet.planning.urdf import UrdfModel, load_urdf

__all__ = ["Robot", "RobotChecker", "RobotResult"]

class _Body(NamedTuple):
    name: str  # the link's name, or the attached object's
    link: str  # the link it rides on (itself for a link)
    mesh_id: int
    offset: np.ndarray  # (4, 4) float64: link frame -> mesh frame


class Robot:
    """A URDF robot's collision bodies in `world` (a `CollisionWorld`).

    urdf: file path, URDF text or a `load_urdf` result (to choose its tessellation_tol);
    package_dirs: {package: folder} or folders for `package://` meshes; name: prefix of
    the world mesh names (default: the URDF's robot name); base_pose: (7,) the root link in the
    world, [x, y, z, qw, qx, qy, qz] (pose_input.py); ignore: pairs (name, name) of links whose
    collision is not checked.
    Registering the link meshes reallocates the world's mesh library: build robots before
    capturing a graph (as for any `add_mesh`).
    """

    def __init__(self, urdf, world, package_dirs=(), name: str | None = None, base_pose=None, ignore=()):
        try:
            import pytorch_kinematics as pk
        except ImportError as error:
            raise ImportError("Robot needs pytorch_kinematics: pip install 'contactnet[robot]'") from error

        self.model: UrdfModel = urdf if isinstance(urdf, UrdfModel) else load_urdf(urdf, package_dirs)
        if not self.model.collision:
            raise ValueError("urdf: no link has <collision> geometry; nothing to check")
        self.world = world
        self.name = name or self.model.name
        # bytes: lxml refuses str input that carries an encoding declaration
        self.chain = pk.build_chain_from_urdf(self.model.text.encode()).to(dtype=world.dtype, device=world.device)
        self.full_joint_names: list[str] = list(self.chain.get_joint_parameter_names())
        mimic = self.model.mimic
        self.joint_names: list[str] = [n for n in self.full_joint_names if n not in mimic]
        column = {n: k for k, n in enumerate(self.joint_names)}
        # q_full = q @ A^T + b (module docstring): (F, D) and (F,) in the world's dtype.
        self.mimic_matrix = torch.zeros(len(self.full_joint_names), self.dof, dtype=torch.float64)
        self.mimic_offset = torch.zeros(len(self.full_joint_names), dtype=torch.float64)
        for i, n in enumerate(self.full_joint_names):
            leader, mult, off = mimic.get(n, (n, 1.0, 0.0))
            self.mimic_matrix[i, column[leader]] = mult
            self.mimic_offset[i] = off
        self.mimic_matrix = self.mimic_matrix.to(dtype=world.dtype, device=world.device)
        self.mimic_offset = self.mimic_offset.to(dtype=world.dtype, device=world.device)
        lower, upper = self.chain.get_joint_limits()
        independent = [self.full_joint_names.index(n) for n in self.joint_names]
        self.joint_limits = torch.stack([torch.as_tensor(lower), torch.as_tensor(upper)], -1)[independent]
        self.joint_limits = self.joint_limits.to(world.dtype)
        self.base_pose = checked_poses(base_pose, "base_pose", world.dtype, world.device)
        self._bodies: list[_Body] = []
        for link, (v, f) in self.model.collision.items():
            mid = world.add_mesh(f"{self.name}/{link}", (v, f))
            self._bodies.append(_Body(link, link, mid, self._offset(world.mesh_offset(f"{self.name}/{link}"))))
        self._attached_ignore: dict[str, set[str]] = {}
        self._ignore: set[frozenset] = set()
        for pair in ignore:
            self.ignore(*pair)
        self._rebuild()

    # ---- bodies -------------------------------------------------------------------------------
    @staticmethod
    def _offset(shift: torch.Tensor, pose=None) -> np.ndarray:
        """link frame -> mesh frame: `pose` (the object's frame on the link, default identity), then
        the AABB-centre shift removed at registration."""
        t = np.eye(4)
        t[:3, 3] = shift.double().numpy()
        if pose is not None:
            t = pose_to_matrix(pose.double().cpu()).numpy() @ t
        return t

    @property
    def dof(self) -> int:
        return len(self.joint_names)

    @property
    def body_names(self) -> list[str]:
        """Collision bodies in query order: links with geometry (URDF order), then attached objects."""
        return [b.name for b in self._bodies]

    @property
    def body_links(self) -> list[str]:
        """The link each body rides on (body order)."""
        return [b.link for b in self._bodies]

    @property
    def link_names(self) -> list[str]:
        return list(self.model.links)

    def _link(self, link: str, arg: str = "link") -> str:
        if link not in self.model.links:
            raise ValueError(f"{arg}: unknown link {link!r}; links: {self.model.links}")
        return link

    def _body(self, name: str, arg: str) -> str:
        if name not in self.body_names:
            raise ValueError(f"{arg}: unknown collision body {name!r}; bodies: {self.body_names}")
        return name

    def attach(self, name: str, mesh, link: str, pose=None, ignore=()) -> None:
        """Attach object `name` (mesh: anything `CollisionWorld.add_mesh` takes, registered under
        `"<robot>/<name>"`, or a world mesh name / id) to `link` at `pose` (7,) — the pose of the
        mesh's frame in the link frame, [x, y, z, qw, qx, qy, qz]; for a mesh given here, its frame is
        the one its vertices were given in. It is then checked against the world and against every body but
        `link` and those in `ignore` (e.g. the fingers that hold it)."""
        if not isinstance(name, str) or not name or name in self.body_names:
            raise ValueError(f"name: expected a new body name, got {name!r}; bodies: {self.body_names}")
        link = self._link(link)
        pose = checked_poses(pose, "pose", torch.float64, "cpu")
        ignore = {self._body(n, "ignore") for n in ignore}
        if isinstance(mesh, str) or (isinstance(mesh, (int, np.integer)) and not isinstance(mesh, bool)):
            mid = self.world._mesh_id(mesh, "mesh")
            mesh_name = self.world.mesh_names[mid]
        else:
            mesh_name = f"{self.name}/{name}"
            mid = self.world.add_mesh(mesh_name, mesh)
        self._bodies.append(_Body(name, link, mid, self._offset(self.world.mesh_offset(mesh_name), pose)))
        self._attached_ignore[name] = ignore
        self._rebuild()

    def detach(self, name: str) -> None:
        """Remove attached object `name` (its mesh stays registered in the world)."""
        if name not in self._attached_ignore:
            raise ValueError(f"name: no attached object {name!r}; attached: {sorted(self._attached_ignore)}")
        self._bodies = [b for b in self._bodies if b.name != name]
        del self._attached_ignore[name]
        self._ignore = {p for p in self._ignore if name not in p}
        self._rebuild()

    def ignore(self, a: str, b: str) -> None:
        """Never check bodies `a` and `b` (link or attached object names) against each other."""
        if a == b:
            raise ValueError(f"ignore: a pair of two different bodies expected, got ({a!r}, {b!r})")
        for n, arg in ((a, "a"), (b, "b")):
            if n not in self.model.links and n not in self.body_names:
                raise ValueError(f"{arg}: unknown link or body {n!r}; links: {self.model.links}")
        self._ignore.add(frozenset((a, b)))
        self._rebuild()

    def _collision_parent(self, link: str) -> str | None:
        """The nearest ancestor of `link` that has collision geometry."""
        parent_of = self.model.parent_of
        link = parent_of.get(link)
        while link is not None and link not in self.model.collision:
            link = parent_of.get(link)
        return link

    def adjacent(self, a: str, b: str) -> bool:
        """Whether bodies a and b are exempt by the adjacency rule (module docstring)."""
        ba, bb = (next(x for x in self._bodies if x.name == n) for n in (self._body(a, "a"), self._body(b, "b")))
        for x, y in ((ba, bb), (bb, ba)):
            if x.name in self._attached_ignore:  # an attached object rides on (and touches) its link
                host = x.link if x.link in self.model.collision else self._collision_parent(x.link)
                if y.name == host or y.name in self._attached_ignore[x.name]:
                    return True
            elif y.name not in self._attached_ignore and self._collision_parent(x.link) == y.link:
                return True
        return False

    @property
    def self_pairs(self) -> list[tuple[str, str]]:
        """Body pairs checked for self-collision, (i, j) in body order with i < j."""
        names = self.body_names
        return [(names[i], names[j]) for i, j in self._pairs.tolist()]

    def _rebuild(self) -> None:
        """The fixed-shape index tensors of the current bodies (attach/detach/ignore change them)."""
        w, dev = self.world, self.world.device
        frame = [self.chain.frame_to_idx[b.link] for b in self._bodies]
        self.body_frame = torch.tensor(frame, dtype=torch.int64, device=dev)
        self.body_mesh = torch.tensor([b.mesh_id for b in self._bodies], dtype=torch.int64, device=dev)
        self.body_offset = torch.as_tensor(np.stack([b.offset for b in self._bodies]), dtype=w.dtype, device=dev)
        names = self.body_names
        pairs = [(i, j) for i, j in itertools.combinations(range(len(names)), 2)
                 if not self.adjacent(names[i], names[j]) and frozenset((names[i], names[j])) not in self._ignore]
        self._pairs = torch.tensor(pairs, dtype=torch.int64, device=dev).reshape(-1, 2)

    # ---- kinematics ---------------------------------------------------------------------------
    def check_q(self, q, arg: str = "q") -> torch.Tensor:
        """`q` (..., dof) checked: a float tensor on the world's device, no NaN / Inf (numpy arrays
        and lists are taken as tensors of the world's dtype there, once)."""
        if isinstance(q, (np.ndarray, list, tuple)) and (array := np.asarray(q)).dtype.kind in "fiu":
            q = torch.as_tensor(array, dtype=self.world.dtype, device=self.world.device)
        if not isinstance(q, torch.Tensor) or not q.dtype.is_floating_point:
            raise ValueError(f"{arg}: expected a float tensor of shape (batch, horizon, {self.dof}), got "
                             f"{getattr(q, 'dtype', type(q).__name__)}")
        if q.dim() < 1 or q.shape[-1] != self.dof:
            follow = ", ".join(f"{n} = {m:g} * {leader} + {o:g}" for n, (leader, m, o) in self.model.mimic.items())
            raise ValueError(f"{arg}: expected shape (batch, horizon, {self.dof}) with the joints "
                             f"{self.joint_names}, got {tuple(q.shape)}"
                             + (f" (mimic joints are not in q; they follow: {follow})" if follow else ""))
        if q.device != self.world.device:
            raise ValueError(f"{arg}: is on {q.device} but the world is on {self.world.device}")
        if not bool(torch.isfinite(q).all()):
            raise ValueError(f"{arg}: contains NaN or Inf joint values")
        return q

    def full_q(self, q: torch.Tensor) -> torch.Tensor:
        """(..., len(full_joint_names)) pytorch_kinematics' joint vector of q (..., dof): mimic joints
        filled from their leaders (module docstring); differentiable, linear. Unchecked."""
        q = q.to(self.world.dtype)
        if not self.model.mimic:  # the identity map: q itself, bitwise
            return q
        return q @ self.mimic_matrix.T + self.mimic_offset

    def link_transforms(self, q: torch.Tensor) -> torch.Tensor:
        """(..., F, 4, 4) world transforms of every kinematic frame (`chain.frame_to_idx`) at joint
        angles q (..., dof), base pose included. Unchecked (see `check_q`)."""
        lead = q.shape[:-1]
        full = self.full_q(q.reshape(-1, self.dof))
        t = self.chain.forward_kinematics_tensor(full)  # (F, N, 4, 4)
        t = pose_to_matrix(self.base_pose) @ t
        return t.transpose(0, 1).reshape(*lead, t.shape[0], 4, 4)

    def body_poses(self, q: torch.Tensor) -> torch.Tensor:
        """(..., L, 7) world poses [x, y, z, qw, qx, qy, qz] of the bodies' mesh frames at q (..., dof); differentiable
        with respect to q. Unchecked (see `check_q`)."""
        t = self.link_transforms(q)[..., self.body_frame, :, :] @ self.body_offset
        return matrix_to_pose(t)

    def __repr__(self) -> str:
        return (f"Robot({self.name!r}, dof={self.dof}, {len(self._bodies)} bodies, "
                f"{len(self._pairs)} self pairs)")


class RobotResult(NamedTuple):
    colliding: torch.Tensor  # (...) bool: any body hits an obstacle or another body
    world_colliding: torch.Tensor  # (..., L) bool per body, against the enabled obstacles
    self_colliding: torch.Tensor  # (..., P) bool per self pair (Robot.self_pairs order)


class RobotChecker(nn.Module):
    """A `Robot` checked with a `CollisionChecker` (any backend) on the robot's world.

    world_collision / self_collision: which terms `query` and `cost` include. eta: the activation
    distance (metres; default the checker's). env_idx in every query: None (environment 0), an int,
    or (batch,) environment indices, cuRobo's per-batch layout.
    """

    def __init__(self, robot: Robot, checker: CollisionChecker, world_collision: bool = True,
                 self_collision: bool = True, eta: float | None = None):
        super().__init__()
        if not isinstance(robot, Robot):
            raise ValueError(f"robot: expected a Robot, got {type(robot).__name__}")
        if not isinstance(checker, CollisionChecker):
            raise ValueError(f"checker: expected a CollisionChecker, got {type(checker).__name__}")
        if checker.world is not robot.world:
            raise ValueError("checker: checks a different CollisionWorld than the robot's")
        if not (world_collision or self_collision):
            raise ValueError("world_collision, self_collision: at least one must be True")
        self.robot, self.checker = robot, checker
        self.world_collision, self.self_collision = world_collision, self_collision
        self.eta = checker.eta if eta is None else float(eta)
        if not self.eta > 0:
            raise ValueError(f"eta: expected an activation distance > 0, got {eta}")

    def _inputs(self, q, env_idx):
        """Checked q (batch, ...) and env ids broadcast to (batch, ..., L); body poses (..., L, 7)."""
        r = self.robot
        if self.checker.validate:
            q = r.check_q(q)
            if self.world_collision and not r.world.obstacle_names:
                raise ValueError("world: has no obstacle in any environment; add obstacles, or make the "
                                 "RobotChecker with world_collision=False for self-collision only")
        poses = r.body_poses(q)
        shape = poses.shape[:-1]  # (..., L)
        if env_idx is None or isinstance(env_idx, int):
            env = env_idx
        else:
            env = torch.as_tensor(env_idx, device=r.world.device)
            if self.checker.validate and (env.dim() != 1 or env.shape[0] != q.shape[0]):
                raise ValueError(f"env_idx: expected an int or shape (batch,) = ({q.shape[0]},), got "
                                 f"{tuple(env.shape)}")
            env = env.reshape(-1, *([1] * (len(shape) - 1))).expand(shape)
        return poses, shape, env

    def _self_pairs(self, poses):
        """ids and poses (..., P) of the self pairs."""
        p = self.robot._pairs
        ids = self.robot.body_mesh
        return ids[p[:, 0]], ids[p[:, 1]], poses[..., p[:, 0], :], poses[..., p[:, 1], :]

    def query(self, q: torch.Tensor, env_idx=None) -> RobotResult:
        """Verdicts at joint angles q (batch, horizon, dof) (any leading shape works)."""
        poses, shape, env = self._inputs(q, env_idx)
        lead = shape[:-1]
        c = self.checker
        world = torch.zeros(shape, dtype=torch.bool, device=poses.device)
        if self.world_collision:
            world = c.world_query(self.robot.body_mesh.expand(shape), poses, env).colliding
        selfc = torch.zeros(*lead, len(self.robot._pairs), dtype=torch.bool, device=poses.device)
        if self.self_collision and len(self.robot._pairs):
            ia, ib, pa, pb = self._self_pairs(poses)
            selfc = c.pairwise(ia.expand(pa.shape[:-1]), ib.expand(pb.shape[:-1]), pa, pb).colliding
        return RobotResult(world.any(-1) | selfc.any(-1), world, selfc)

    def body_costs(self, q: torch.Tensor, env_idx=None) -> tuple[torch.Tensor, torch.Tensor]:
        """(world cost (..., L) per body summed over obstacles, self cost (..., P) per pair), both
        differentiable with respect to q: the checker's cost (exact: collision_cost of the signed
        distance; learned and hybrid: the learned cost) with activation distance eta."""
        poses, shape, env = self._inputs(q, env_idx)
        lead = shape[:-1]
        c = self.checker
        world = poses.new_zeros(shape)
        if self.world_collision:
            world = c.cost(self.robot.body_mesh.expand(shape), poses, env, eta=self.eta)
        own = poses.new_zeros(*lead, len(self.robot._pairs))
        if self.self_collision and len(self.robot._pairs):
            ia, ib, pa, pb = self._self_pairs(poses)
            n = pa.shape[-2]
            ia, ib = ia.expand(*lead, n).reshape(-1), ib.expand(*lead, n).reshape(-1)
            pa, pb = pa.reshape(-1, 7), pb.reshape(-1, 7)
            # The checker's own pair kernels (same package): logits, or exact distances searched
            # only below eta (the cost is 0 beyond it).
            if c.learned:
                own = learned_collision_cost(c._logits(ia, ib, pa, pb), self.eta)
            else:
                own = collision_cost(c._signed(ia, ib, pa, pb, upper_bound=self.eta)[0], self.eta)
            own = own.to(poses.dtype).reshape(*lead, n)
        return world, own

    def cost(self, q: torch.Tensor, env_idx=None) -> torch.Tensor:
        """(...) total collision cost at q (..., dof): world and self terms summed over bodies."""
        world, own = self.body_costs(q, env_idx)
        return world.sum(-1) + own.sum(-1)

    def forward(self, q: torch.Tensor, env_idx=None) -> torch.Tensor:
        return self.cost(q, env_idx)

    def robot_cost(self, q: torch.Tensor, env_idx=None) -> tuple[torch.Tensor, torch.Tensor]:
        """(cost (batch, horizon), d cost / d q (batch, horizon, dof)) at joint angles q (batch,
        horizon, dof); the gradient of each waypoint's cost with respect to its own joints."""
        if self.checker.validate:
            q = self.robot.check_q(q)
            if q.dim() != 3:
                raise ValueError(f"q: expected shape (batch, horizon, {self.robot.dof}), got {tuple(q.shape)}")
        with torch.enable_grad():
            x = q.detach().requires_grad_(True)
            cost = self.cost(x, env_idx)
            (grad,) = torch.autograd.grad(cost.sum(), x)
        return cost.detach(), grad
