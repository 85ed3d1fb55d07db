"""Planner-facing collision queries: queries/s and latency of `CollisionChecker.pairwise` for 1, 64,
4096 and 262144 queries with the learned (LOCC, Global-OCN; embeddings cached) and exact backends,
against a python-fcl loop over the same queries, on one device.

    python -m benchmarks.planning [--ckpt CKPT] [--quick] [--exact-max N] [--threads N] [--out FILE]
                                  [--panda-batch B] [--panda-horizon H] [--panda-only | --no-panda]

A query is one (mesh A, pose A, mesh B, pose B) pair: learned -> collision logit; exact -> the
collision verdict plus the signed distance (exact distance when separated, bisection penetration
estimate when colliding, see contactnet/planning/exact.py); fcl -> `fcl.collide`, plus
`fcl.distance` when free (no containment test and no penetration depth: less work than exact).
A second table times the planner's call, `cost(mesh, poses, env_idx)` plus its gradient, for one
moving mesh against all 8 obstacles of its environment (4 environments).

Panda rows (robosuite's Panda URDF and STL meshes, robosuite household clutter on a table; skipped
with a note when no robosuite wheel is on this machine): `RobotChecker.cost` of every link against
every obstacle and `robot_cost` (cost + joint-space gradient) for batch x horizon configurations
uniform within the joint limits (1 x 1, 32 x 16, then --panda-batch x --panda-horizon, 256 x 64 by
default: 1.08M link queries; --quick: 1 x 1 and 4 x 4), per backend, against a python-fcl loop over
the same link-obstacle pairs (collide, and distance when free). A "link query" is one (link,
enabled obstacle) pair: 11 links x 6 obstacles per configuration (the learned backends also
evaluate the 2 empty slots, masked). Subsampled and extrapolated (the "timed" columns say how many
were timed): the exact backend on at most --exact-max link queries, gradients on at most 16384,
the python-fcl loop on at most 1024.
Then the accuracy gap of a sphere-approximated Panda (cuRobo-style: spheres inside each link's
volume, centres by farthest-point sampling of its voxels, radius the distance to the surface) against
the exact meshes, on configurations within 5 cm of the clutter: false collisions (spheres hit, the
meshes do not) and missed collisions, for n spheres per link and with an inflation margin.

Sphere rows (cuRobo's robot model): `sphere_cost` of (batch, horizon, 64, 4) spheres, up to
256 x 64 x 64 = 1M spheres, against a world of 4 environments x (3 cuboids, a capsule, a cylinder and
3 procedural meshes of 1-4k triangles; the sphere-mesh part runs the BVH op `point_mesh_distance`,
O(log faces) per sphere and mesh), and the cost plus its gradient w.r.t. the spheres (timed on at
most 262144 spheres, extrapolated), against a python-fcl loop (fcl.Sphere vs each obstacle: collide,
and distance when free) over the same sphere-obstacle pairs. A "sphere query" is one (sphere,
enabled obstacle) pair: 8 per sphere.

"grad" columns time the same call plus the backward pass to both query poses (on at most 16384
queries, extrapolated).

Poses: near-contact uniform test pairs (`sample_pairs` with placement "uniform", about half colliding)
over the 15 procedural families, 4096 pairs tiled to the batch size. Speed does not depend on the
weights, so without --ckpt randomly initialised networks of the paper's sizes (M = 6, H = 256,
F = 64) are timed. The exact backend and fcl are timed on at most --exact-max (default 4096) and
1024 queries of the batch respectively (subsampled: per-query cost does not depend on the batch on
the CPU); their rows say how many were timed and report the rate extrapolated to the batch.
"""

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import add_device_option, best_time, cuda_only, print_table, write_json
from contactnet.data.pairs import PairSpec, sample_pairs
from contactnet.data.procedural import DEFAULT_FAMILIES, make_object
from contactnet.geometry import MeshLibrary
from contactnet.geometry.poses import pose_to_matrix
from contactnet.models import LOCC, GlobalOCN, ShapeEncoder
from contactnet.ops import mesh_distance
from contactnet.planning import CollisionChecker, CollisionWorld

