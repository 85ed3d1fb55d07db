"""Triangle meshes (polygon soups) and packed mesh libraries with their BVHs.

`Mesh` holds one mesh; `MeshLibrary` packs many into a few tensors with per-mesh offsets, so a
whole library lives on one device and batched queries address meshes by id. Nothing assumes
watertight or manifold meshes. Import trimesh only inside the functions that load files.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
import torch

from contactnet.geometry.convex_hulls import ConvexHulls, build_convex_hulls

__all__ = ["Mesh", "MeshBvh", "MeshLibrary"]

# A face is degenerate when |ab x ac|^2 <= _DEGENERATE * |ab|^2 |ac|^2 (zero area up to rounding:
# the sine of its sharpest angle is below 1e-6), or when it repeats a vertex index.
_DEGENERATE = 1e-12
LEAF_COUNT_BITS = 3  # kLeafCountBits of csrc/common/bvh.h


class Mesh:
    """One triangle mesh: vertices (V, 3) float64 metres, faces (F, 3) int64 vertex indices.

    Construction validates the input: NaN/Inf vertices or face indices outside [0, V) raise a
    ValueError naming the mesh; degenerate faces (repeated indices, zero area) are dropped with a
    warning (face ids reported by queries refer to the kept faces, in order; `kept_faces` maps
    them back to the input rows); a mesh left with no face raises a ValueError. Vertices are kept
    where the user put them: `recentered()` returns the copy whose frame origin is the centre of
    its axis-aligned bounding box (the project's object-frame convention).
    """

    def __init__(self, vertices, faces, name: str | None = None):
        self.name = name if name is not None else "mesh"
        v = torch.as_tensor(np.asarray(vertices, dtype=np.float64) if not isinstance(
            vertices, torch.Tensor) else vertices.detach().cpu().double())
        f = torch.as_tensor(np.asarray(faces) if not isinstance(faces, torch.Tensor)
                            else faces.detach().cpu())  # fmt: skip
        if v.dim() != 2 or v.shape[1] != 3:
            raise ValueError(f"mesh {self.name!r}: vertices must have shape (V, 3), got "
                             f"{tuple(v.shape)}")  # fmt: skip
        if f.numel() == 0:
            f = f.reshape(0, 3)
        if f.dim() != 2 or f.shape[1] != 3:
            raise ValueError(f"mesh {self.name!r}: faces must have shape (F, 3), got "
                             f"{tuple(f.shape)}")  # fmt: skip
        if f.dtype.is_floating_point or f.dtype == torch.bool:
            raise TypeError(f"mesh {self.name!r}: faces must be integer indices, got {f.dtype}")
        f = f.long()
        if not bool(torch.isfinite(v).all()):
            raise ValueError(f"mesh {self.name!r}: vertices contain NaN or Inf")
        if f.numel() and (int(f.min()) < 0 or int(f.max()) >= v.shape[0]):
            raise ValueError(
                f"mesh {self.name!r}: face indices must lie in [0, {v.shape[0]}), got "
                f"[{int(f.min())}, {int(f.max())}]"
            )
        keep = _nondegenerate(v, f)
        dropped = int((~keep).sum())
        if dropped:
            warnings.warn(
                f"mesh {self.name!r}: dropped {dropped} degenerate face(s) of {f.shape[0]}",
                stacklevel=2,
            )
        if not bool(keep.any()):
            raise ValueError(f"mesh {self.name!r} is empty: it has no non-degenerate face")
        self.vertices = v.contiguous()
        self.faces = f[keep].contiguous()
        self.kept_faces = torch.nonzero(keep).squeeze(1)

    # ---- construction ---------------------------------------------------------------------
    @classmethod
    def from_trimesh(cls, tm, name: str | None = None) -> Mesh:
        return cls(np.asarray(tm.vertices), np.asarray(tm.faces), name=name)

    @classmethod
    def from_file(cls, path, name: str | None = None) -> Mesh:
        """Load any file trimesh reads (scenes are concatenated into one soup)."""
        import trimesh

        loaded = trimesh.load(str(path), force="mesh", process=False)
        return cls.from_trimesh(loaded, name=name if name is not None else str(path))

    def to_trimesh(self):
        import trimesh

        return trimesh.Trimesh(self.vertices.numpy(), self.faces.numpy(), process=False)

    # ---- properties -------------------------------------------------------------------------
    @property
    def num_vertices(self) -> int:
        return int(self.vertices.shape[0])

    @property
    def num_faces(self) -> int:
        return int(self.faces.shape[0])

    @property
    def triangles(self) -> torch.Tensor:
        """(F, 3, 3) float64 triangle vertices."""
        return self.vertices[self.faces]

    def bounds(self) -> torch.Tensor:
        """(2, 3) axis-aligned bounds of the vertices used by faces."""
        used = self.vertices[self.faces.reshape(-1)]
        return torch.stack([used.min(0).values, used.max(0).values])

    def aabb_center(self) -> torch.Tensor:
        return self.bounds().mean(0)

    def recentered(self) -> Mesh:
        """Copy translated so that the centre of its axis-aligned bounding box is the origin."""
        out = Mesh.__new__(Mesh)
        out.name, out.faces, out.kept_faces = self.name, self.faces, self.kept_faces
        out.vertices = (self.vertices - self.aabb_center()).contiguous()
        return out

    def __repr__(self) -> str:
        return f"Mesh({self.name!r}, vertices={self.num_vertices}, faces={self.num_faces})"


def _nondegenerate(v: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    if f.shape[0] == 0:
        return torch.zeros(0, dtype=torch.bool)
    t = v[f]
    ab, ac = t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]
    n2 = torch.linalg.cross(ab, ac).square().sum(-1)
    distinct = (f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 0] != f[:, 2])
    return distinct & (n2 > _DEGENERATE * ab.square().sum(-1) * ac.square().sum(-1))


class MeshBvh(NamedTuple):
    """Packed BVHs of a library (layout documented in csrc/common/bvh.h)."""

    tris: torch.Tensor  # (F, 3, 3) triangles in BVH leaf order, mesh frame
    tri_ids: torch.Tensor  # (F,) int32 mesh-local face id of each row
    nodes: torch.Tensor  # (N, 16) int32 64-byte node records: float32 box bits (15), link
    dipoles: torch.Tensor  # (N, 7) area vector, centre, radius (fast winding numbers)
    node_offsets: torch.Tensor  # (M + 1,) int64
    face_offsets: torch.Tensor  # (M + 1,) int64

    @property
    def obbs(self) -> torch.Tensor:
        """(N, 5, 3) float32 view of the node boxes: 3 unit axes (rows), centre, half extents."""
        return self.nodes.view(torch.float32)[:, :15].reshape(-1, 5, 3)

    @property
    def links(self) -> torch.Tensor:
        """(N,) int32: an internal node's right child (its left child is the next row), or for a
        leaf -1 - (first_tri << LEAF_COUNT_BITS | (tri_count - 1))."""
        return self.nodes[:, 15]

    def leaf_range(self, link: int) -> tuple[int, int]:
        """(first, count) mesh-local leaf-order triangle rows of a leaf's link (< 0)."""
        code = -1 - int(link)
        return code >> LEAF_COUNT_BITS, (code & ((1 << LEAF_COUNT_BITS) - 1)) + 1


class MeshLibrary:
    """Many meshes packed in a few tensors on one device, addressed by id 0 .. M-1.

    vertices (V, 3) and faces (F, 3) (mesh-local indices) concatenated; mesh m owns vertex rows
    vertex_offsets[m] .. vertex_offsets[m+1) and face rows face_offsets[m] .. face_offsets[m+1).
    `bvh` (built in C++ on first use, cached, moved along by `to`) accelerates the mesh queries
    in `contactnet.ops`. Queries use the library's dtype (float32 by default).
    """

    def __init__(self, meshes: Iterable[Mesh], dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu"):  # fmt: skip
        meshes = list(meshes)
        if not meshes:
            raise ValueError("MeshLibrary: expected at least one mesh")
        for i, m in enumerate(meshes):
            if not isinstance(m, Mesh):
                raise TypeError(f"MeshLibrary: item {i} is {type(m).__name__}, expected Mesh")
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"MeshLibrary: dtype must be float32 or float64, got {dtype}")
        self.names = [m.name for m in meshes]
        vcount = torch.tensor([0] + [m.num_vertices for m in meshes])
        fcount = torch.tensor([0] + [m.num_faces for m in meshes])
        self._vertices64 = torch.cat([m.vertices for m in meshes])
        self.vertex_offsets = torch.cumsum(vcount, 0).to(device)
        self.face_offsets = torch.cumsum(fcount, 0).to(device)
        self.faces = torch.cat([m.faces for m in meshes]).to(device)
        self.vertices = self._vertices64.to(dtype=dtype, device=device)
        self._bvh: MeshBvh | None = None
        self._hulls: ConvexHulls | None = None

    @classmethod
    def from_files(cls, paths: Sequence, **kwargs) -> MeshLibrary:
        return cls([Mesh.from_file(p) for p in paths], **kwargs)

    @property
    def device(self) -> torch.device:
        return self.vertices.device

    @property
    def dtype(self) -> torch.dtype:
        return self.vertices.dtype

    def __len__(self) -> int:
        return len(self.names)

    def num_faces(self, i: int) -> int:
        return int(self.face_offsets[i + 1] - self.face_offsets[i])

    def __getitem__(self, i: int) -> Mesh:
        if not -len(self) <= i < len(self):
            raise IndexError(f"mesh id {i} out of range for a library of {len(self)}")
        i = i % len(self)
        v0, v1 = (int(x) for x in self.vertex_offsets[i : i + 2])
        f0, f1 = (int(x) for x in self.face_offsets[i : i + 2])
        return Mesh(self._vertices64[v0:v1], self.faces[f0:f1].cpu(), name=self.names[i])

    @property
    def bvh(self) -> MeshBvh:
        """The library's BVHs (built on the CPU in the library dtype on first use, then cached)."""
        if self._bvh is None:
            from contactnet._extension import load_extension

            load_extension()
            out = torch.ops.contactnet.build_mesh_bvh(
                self._vertices64.to(self.dtype).contiguous(),
                self.faces.cpu().contiguous(),
                self.vertex_offsets.cpu().contiguous(),
                self.face_offsets.cpu().contiguous(),
            )
            bvh = MeshBvh(*out, self.face_offsets.cpu())
            self._bvh = MeshBvh(*(t.to(self.device) for t in bvh))
        return self._bvh

    @property
    def hulls(self) -> ConvexHulls:
        """The meshes' convex hulls (float64 whatever the library's dtype; built on the CPU on
        first use, then cached), for `contactnet.ops.mesh_query.hulls_separated`."""
        if self._hulls is None:
            counts = (self.vertex_offsets[1:] - self.vertex_offsets[:-1]).tolist()
            self._hulls = build_convex_hulls(self._vertices64.split(counts)).to(self.device)
        return self._hulls

    def to(self, device=None, dtype: torch.dtype | None = None) -> MeshLibrary:
        """Copy on another device and/or dtype; a built BVH moves along (rebuilt on a dtype
        change, since it is built in the library's dtype)."""
        out = MeshLibrary.__new__(MeshLibrary)
        device = self.device if device is None else torch.device(device)
        dtype = self.dtype if dtype is None else dtype
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"MeshLibrary.to: dtype must be float32 or float64, got {dtype}")
        out.names = list(self.names)
        out._vertices64 = self._vertices64
        out.vertex_offsets = self.vertex_offsets.to(device)
        out.face_offsets = self.face_offsets.to(device)
        out.faces = self.faces.to(device)
        out.vertices = self._vertices64.to(dtype=dtype, device=device)
        out._bvh = None
        if self._bvh is not None and dtype == self.dtype:
            out._bvh = MeshBvh(*(t.to(device) for t in self._bvh))
        out._hulls = None if self._hulls is None else self._hulls.to(device)
        return out

    def memory_bytes(self) -> int:
        """Bytes held by the packed mesh tensors and (if built) the BVH."""
        ts = [self.vertices, self.faces, self.vertex_offsets, self.face_offsets]
        if self._bvh is not None:
            ts += list(self._bvh)
        if self._hulls is not None:
            ts += list(self._hulls)
        return sum(t.numel() * t.element_size() for t in ts)

    def __repr__(self) -> str:
        return (f"MeshLibrary({len(self)} meshes, {self.faces.shape[0]} faces, "
                f"{self.dtype}, {self.device})")  # fmt: skip
