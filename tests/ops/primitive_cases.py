"""Input builders for the primitive-distance tests and benchmark: random batches at a scale and
named adversarial triangle pairs (each with its exact distance where it is known in closed form)."""

import math

import torch


def random_triangle_pairs(n: int, scale: float = 1.0, dtype=torch.float64, seed: int = 0):
    """n pairs of random triangles in a box of side ~scale, about half of them intersecting."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(n, 3, 3, generator=g, dtype=dtype) * scale
    b = torch.randn(n, 3, 3, generator=g, dtype=dtype) * scale + 0.5 * scale
    return a, b


def _t(rows):
    return torch.tensor(rows, dtype=torch.float64)


# name -> (tri_a, tri_b, exact distance or None when only the reference knows it)
ADVERSARIAL_TRIANGLES = {
    "shared_vertex": (_t([[0, 0, 0], [1, 0, 0], [0, 1, 0]]), _t([[0, 0, 0], [-1, 0, 1], [0, -1, 1]]), 0.0),
    "vertex_on_face": (_t([[-1, -1, 0], [2, -1, 0], [-1, 2, 0]]), _t([[0, 0, 0], [0, 0, 1], [1, 0, 1]]), 0.0),
    "edge_crosses_edge": (_t([[-1, 0, 0], [1, 0, 0], [0, 0, -1]]), _t([[0, -1, 0], [0, 1, 0], [0, 0, 1]]), 0.0),
    "piercing": (_t([[-1, -1, 0], [2, -1, 0], [-1, 2, 0]]), _t([[0.2, 0.2, -1], [0.3, 0.2, 1], [0.2, 0.4, 1]]), 0.0),
    "chain_links": (_t([[-1, 0, -1], [1, 0, -1], [0, 0, 1]]), _t([[0, -1, 0.5], [0, 1, 0.5], [0, 0, -1.5]]), 0.0),
    "coplanar_overlap": (_t([[0, 0, 0], [2, 0, 0], [0, 2, 0]]), _t([[0.5, 0.5, 0], [3, 0.5, 0], [0.5, 3, 0]]), 0.0),
    "coplanar_contained": (_t([[0, 0, 0], [4, 0, 0], [0, 4, 0]]), _t([[0.5, 0.5, 0], [1, 0.5, 0], [0.5, 1, 0]]), 0.0),
    "coplanar_separated": (_t([[0, 0, 0], [1, 0, 0], [0, 1, 0]]), _t([[2, 0, 0], [3, 0, 0], [2, 1, 0]]), 1.0),
    "parallel_planes": (_t([[0, 0, 0], [1, 0, 0], [0, 1, 0]]), _t([[0, 0, 0.25], [1, 0, 0.25], [0, 1, 0.25]]), 0.25),
    "parallel_edges": (_t([[0, 0, 0], [1, 0, 0], [0.5, -1, 0]]), _t([[0.2, 0, 0.5], [0.8, 0, 0.5], [0.5, 1, 0.5]]), 0.5),
    "skew_edges": (_t([[-1, 0, 0], [1, 0, 0], [0, 0, -1]]), _t([[0, -1, 0.3], [0, 1, 0.3], [0, 0, 1]]), 0.3),
    "nearly_parallel_edges": (
        _t([[0, 0, 0], [1, 0, 0], [0.5, -1, 0]]),
        _t([[0, 1e-9, 0.1], [1, -1e-9, 0.1], [0.5, 0, 1]]),
        0.1,
    ),
    "touching_edge_on_face": (_t([[-1, -1, 0], [2, -1, 0], [-1, 2, 0]]), _t([[0, 0, 0], [0.5, 0, 0], [0.2, 0, 1]]), 0.0),
    "near_miss_1e-12": (_t([[-1, -1, 0], [2, -1, 0], [-1, 2, 0]]), _t([[0, 0, 1e-12], [0.5, 0, 1e-12], [0.2, 0, 1]]), 1e-12),
    "collinear_triangle": (_t([[0, 0, 1], [1, 0, 1], [2, 0, 1]]), _t([[0, 0, 0], [1, 0, 0], [0, 1, 0]]), 1.0),
    "repeated_vertex": (_t([[0.3, 0.3, 2], [0.3, 0.3, 2], [0.3, 0.3, 3]]), _t([[0, 0, 0], [1, 0, 0], [0, 1, 0]]), 2.0),
    "both_points": (_t([[5, 0, 0], [5, 0, 0], [5, 0, 0]]), _t([[1, 0, 0], [1, 0, 0], [1, 0, 0]]), 4.0),
    "degenerate_crossing": (_t([[0.2, 0.2, -1], [0.2, 0.2, 1], [0.2, 0.2, 0]]), _t([[0, 0, 0], [1, 0, 0], [0, 1, 0]]), 0.0),
    "far_apart_huge": (
        _t([[1e3, 1e3, 1e3], [1e3 + 1, 1e3, 1e3], [1e3, 1e3 + 1, 1e3]]),
        _t([[-1e3, -1e3, -1e3], [-1e3 + 1, -1e3, -1e3], [-1e3, -1e3 + 1, -1e3]]),
        None,
    ),
    "tiny_separated": (_t([[0, 0, 0], [1e-4, 0, 0], [0, 1e-4, 0]]), _t([[0, 0, 3e-5], [1e-4, 0, 3e-5], [0, 1e-4, 3e-5]]), 3e-5),
}


def adversarial_batch(dtype=torch.float64):
    names = list(ADVERSARIAL_TRIANGLES)
    a = torch.stack([ADVERSARIAL_TRIANGLES[k][0] for k in names]).to(dtype)
    b = torch.stack([ADVERSARIAL_TRIANGLES[k][1] for k in names]).to(dtype)
    exact = [ADVERSARIAL_TRIANGLES[k][2] for k in names]
    exact = torch.tensor([math.nan if e is None else e for e in exact], dtype=torch.float64)
    return names, a, b, exact