SIZES = [1, 64, 4096, 262144]
FCL_MAX = 1024
GRAD_MAX = 16384  # "+grad" timing subsamples larger batches (the backward graph of 262144 queries is GBs)


def fcl_loop(models, ids_a, ids_b, poses_a, poses_b):
    """python-fcl over the queries one by one: collide, and distance when free."""
    import fcl

    ma, mb = pose_to_matrix(poses_a.double()).numpy(), pose_to_matrix(poses_b.double()).numpy()
    out = np.empty(len(ids_a))
    for k in range(len(ids_a)):
        oa = fcl.CollisionObject(models[int(ids_a[k])], fcl.Transform(ma[k, :3, :3], ma[k, :3, 3]))
        ob = fcl.CollisionObject(models[int(ids_b[k])], fcl.Transform(mb[k, :3, :3], mb[k, :3, 3]))
        if fcl.collide(oa, ob, fcl.CollisionRequest(), fcl.CollisionResult()) > 0:
            out[k] = 0.0
        else:
            out[k] = fcl.distance(oa, ob, fcl.DistanceRequest(), fcl.DistanceResult())
    return out


def fcl_models(world: CollisionWorld):
    import fcl

    models = []
    for i in range(len(world.mesh_names)):
        mesh = world.library[i]
        m = fcl.BVHModel()
        m.beginModel(mesh.num_vertices, mesh.num_faces)
        m.addSubModel(mesh.vertices.numpy(), mesh.faces.numpy().astype(np.int32))
        m.endModel()
        models.append(m)
    return models


WORLD_ENVS, WORLD_SLOTS = 4, 8
SPHERES_PER_CONFIG = 64
# (batch, horizon): the last is 1M spheres (x 8 obstacles); --quick runs the first two
SPHERE_SIZES = [(1, 1), (4, 4), (16, 8), (64, 32), (256, 64)]
SPHERE_FCL_MAX = 1024  # spheres in the fcl loop (x 8 obstacles)
SPHERE_GRAD_MAX = 262144  # spheres in the "+grad" timing (its backward graph of 1M spheres is GBs)


def sphere_world(device) -> CollisionWorld:
    """4 environments, each 3 cuboids, a capsule, a cylinder and 3 procedural meshes."""
    world = CollisionWorld(num_envs=WORLD_ENVS, max_obstacles=WORLD_SLOTS, device=device, num_points=64)
    g = torch.Generator().manual_seed(1)
    for i, family in enumerate(DEFAULT_FAMILIES[:3]):
        world.add_mesh(family, make_object(family, i))
    for env in range(WORLD_ENVS):
        def pose():
            return torch.cat([torch.rand(3, generator=g) - 0.5, torch.tensor([1.0, 0, 0, 0])])
        for k in range(3):
            world.add_cuboid(f"box{env}_{k}", (0.1 + 0.2 * torch.rand(3, generator=g)).tolist(), pose(), env)
        world.add_capsule(f"capsule{env}", 0.05, (0, 0, -0.1), (0, 0, 0.1), pose(), env)
        world.add_cylinder(f"cylinder{env}", 0.06, 0.2, pose(), env)
        for k, family in enumerate(DEFAULT_FAMILIES[:3]):
            world.add_obstacle(f"mesh{env}_{k}", family, pose(), env)
    return world


