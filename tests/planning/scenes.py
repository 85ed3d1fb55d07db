"""Input builders shared by the planning tests, the benchmark and (in spirit) the notebook: small
procedural worlds and a tiny collision net fitted in seconds to exact labels."""

import torch

from contactnet.data.pairs import random_quaternions
from contactnet.data.procedural import make_object
from contactnet.models import LOCC, GlobalOCN, ShapeEncoder
from contactnet.ops import mesh_collide
from contactnet.planning import CollisionWorld

FAMILIES = ("l_bracket", "star_prism", "t_bracket", "gear_prism")  # small meshes (320-640 faces)


def make_world(num_envs: int = 1, max_obstacles: int = 4, families=FAMILIES, dtype=torch.float32,
               num_points: int = 256, device="cpu") -> CollisionWorld:
    """A world with one mesh per family (seed 0), no obstacles yet."""
    world = CollisionWorld(num_envs=num_envs, max_obstacles=max_obstacles, dtype=dtype,
                           num_points=num_points, device=device)
    for i, fam in enumerate(families):
        world.add_mesh(fam, make_object(fam, i))
    return world


def tiny_net(kind: str = "locc", seed: int = 0):
    torch.manual_seed(seed)
    encoder = ShapeEncoder(grid=4, hidden=32, features=16, channels=16)
    return (LOCC if kind == "locc" else GlobalOCN)(encoder, head_hidden=64)


def random_pairs(world: CollisionWorld, n: int, seed: int = 0, spread: float = 1.5):
    """n random pairs: A at the origin, B at a uniform direction and a distance uniform in
    [0, spread * (r_A + r_B)], both rotations uniform. Returns ids_a, ids_b, poses_a, poses_b."""
    g = torch.Generator().manual_seed(seed)
    m = len(world.mesh_names)
    ids_a = torch.randint(m, (n,), generator=g)
    ids_b = torch.randint(m, (n,), generator=g)
    radius = world.radius.cpu()
    reach = (radius[ids_a] + radius[ids_b]).double()
    away = torch.randn(n, 3, generator=g, dtype=torch.float64)
    away = away / away.norm(dim=1, keepdim=True) * (torch.rand(n, generator=g, dtype=torch.float64) * spread
                                                   * reach)[:, None]
    pa = torch.cat([torch.zeros(n, 3, dtype=torch.float64), random_quaternions(n, g)], 1)
    pb = torch.cat([away, random_quaternions(n, g)], 1)
    return ids_a, ids_b, pa.to(world.dtype), pb.to(world.dtype)


def fit_tiny_net(world: CollisionWorld, kind: str = "locc", steps: int = 150, pairs: int = 4096,
                 batch: int = 256, seed: int = 0):
    """A tiny net trained for a few seconds on exact labels of random pairs in `world`."""
    net = tiny_net(kind, seed)
    ids_a, ids_b, pa, pb = random_pairs(world, pairs, seed)
    labels = mesh_collide(world.library, ids_a, ids_b, pa, pb).float()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        i = torch.randint(pairs, (batch,), generator=g)
        table = net.encode(world.points, world.normals, world.aabb)
        logit = net.predict_indexed(table, ids_a[i], ids_b[i], pa[i].float(), pb[i].float())
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, labels[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net.eval()
