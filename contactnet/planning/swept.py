"""Collision between waypoints: a certified swept verdict and a smooth swept cost.

A planner that checks only its waypoints misses a thin obstacle that a link crosses between two of
them. Two tools, for two jobs:

- `swept_check` (the verdict): conservative advancement (Mirtich's, in Zhang, Redon, Lin and
  Manocha's form for articulated models) with the exact mesh kernels. Along a segment, the joints
  move linearly, q(t) = q0 + t (q1 - q0), t in [0, 1]. Every point of body b then moves at most
  mu_b = sum_j |dq_j| R_jb metres per unit t, where R_jb bounds the distance from joint j's axis to
  any point of b (the lengths of the joint offsets below j plus the body's radius, and the reach of
  the prismatic joints below j on this segment; rotations do not change lengths). So the surface
  distance d(t) of a pair (two bodies, or a body and a static obstacle) cannot reach 0 before
  t + d(t) / (mu_a + mu_b): the check steps t by that much, evaluating `mesh_distance` at each
  step, until t reaches 1 (free) or d < `clearance` (colliding, at that t). It is conservative:
  it never calls a colliding segment free (a miss would need the distance to drop faster than the
  bound allows); it may call a segment that passes closer than `clearance` colliding. Each step
  advances by at least clearance / mu, so it ends within max(mu) / clearance steps. Containment
  (a body already inside an obstacle) is tested once, at t = 0, with `mesh_collide`: after that a
  body can only get inside through the surface.

  Why not the vertex CCD of `contactnet.ops` (`ccd_time_of_impact`, additive CCD)? It assumes each
  vertex moves on a straight line, while a robot link's points move on arcs (and compositions of
  arcs); a chord can cut inside the arc's obstacle-free side and miss a contact the arc makes.
  Conservative advancement needs only a bound on the speed, which the kinematic chain gives
  exactly, and the same exact distance kernel the checker uses.

  Syncs: which pairs are still open is data dependent, so every step synchronises. It is the
  verifier of a trajectory a planner keeps, like the exact backend.

  Voxel grids are not part of this verdict (it reads the mesh-view obstacles): advancement needs a
  certified lower bound of the distance, which a grid gives only inside its box and, between probe
  points, only up to the grid's Lipschitz constant times the probe radius (grid_probe.py). It warns
  when grids are present: check a grid world's waypoints densely with `RobotChecker.query`, or give
  the obstacles as meshes.

- `swept_cost` (the optimiser's term): cuRobo's speed-weighted cost. Each segment is sampled at
  `substeps` + 1 points in joint space and the per-body collision cost is integrated along each
  body's path: sum over sub-intervals of the mean of the two end costs times the distance the
  body's frame origin travelled (for self pairs, the sum of both bodies' distances). A link that
  sweeps quickly through an obstacle pays for the length of its path inside the activation zone,
  not for the time it spends there, so a planner cannot hide a crossing between two waypoints by
  moving faster. It is smooth, fixed-shape and sync-free on the learned path, but it only sees an
  obstacle that some sub-sample comes within eta of: thin walls need the verdict.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import torch

from contactnet.ops import mesh_collide, mesh_distance
from contactnet.planning.robot import Robot, RobotChecker

__all__ = ["SweptResult", "motion_bounds", "swept_check", "swept_cost"]


class SweptResult(NamedTuple):
    colliding: torch.Tensor  # (batch, horizon - 1) bool: the segment from waypoint h to h + 1 collides
    time: torch.Tensor  # (batch, horizon - 1) float: t in [0, 1] where the check stopped (NaN if free)
    steps: int  # advancement steps taken (the longest pair's)


def _reach_tables(robot: Robot):
    """Static reach R (J, L) and prismatic incidence P (J, L, J) of the kinematic chain (J: the full
    joint vector, `Robot.full_joint_names`, mimic joints included):
    R[j, b] = lengths of the joint origins strictly below joint j down to body b's link + |the body's
    offset| + its mesh radius, for j an ancestor of b (1 for a prismatic j: its own speed); P[j, b, k]
    = 1 for the prismatic joints k strictly below j and above b (their extension adds to the reach)."""
    model, world = robot.model, robot.world
    index = {n: i for i, n in enumerate(robot.full_joint_names)}  # mimic joints move bodies too
    joint_of = model.joint_of
    J, L = len(robot.full_joint_names), len(robot.body_names)
    R = torch.zeros(J, L, dtype=torch.float64)
    P = torch.zeros(J, L, J, dtype=torch.float64)
    offsets = robot.body_offset.detach().double().cpu()
    radius = world.radius.detach().double().cpu()
    for b, (link, mesh) in enumerate(zip(robot.body_links, robot.body_mesh.tolist())):
        body = float(offsets[b, :3, 3].norm()) + float(radius[mesh])
        below, prismatic = 0.0, []  # walking up from the body: lengths and prismatic joints passed
        while link in joint_of:
            joint = joint_of[link]
            if joint.type != "fixed":
                j = index[joint.name]
                if joint.type == "prismatic":
                    R[j, b] = 1.0
                else:
                    R[j, b] = below + body
                    P[j, b, prismatic] = 1.0
                if joint.type == "prismatic":
                    prismatic.append(j)
            below += float(torch.as_tensor(joint.origin[:3, 3]).norm())
            link = joint.parent
    return R, P


def motion_bounds(robot: Robot, q0: torch.Tensor, q1: torch.Tensor) -> torch.Tensor:
    """(..., L) float64: bound on how far (metres) any point of each body moves per unit t on the
    joint-space segments q0 -> q1 (..., dof)."""
    R, P = _reach_tables(robot)
    R, P = R.to(q0.device), P.to(q0.device)
    # Mimic joints (affine in q) move linearly on the segment too: bound the full joint vector.
    q0, q1 = robot.full_q(q0), robot.full_q(q1)
    dq = (q1 - q0).abs().double()
    extent = torch.maximum(q0.abs(), q1.abs()).double()  # |q_k(t)| on the segment
    reach = R + torch.einsum("jbk,...k->...jb", P, extent)
    return torch.einsum("...j,...jb->...b", dq, reach)


def swept_check(robot_checker: RobotChecker, q: torch.Tensor, env_idx=None, clearance: float = 1e-3,
                max_steps: int = 100_000) -> SweptResult:
    """Certified verdict on each segment of the trajectories q (batch, horizon, dof) against the
    enabled obstacles of each batch's environment (env_idx: None, an int or (batch,)) and, if the
    checker includes it, self-collision. clearance (metres, > 0): pairs that come closer are
    reported colliding. Uses the exact kernels whatever the checker's backend. A pair still open
    after max_steps is reported colliding (conservative)."""
    robot = robot_checker.robot
    q = robot.check_q(q)
    if q.dim() != 3 or q.shape[1] < 2:
        raise ValueError(f"q: expected shape (batch, horizon >= 2, {robot.dof}), got {tuple(q.shape)}")
    if not clearance > 0:
        raise ValueError(f"clearance: expected a distance > 0 (metres), got {clearance}")
    world = robot.world
    if robot_checker.world_collision and not world.obstacle_names:
        raise ValueError("world: has no obstacle in any environment; add obstacles, or make the "
                         "RobotChecker with world_collision=False for self-collision only")
    if robot_checker.world_collision and world.grid_slots:
        warnings.warn("swept_check: the world's voxel grids are not part of the swept verdict (module "
                      "docstring); check a grid world's waypoints densely with RobotChecker.query", stacklevel=2)
    lib = world.library
    batch, horizon = q.shape[:2]
    q = q.detach().to(world.dtype)
    q0, q1 = q[:, :-1].reshape(-1, robot.dof), q[:, 1:].reshape(-1, robot.dof)
    segments = q0.shape[0]
    mu = motion_bounds(robot, q0, q1).to(world.dtype)  # (S, L)
    if env_idx is None or isinstance(env_idx, int):
        env = torch.full((batch,), env_idx or 0, dtype=torch.int64, device=world.device)
    else:
        env = torch.as_tensor(env_idx, device=world.device).long()
        if env.shape != (batch,):
            raise ValueError(f"env_idx: expected an int or shape ({batch},), got {tuple(env.shape)}")
    env = env[:, None].expand(batch, horizon - 1).reshape(-1)
    n_bodies = len(robot.body_names)

    # Items: (segment, body a, body b or -1 for a static obstacle, obstacle mesh, obstacle pose).
    seg, body_a, body_b, obs_mesh, obs_pose = [], [], [], [], []
    if robot_checker.world_collision:
        enabled = world.obstacle_enabled[env]  # (S, N)
        s_idx, n_idx = torch.nonzero(enabled, as_tuple=True)
        k = s_idx.shape[0]
        seg.append(s_idx.repeat_interleave(n_bodies))
        body_a.append(torch.arange(n_bodies, device=world.device).repeat(k))
        body_b.append(torch.full((k * n_bodies,), -1, dtype=torch.int64, device=world.device))
        obs_mesh.append(world.obstacle_mesh[env[s_idx], n_idx].repeat_interleave(n_bodies))
        obs_pose.append(world.obstacle_pose[env[s_idx], n_idx].repeat_interleave(n_bodies, 0))
    pairs = robot._pairs
    if robot_checker.self_collision and len(pairs):
        p = pairs.shape[0]
        s_idx = torch.arange(segments, device=world.device).repeat_interleave(p)
        seg.append(s_idx)
        body_a.append(pairs[:, 0].repeat(segments))
        body_b.append(pairs[:, 1].repeat(segments))
        obs_mesh.append(torch.zeros(segments * p, dtype=torch.int64, device=world.device))
        obs_pose.append(world.obstacle_pose.new_zeros(segments * p, 7))
    if not seg:  # self-collision only, and no pair left to check
        empty = torch.zeros(0, dtype=torch.int64, device=world.device)
        seg, body_a, body_b, obs_mesh, obs_pose = [empty], [empty], [empty], [empty], [world.obstacle_pose[0, :0]]
    seg, body_a, body_b = torch.cat(seg), torch.cat(body_a), torch.cat(body_b)
    obs_mesh, obs_pose = torch.cat(obs_mesh), torch.cat(obs_pose)
    moving_b = body_b >= 0
    ids_a = robot.body_mesh[body_a]
    ids_b = torch.where(moving_b, robot.body_mesh[body_b.clamp_min(0)], obs_mesh)
    speed = mu[seg, body_a] + torch.where(moving_b, mu[seg, body_b.clamp_min(0)], mu.new_zeros(()))

    def poses_at(items, t):
        qt = q0[seg[items]] + t[:, None] * (q1[seg[items]] - q0[seg[items]])
        bodies = robot.body_poses(qt)  # (K, L, 7)
        rows = torch.arange(items.shape[0], device=world.device)
        pa = bodies[rows, body_a[items]]
        pb = torch.where(moving_b[items, None], bodies[rows, body_b[items].clamp_min(0)], obs_pose[items])
        return pa.contiguous(), pb.contiguous()

    t = torch.zeros(seg.shape[0], dtype=world.dtype, device=world.device)
    hit = torch.zeros(seg.shape[0], dtype=torch.bool, device=world.device)
    open_ = torch.ones_like(hit)
    steps = 0
    with torch.no_grad():
        if seg.numel():
            all_items = torch.arange(seg.shape[0], device=world.device)
            pa, pb = poses_at(all_items, t)
            hit = mesh_collide(lib, ids_a, ids_b, pa, pb)  # already touching or contained at t = 0
            open_ = ~hit
        while bool(open_.any()):
            if steps >= max_steps:
                hit |= open_
                break
            steps += 1
            items = torch.nonzero(open_).squeeze(1)
            pa, pb = poses_at(items, t[items])
            reach = float((speed[items] * (1 - t[items])).max()) + clearance
            d = mesh_distance(lib, ids_a[items], ids_b[items], pa, pb, upper_bound=reach).distance
            close = d < clearance
            hit[items[close]] = True
            step = torch.where(speed[items] > 0, d / speed[items].clamp_min(1e-300), torch.full_like(d, 2.0))
            t[items] = torch.where(close, t[items], t[items] + step)
            open_[items] = ~close & (t[items] < 1)
    colliding = torch.zeros(segments, dtype=torch.bool, device=world.device)
    colliding.scatter_reduce_(0, seg, hit, "amax")
    first = torch.full((segments,), float("inf"), dtype=world.dtype, device=world.device)
    first.scatter_reduce_(0, seg, torch.where(hit, t.clamp(max=1), torch.full_like(t, float("inf"))), "amin")
    first = torch.where(colliding, first, torch.full_like(first, float("nan")))
    return SweptResult(colliding.reshape(batch, horizon - 1), first.reshape(batch, horizon - 1), steps)


def swept_cost(robot_checker: RobotChecker, q: torch.Tensor, env_idx=None, substeps: int = 4) -> torch.Tensor:
    """(batch, horizon - 1) speed-weighted collision cost of each segment of q (batch, horizon, dof)
    (module docstring), differentiable with respect to q; uses the checker's backend."""
    robot = robot_checker.robot
    if robot_checker.checker.validate:
        q = robot.check_q(q)
        if q.dim() != 3 or q.shape[1] < 2:
            raise ValueError(f"q: expected shape (batch, horizon >= 2, {robot.dof}), got {tuple(q.shape)}")
    if isinstance(substeps, bool) or not isinstance(substeps, int) or substeps < 1:
        raise ValueError(f"substeps: expected an int >= 1, got {substeps!r}")
    batch, horizon, dof = q.shape
    s = torch.linspace(0, 1, substeps + 1, dtype=q.dtype, device=q.device)
    qs = q[:, :-1, None] + s[:, None] * (q[:, 1:] - q[:, :-1])[:, :, None]  # (B, H-1, S+1, dof)
    world, own = robot_checker.body_costs(qs.reshape(batch, -1, dof), env_idx)
    world = world.reshape(batch, horizon - 1, substeps + 1, -1)
    own = own.reshape(batch, horizon - 1, substeps + 1, -1)
    origins = robot.body_poses(qs)[..., :3]  # (B, H-1, S+1, L, 3)
    travel = (origins[:, :, 1:] - origins[:, :, :-1]).norm(dim=-1)  # (B, H-1, S, L)
    mean = lambda c: (c[:, :, 1:] + c[:, :, :-1]) / 2  # noqa: E731 (trapezoid over each sub-interval)
    cost = (mean(world) * travel).sum((-1, -2))
    pairs = robot._pairs
    if pairs.numel():
        cost = cost + (mean(own) * (travel[..., pairs[:, 0]] + travel[..., pairs[:, 1]])).sum((-1, -2))
    return cost