def fcl_sphere_loop(world: CollisionWorld, spheres: torch.Tensor, env_idx: torch.Tensor) -> np.ndarray:
    """python-fcl over every (sphere, enabled obstacle) pair: collide, and distance when free.
    Obstacles as fcl sees them: the world's mesh view (cuboids exact, curved shapes tessellated)."""
    import fcl

    models = fcl_models(world)
    s = spheres.reshape(spheres.shape[0], -1, 4).double().cpu().numpy()
    out = []
    for b in range(s.shape[0]):
        env = int(env_idx[b])
        obstacles = []
        for slot in torch.nonzero(world.obstacle_enabled[env].cpu()).flatten().tolist():
            m = pose_to_matrix(world.obstacle_pose[env, slot].double().cpu()).numpy()
            obstacles.append(fcl.CollisionObject(models[int(world.obstacle_mesh[env, slot])],
                                                 fcl.Transform(m[:3, :3], m[:3, 3])))
        for x, y, z, r in s[b]:
            ball = fcl.CollisionObject(fcl.Sphere(float(r)), fcl.Transform(np.array([x, y, z])))
            for ob in obstacles:
                if fcl.collide(ball, ob, fcl.CollisionRequest(), fcl.CollisionResult()) > 0:
                    out.append(0.0)
                else:
                    out.append(fcl.distance(ball, ob, fcl.DistanceRequest(), fcl.DistanceResult()))
    return np.asarray(out)


