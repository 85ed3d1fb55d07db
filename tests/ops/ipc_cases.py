"""IPC input builders shared by the IPC tests and benchmarks/ipc_barrier.py: jittered stacked
sheets (contact-rich, intersection-free) and random triangle soups."""

from __future__ import annotations

import torch

from contactnet.ops.ipc import mesh_edges


def grid_sheet(n: int, z: float, noise: float, generator: torch.Generator, dtype=torch.float64):
    """An n×n-quad unit sheet at height z (2n² triangles), heights jittered by ±noise."""
    i, j = torch.meshgrid(torch.arange(n + 1), torch.arange(n + 1), indexing="ij")
    xy = torch.stack([i.reshape(-1), j.reshape(-1)], dim=1).to(dtype) / n
    zz = z + noise * (2 * torch.rand(xy.shape[0], generator=generator, dtype=dtype) - 1)
    vertices = torch.cat([xy, zz[:, None]], dim=1)
    k = (i[:-1, :-1] * (n + 1) + j[:-1, :-1]).reshape(-1)
    quads = torch.stack([k, k + n + 1, k + n + 2, k + 1], dim=1)
    faces = torch.cat([quads[:, [0, 1, 2]], quads[:, [0, 2, 3]]], dim=0)
    return vertices, faces


def stacked_sheets(n: int, seed: int = 0, dtype=torch.float64):
    """Two jittered n×n sheets 0.4 h apart (h = 1/n): a contact-rich, intersection-free scene of
    4n² triangles. Returns vertices, faces, edges, vertex_body, and dhat = 0.6 h, below the
    0.707 h separation of non-adjacent primitives within a sheet."""
    g = torch.Generator().manual_seed(seed)
    h = 1.0 / n
    v0, f0 = grid_sheet(n, 0.0, 0.1 * h, g, dtype)
    v1, f1 = grid_sheet(n, 0.4 * h, 0.1 * h, g, dtype)
    v1[:, :2] += 0.37 * h  # shift so vertices fall inside the other sheet's faces
    vertices = torch.cat([v0, v1]).contiguous()
    faces = torch.cat([f0, f1 + v0.shape[0]]).contiguous()
    body = torch.cat([torch.zeros(v0.shape[0], dtype=torch.int64), torch.ones(v1.shape[0], dtype=torch.int64)])
    return vertices, faces, mesh_edges(faces), body, 0.6 * h


def random_triangle_soup(num_triangles: int, seed: int = 0, scale: float = 0.3, dtype=torch.float64):
    """Small random triangles in the unit cube (a self-colliding soup), with edges."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.rand(num_triangles, 1, 3, generator=g, dtype=dtype)
    vertices = (centers + scale * (torch.rand(num_triangles, 3, 3, generator=g, dtype=dtype) - 0.5)).reshape(-1, 3)
    faces = torch.arange(3 * num_triangles).reshape(-1, 3)
    return vertices.contiguous(), faces.contiguous(), mesh_edges(faces)