def sphere_rows(device, timed, quick: bool, gpu_only: bool) -> list[dict]:
    """sphere_cost (and + gradient) per (batch, horizon), next to a python-fcl loop."""
    from contactnet.planning import sphere_cost

    world = sphere_world(device)
    per_config = SPHERES_PER_CONFIG * WORLD_SLOTS  # sphere queries per configuration
    rows = []
    g = torch.Generator().manual_seed(2)
    for batch, horizon in SPHERE_SIZES[:2] if quick else SPHERE_SIZES:
        spheres = torch.cat([torch.rand(batch, horizon, SPHERES_PER_CONFIG, 3, generator=g) - 0.5,
                             0.02 + 0.03 * torch.rand(batch, horizon, SPHERES_PER_CONFIG, 1, generator=g)], -1)
        spheres = spheres.to(device)
        env_idx = torch.arange(batch, device=device) % WORLD_ENVS
        n = batch * horizon * per_config
        with torch.no_grad():
            seconds = timed(lambda: sphere_cost(world, spheres, env_idx, validate=False), n)
        grad_configs = max(1, min(batch, SPHERE_GRAD_MAX // (horizon * SPHERES_PER_CONFIG)))
        k = grad_configs * horizon * per_config

        def with_grad():
            x = spheres[:grad_configs].clone().requires_grad_()
            sphere_cost(world, x, env_idx[:grad_configs], validate=False).sum().backward()

        grad_seconds = timed(with_grad, k)
        rows.append({"backend": "sphere_cost", "configs": batch * horizon,
                     "spheres": batch * horizon * SPHERES_PER_CONFIG, "sphere_queries": n, "timed": n,
                     "latency_ms": 1e3 * seconds, "qps": n / seconds, "us_per_query": 1e6 * seconds / n,
                     "grad_timed": k, "grad_latency_ms": 1e3 * grad_seconds * n / k, "grad_qps": k / grad_seconds})
        if gpu_only:
            continue
        configs = max(1, min(batch, SPHERE_FCL_MAX // (horizon * SPHERES_PER_CONFIG)))
        m = configs * horizon * per_config
        seconds = timed(lambda: fcl_sphere_loop(world, spheres[:configs], env_idx[:configs]), m, True)
        rows.append({"backend": "python-fcl loop", "configs": batch * horizon,
                     "spheres": batch * horizon * SPHERES_PER_CONFIG, "sphere_queries": n, "timed": m,
                     "latency_ms": 1e3 * seconds * n / m, "qps": m / seconds, "us_per_query": 1e6 * seconds / m})
    return rows
WORLD_LEARNED_MAX, WORLD_EXACT_MAX = 4096, 1024


def world_cost_rows(world: CollisionWorld, checkers: dict, sizes: list[int], timed, device) -> list[dict]:
    """Time `checker.cost(mesh, poses, env_idx)` + backward, the call a trajectory optimiser makes:
    each environment holds WORLD_SLOTS random procedural obstacles in a 0.4 m cube, queries are
    uniform poses of a random mesh in that cube."""
    g = torch.Generator().manual_seed(1)
    m = len(world.mesh_names)
    for env in range(WORLD_ENVS):
        for k in range(WORLD_SLOTS):
            q = torch.randn(4, generator=g)
            pose = torch.cat([(torch.rand(3, generator=g) - 0.5) * 0.4, q / q.norm()])
            world.add_obstacle(f"o{env}_{k}", int(torch.randint(m, (1,), generator=g)), pose, env=env)
    n_max = max(sizes)
    ids = torch.randint(m, (n_max,), generator=g).to(device)
    env = torch.randint(WORLD_ENVS, (n_max,), generator=g).to(device)
    q = torch.randn(n_max, 4, generator=g)
    poses = torch.cat([(torch.rand(n_max, 3, generator=g) - 0.5) * 0.4, q / q.norm(dim=1, keepdim=True)], 1).to(device)
    rows = []
    for n in sizes:
        for name, checker in checkers.items():
            k = min(n, WORLD_LEARNED_MAX if checker.learned else WORLD_EXACT_MAX)

            def call():
                p = poses[:k].clone().requires_grad_()
                checker.cost(ids[:k], p, env[:k]).sum().backward()

            seconds = timed(call, k, not checker.learned)
            rows.append({"backend": name, "queries": n, "timed": k, "latency_ms": 1e3 * seconds * n / k,
                         "qps": k / seconds, "us_per_query": 1e6 * seconds / k})
    return rows


PANDA_SIZES = [(1, 1), (32, 16)]  # (batch, horizon); then (--panda-batch, --panda-horizon), 256 x 64 by
#                                  default: 16384 configurations x 11 links x 6 obstacles = 1.08M link queries
PANDA_QUICK_SIZES = [(1, 1), (4, 4)]
PANDA_SPHERES = (4, 8, 16)  # spheres per link
PANDA_INFLATE = 0.01  # metres: the margin a sphere planner adds (cuRobo's collision activation distance)


def fit_link_spheres(mesh, n: int, voxels: int = 4096):
    """(n, 3) centres, (n,) radii: cuRobo-style spheres inside a link mesh (a `Mesh`): centres by
    farthest-point sampling of the centres of about `voxels` voxels of its box that lie inside it
    (winding number >= 0.5), each radius the distance from its centre to the surface."""
    from contactnet.ops import point_triangle_distance
    from contactnet.ops.reference.mesh_contacts import winding_number_reference

    tris = mesh.triangles.double()
    lo, hi = mesh.bounds().double()
    pitch = float((hi - lo).prod() / voxels) ** (1 / 3)
    axes = [torch.arange(float(lo[k]) + pitch / 2, float(hi[k]), pitch, dtype=torch.float64) for k in range(3)]
    grid = torch.stack(torch.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    inside = torch.cat([winding_number_reference(grid[i:i + 2048], tris) >= 0.5 for i in range(0, len(grid), 2048)])
    points = grid[inside] if int(inside.sum()) >= n else grid
    centres = [points[torch.argmin((points - points.mean(0)).norm(dim=1))]]
    gap = (points - centres[0]).norm(dim=1)
    for _ in range(n - 1):  # farthest-point sampling of the interior
        centres.append(points[int(torch.argmax(gap))])
        gap = torch.minimum(gap, (points - centres[-1]).norm(dim=1))
    centres = torch.stack(centres)
    pairs = point_triangle_distance(centres.repeat_interleave(len(tris), 0), tris.repeat(n, 1, 1))
    return centres.numpy(), pairs.distance.reshape(n, len(tris)).min(1).values.numpy()


def sphere_verdicts(robot, spheres, q, obstacles, inflate: float) -> np.ndarray:
    """(C,) bool: any link sphere (grown by `inflate`) touches an obstacle mesh (python-fcl)."""
    import fcl

    from contactnet.geometry.poses import transform_points

    poses = robot.body_poses(q).double()  # (C, L, 7)
    out = np.zeros(len(q), dtype=bool)
    request = fcl.CollisionRequest()
    for c in range(len(q)):
        for i, (centres, radii) in enumerate(spheres):
            world = transform_points(poses[c, i], torch.as_tensor(centres)).numpy()
            for x, r in zip(world, radii):
                ball = fcl.CollisionObject(fcl.Sphere(float(r) + inflate), fcl.Transform(x))
                if any(fcl.collide(ball, o, request, fcl.CollisionResult()) > 0 for o in obstacles):
                    out[c] = True
                    break
            if out[c]:
                break
    return out


def panda_sizes(args) -> list[tuple[int, int]]:
    """(batch, horizon) of the Panda speed rows: small ones, then the requested largest."""
    if args.quick:
        return PANDA_QUICK_SIZES
    return [s for s in PANDA_SIZES if s[0] * s[1] < args.panda_batch * args.panda_horizon] + \
        [(args.panda_batch, args.panda_horizon)]


def panda_rows(args, device, timed, gpu_only: bool = False) -> tuple[list[dict], list[dict], str]:
    """Panda speed rows, sphere accuracy rows and a note (module docstring); gpu_only leaves out the
    python-fcl timing (a CPU peer), not the accuracy gap (fcl is its sphere oracle, untimed).
    Without python-fcl the speed rows of our backends still run; its rows and the gap are left out."""
    from contactnet.data.robosuite_meshes import RobosuiteMeshError
    from contactnet.planning import Robot, RobotChecker
    from contactnet.planning.panda import PANDA_IGNORE, add_clutter, extract_panda, household_meshes

    cache = Path(__file__).resolve().parents[1] / "data" / "meshes" / "robosuite"
    try:
        urdf = extract_panda(cache.parent.parent / "robots", cache=cache, download=False)
        objects = household_meshes(cache=cache, download=False)
    except RobosuiteMeshError as error:
        return [], [], f"Panda rows skipped: {error}"
    try:
        import fcl
    except ImportError:
        fcl = None
    world = CollisionWorld(max_obstacles=8, device=device, num_points=1500)
    robot = Robot(urdf, world, ignore=PANDA_IGNORE)
    obstacle_names = add_clutter(world, objects)
    checkers = {}
    for name, cls in (("locc", LOCC), ("global_ocn", GlobalOCN)):
        torch.manual_seed(0)
        checkers[name] = CollisionChecker(world, name, cls(ShapeEncoder()), validate=False)
        checkers[name].embeddings()
    checkers["exact"] = CollisionChecker(world, "exact", validate=False)
    g = torch.Generator().manual_seed(3)
    lim = robot.joint_limits.float()
    n_links, n_obs = len(robot.body_names), len(obstacle_names)
    per_config = n_links * n_obs  # link queries per configuration
    models = fcl_models(world) if fcl else None
    slots = [world.obstacle(n)[1] for n in obstacle_names]
    rows = []
    for b, h in panda_sizes(args):
        q = (lim[:, 0] + torch.rand(b, h, robot.dof, generator=g) * (lim[:, 1] - lim[:, 0])).to(device)
        for name, checker in checkers.items():
            rc = RobotChecker(robot, checker, self_collision=False)
            # The exact backend is timed on at most --exact-max link queries' worth of configurations,
            # every backend's gradient on at most GRAD_MAX (the backward graph of 1M link queries is GBs).
            k = b * h if checker.learned else max(1, min(b * h, args.exact_max // per_config))
            kg = max(1, min(k, GRAD_MAX // per_config))
            qk, qg = q.reshape(-1, robot.dof)[:k][None], q.reshape(-1, robot.dof)[:kg][None]
            with torch.no_grad():
                seconds = timed(lambda: rc.cost(qk), k * per_config, not checker.learned)
            grad_seconds = timed(lambda: rc.robot_cost(qg), kg * per_config, not checker.learned)
            rows.append({"backend": name, "configs": f"{b}x{h}", "link_queries": b * h * per_config,
                         "timed": k * per_config, "latency_ms": 1e3 * seconds * b * h / k,
                         "qps": k * per_config / seconds, "us_per_link_query": 1e6 * seconds / (k * per_config),
                         "grad_timed": kg * per_config, "grad_latency_ms": 1e3 * grad_seconds * b * h / kg,
                         "grad_us_per_link_query": 1e6 * grad_seconds / (kg * per_config)})
        if gpu_only or not fcl:
            continue
        # python-fcl over the same (link, obstacle) pairs of the first configurations.
        k = max(1, min(b * h, FCL_MAX // per_config))
        poses = robot.body_poses(q.reshape(-1, robot.dof)[:k]).cpu()  # (k, L, 7)
        ids_a = robot.body_mesh.cpu()[None, :, None].expand(k, n_links, n_obs).reshape(-1)
        ids_b = world.obstacle_mesh[0, slots].cpu()[None, None, :].expand(k, n_links, n_obs).reshape(-1)
        pa = poses[:, :, None, :].expand(k, n_links, n_obs, 7).reshape(-1, 7)
        pb = world.obstacle_pose[0, slots].cpu()[None, None].expand(k, n_links, n_obs, 7).reshape(-1, 7)
        seconds = timed(lambda: fcl_loop(models, ids_a, ids_b, pa, pb), len(ids_a), True)
        rows.append({"backend": "python-fcl loop", "configs": f"{b}x{h}", "link_queries": b * h * per_config,
                     "timed": len(ids_a), "latency_ms": 1e3 * seconds * b * h / k, "qps": len(ids_a) / seconds,
                     "us_per_link_query": 1e6 * seconds / len(ids_a)})

    if not fcl:
        return rows, [], "python-fcl rows and the sphere accuracy gap skipped: python-fcl is not installed"
    # Sphere accuracy: configurations within 5 cm of the clutter, exact verdicts as the truth.
    exact = RobotChecker(robot, checkers["exact"], self_collision=False)
    cand = (lim[:, 0] + torch.rand(args.panda_accuracy * 8, robot.dof, generator=g) * (lim[:, 1] - lim[:, 0]))
    cand = cand.to(world.dtype).to(device)
    # Distance of every (link, obstacle) pair, searched only below 5 cm.
    poses = robot.body_poses(cand)[:, :, None].expand(len(cand), n_links, n_obs, 7).reshape(-1, 7)
    ids_a = robot.body_mesh[None, :, None].expand(len(cand), n_links, n_obs).reshape(-1)
    ids_b = world.obstacle_mesh[0, slots][None, None].expand(len(cand), n_links, n_obs).reshape(-1)
    obs = world.obstacle_pose[0, slots][None, None].expand(len(cand), n_links, n_obs, 7).reshape(-1, 7)
    d = mesh_distance(world.library, ids_a, ids_b, poses.contiguous(), obs.contiguous(), upper_bound=0.05).distance
    near = cand[(d.reshape(len(cand), -1).min(-1).values < 0.05).cpu()][: args.panda_accuracy]
    truth = exact.query(near[None]).colliding[0].cpu().numpy()
    obstacles = []
    for name in obstacle_names:
        env, slot = world.obstacle(name)
        m = pose_to_matrix(world.obstacle_pose[env, slot].double().cpu()).numpy()
        obstacles.append(fcl.CollisionObject(models[int(world.obstacle_mesh[env, slot])],
                                             fcl.Transform(m[:3, :3], m[:3, 3])))
    accuracy = []
    links = [world.library[int(i)] for i in robot.body_mesh]
    for n in PANDA_SPHERES if not args.quick else PANDA_SPHERES[:1]:
        spheres = [fit_link_spheres(m, n) for m in links]
        for inflate in (0.0, PANDA_INFLATE):
            got = sphere_verdicts(robot, spheres, near.cpu(), obstacles, inflate)
            accuracy.append({"spheres_per_link": n, "inflate_m": inflate, "configs": len(near),
                             "colliding": int(truth.sum()), "false_collisions": int((got & ~truth).sum()),
                             "missed_collisions": int((~got & truth).sum()),
                             "false_rate": float((got & ~truth).sum() / max(1, (~truth).sum())),
                             "miss_rate": float((~got & truth).sum() / max(1, truth.sum()))})
    return rows, accuracy, ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", default=None, help="a LOCC or Global-OCN checkpoint for the learned rows")
    parser.add_argument("--quick", action="store_true", help="sizes up to 4096")
    parser.add_argument("--exact-max", type=int, default=4096, help="exact queries timed per size (subsample)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--panda-batch", type=int, default=256, help="Panda's largest size: batch")
    parser.add_argument("--panda-horizon", type=int, default=64, help="Panda's largest size: horizon "
                        "(256 x 64 x 11 links x 6 obstacles = 1.08M link queries)")
    parser.add_argument("--panda-accuracy", type=int, default=400, help="configurations of the sphere accuracy gap")
    parser.add_argument("--panda-only", action="store_true", help="only the Panda rows")
    parser.add_argument("--no-panda", action="store_true", help="skip the Panda rows")
    add_device_option(parser)
    args = parser.parse_args()
    gpu_only = cuda_only(args)  # the python-fcl loop is a CPU peer: left out
    if args.quick:  # Panda sizes: PANDA_QUICK_SIZES
        args.panda_accuracy = min(args.panda_accuracy, 40)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sizes = [s for s in SIZES if not args.quick or s <= 4096]

    def timed(fn, n, slow=False):
        return best_time(fn, repeats=1 if n >= 100_000 or (slow and n >= 1024) else 3, warmup=1)

    panda, accuracy, note = ([], [], "Panda rows skipped (--no-panda)") if args.no_panda else \
        panda_rows(args, device, timed, gpu_only)
    if args.panda_only:
        print_panda(panda, accuracy, note, device)
        write_json("planning_panda", {"device": device, "panda_rows": panda, "sphere_accuracy": accuracy}, args.out)
        return

    world = CollisionWorld(num_envs=WORLD_ENVS, max_obstacles=WORLD_SLOTS, device=device, num_points=1500)
    for i, family in enumerate(DEFAULT_FAMILIES):
        world.add_mesh(family, make_object(family, i))
    checkers = {}
    if args.ckpt:
        c = CollisionChecker.from_checkpoint(args.ckpt, world, validate=False)
        checkers[c.backend] = c
    for name, cls in (("locc", LOCC), ("global_ocn", GlobalOCN)):
        if name not in checkers:
            torch.manual_seed(0)
            checkers[name] = CollisionChecker(world, name, cls(ShapeEncoder()), validate=False)
    checkers["exact"] = CollisionChecker(world, "exact", validate=False)
    for c in checkers.values():
        if c.learned:
            c.embeddings()  # cached once per mesh set: not part of any query's time

    g = torch.Generator().manual_seed(0)
    base = 4096
    ids_a = torch.randint(len(DEFAULT_FAMILIES), (base,), generator=g)
    ids_b = torch.randint(len(DEFAULT_FAMILIES), (base,), generator=g)
    lib64 = MeshLibrary([world.library[i] for i in range(len(DEFAULT_FAMILIES))], dtype=torch.float64)
    pa, pb, _, _ = sample_pairs(lib64, ids_a, ids_b, PairSpec(placement="uniform"), g)
    reps = (max(sizes) + base - 1) // base
    ids_a, ids_b = ids_a.repeat(reps).to(device), ids_b.repeat(reps).to(device)
    pa, pb = pa.float().repeat(reps, 1).to(device), pb.float().repeat(reps, 1).to(device)
    models = None if gpu_only else fcl_models(world)

    rows = []
    started = time.perf_counter()
    for n in sizes:
        for name, checker in checkers.items():
            m = n if checker.learned else min(n, args.exact_max)
            qa, qb, xa, xb = ids_a[:m], ids_b[:m], pa[:m], pb[:m]
            with torch.no_grad():
                seconds = timed(lambda: checker.pairwise(qa, qb, xa, xb), m, not checker.learned)

            k = min(m, GRAD_MAX)

            def with_grad():
                ga, gb = xa[:k].clone().requires_grad_(), xb[:k].clone().requires_grad_()
                r = checker.pairwise(qa[:k], qb[:k], ga, gb)
                (r.logit if checker.learned else r.signed_distance).sum().backward()

            grad_seconds = timed(with_grad, k, not checker.learned)
            rows.append({"backend": name, "queries": n, "timed": m, "latency_ms": 1e3 * seconds * n / m,
                         "qps": m / seconds, "us_per_query": 1e6 * seconds / m, "grad_timed": k,
                         "grad_latency_ms": 1e3 * grad_seconds * n / k, "grad_qps": k / grad_seconds})
        if gpu_only:
            continue
        m = min(n, FCL_MAX)
        seconds = timed(lambda: fcl_loop(models, ids_a[:m].cpu(), ids_b[:m].cpu(), pa[:m].cpu(), pb[:m].cpu()), m, True)
        rows.append({"backend": "python-fcl loop", "queries": n, "timed": m, "latency_ms": 1e3 * seconds * n / m,
                     "qps": m / seconds, "us_per_query": 1e6 * seconds / m})
    world_rows = world_cost_rows(world, checkers, sizes, timed, device)
    spheres = sphere_rows(device, timed, args.quick, gpu_only)
    print(f"pairwise collision queries on {device} ({torch.get_num_threads()} threads), embeddings cached; "
          f"latency of the whole batch (extrapolated where timed < queries); "
          f"total {time.perf_counter() - started:.0f} s")
    print_table(rows, ["backend", "queries", "timed", "latency_ms", "qps", "us_per_query", "grad_timed",
                       "grad_latency_ms", "grad_qps"])
    print(f"\nobject-vs-world cost + gradient w.r.t. the poses: {WORLD_ENVS} environments x {WORLD_SLOTS} "
          f"enabled obstacles; one query = one pose against its whole environment (timed on at most "
          f"{WORLD_LEARNED_MAX} learned / {WORLD_EXACT_MAX} exact queries, extrapolated)")
    print_table(world_rows, ["backend", "queries", "timed", "latency_ms", "qps", "us_per_query"])
    print(f"\ncuRobo-layout sphere queries: sphere_cost of (batch, horizon, {SPHERES_PER_CONFIG}, 4) spheres against "
          f"the {WORLD_SLOTS} obstacles of their environment (cuboids, capsule, cylinder, meshes); "
          f"one query = one sphere-obstacle pair; python-fcl timed on at most {SPHERE_FCL_MAX} spheres, +grad on "
          f"at most {SPHERE_GRAD_MAX}, extrapolated")
    print_table(spheres, ["backend", "configs", "spheres", "sphere_queries", "timed", "latency_ms", "qps",
                          "us_per_query", "grad_timed", "grad_latency_ms", "grad_qps"])
    print_panda(panda, accuracy, note, device)
    write_json("planning", {"device": device, "rows": rows, "world_rows": world_rows, "sizes": sizes,
                            "exact_max": args.exact_max, "fcl_max": FCL_MAX, "grad_max": GRAD_MAX,
                            "sphere_rows": spheres, "panda_rows": panda, "sphere_accuracy": accuracy}, args.out)


def print_panda(rows, accuracy, note, device) -> None:
    if note:
        print(f"\n{note}")
    if not rows:
        return
    print(f"\nPanda links vs household clutter on {device}: cost of batch x horizon configurations, one link "
          f"query = one (link, obstacle) pair; latency of the whole batch, extrapolated where timed < "
          f"link_queries (subsampled: exact on at most --exact-max link queries, python-fcl loop on at most "
          f"{FCL_MAX}, same pairs); + joint-space gradient (robot_cost, timed on at most {GRAD_MAX})")
    print_table(rows, ["backend", "configs", "link_queries", "timed", "latency_ms", "qps", "us_per_link_query",
                       "grad_timed", "grad_latency_ms", "grad_us_per_link_query"])
    if not accuracy:
        return
    print("\nsphere-approximated Panda vs the exact meshes, configurations within 5 cm of the clutter")
    print_table(accuracy, ["spheres_per_link", "inflate_m", "configs", "colliding", "false_collisions",
                           "missed_collisions", "false_rate", "miss_rate"])


if __name__ == "__main__":
    main()
