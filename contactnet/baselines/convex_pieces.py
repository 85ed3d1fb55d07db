"""Convex decompositions of objects with CoACD (pip `coacd`, the `baselines` extra), cached on disk
and padded to fixed (pieces, vertices) shapes for UCF-GJK.

A decomposition is slow (seconds to minutes per object), so each is written once, atomically, to
`<cache_dir>/<mesh hash>-<params hash>.npz`: the key covers the mesh's vertices and faces and every
parameter (and the coacd version), so changing a threshold or cap makes new files and never reads a
stale one, while reruns and other experiments on the same meshes reuse them.
"""

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from contactnet.data.storage import save_npz_atomic


@dataclass(frozen=True)
class DecompositionSpec:
    threshold: float = 0.1  # CoACD concavity threshold (smaller: more, tighter pieces)
    max_pieces: int = 16  # cap on pieces per object (CoACD's max_convex_hull)
    max_piece_vertices: int = 32  # cap on vertices per piece (CoACD decimates hulls to it)
    # CoACD search effort: these values cost ~4 s per object of ~4k faces on one core (the
    # library defaults take ~80 s for about the same pieces).
    resolution: int = 500
    mcts_iterations: int = 20
    mcts_nodes: int = 8
    mcts_max_depth: int = 2
    preprocess: str = "auto"  # CoACD preprocess_mode: manifold repair of non-watertight inputs
    seed: int = 0

    def __post_init__(self):
        if not self.threshold > 0:
            raise ValueError(f"threshold: expected > 0, got {self.threshold}")
        if self.max_pieces < 1 or self.max_piece_vertices < 4:
            raise ValueError(f"max_pieces, max_piece_vertices: expected >= 1 and >= 4, got "
                             f"{self.max_pieces}, {self.max_piece_vertices}")

    def key(self) -> str:
        payload = json.dumps({**asdict(self), "coacd": _coacd_version()}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _coacd():
    try:
        import coacd
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("UCF-GJK needs CoACD: pip install 'contactnet[baselines]' (pip `coacd`)") from error
    return coacd


def _coacd_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    _coacd()
    try:
        return version("coacd")
    except PackageNotFoundError:  # pragma: no cover - a source build without metadata
        return "unknown"


def mesh_hash(vertices: np.ndarray, faces: np.ndarray) -> str:
    h = hashlib.sha256(np.ascontiguousarray(vertices, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(faces, dtype=np.int64).tobytes())
    return h.hexdigest()[:24]


def _cap_vertices(points: np.ndarray, cap: int) -> np.ndarray:
    """A piece's hull vertices, farthest-point thinned to at most `cap` (CoACD's decimation
    usually meets the cap already; thinning shrinks the hull slightly where it does not)."""
    if len(points) > cap:
        chosen = [int(np.argmax(np.linalg.norm(points - points.mean(0), axis=1)))]
        dist = np.linalg.norm(points - points[chosen[0]], axis=1)
        for _ in range(cap - 1):
            chosen.append(int(np.argmax(dist)))
            dist = np.minimum(dist, np.linalg.norm(points - points[chosen[-1]], axis=1))
        points = points[chosen]
    return points


def decompose(vertices: np.ndarray, faces: np.ndarray, spec: DecompositionSpec) -> list[np.ndarray]:
    """CoACD pieces of one mesh: a list of (Vi, 3) float64 vertex arrays, Vi <= spec.max_piece_vertices."""
    coacd = _coacd()
    coacd.set_log_level("error")
    parts = coacd.run_coacd(coacd.Mesh(np.asarray(vertices, np.float64), np.asarray(faces, np.int64)),
                            threshold=spec.threshold, max_convex_hull=spec.max_pieces, decimate=True,
                            max_ch_vertex=spec.max_piece_vertices, preprocess_mode=spec.preprocess,
                            resolution=spec.resolution, mcts_iterations=spec.mcts_iterations,
                            mcts_nodes=spec.mcts_nodes, mcts_max_depth=spec.mcts_max_depth, seed=spec.seed)
    return [_cap_vertices(np.asarray(v, np.float64), spec.max_piece_vertices) for v, _ in parts][: spec.max_pieces]


def cached_decompose(vertices: np.ndarray, faces: np.ndarray, spec: DecompositionSpec,
                     cache_dir: str | Path) -> list[np.ndarray]:
    """`decompose`, read from (or written atomically to) `cache_dir` keyed by mesh and spec."""
    path = Path(cache_dir) / f"{mesh_hash(vertices, faces)}-{spec.key()}.npz"
    if path.exists():
        with np.load(path) as cached:
            return [cached[f"piece_{i}"] for i in range(int(cached["count"]))]
    pieces = decompose(vertices, faces, spec)
    save_npz_atomic(path, count=np.int64(len(pieces)), **{f"piece_{i}": p for i, p in enumerate(pieces)})
    return pieces


@dataclass
class ConvexPieces:
    """Every object's pieces in one padded tensor: vertices (N, P, V, 3), object frame, metres.
    Missing pieces repeat piece 0 and missing vertices repeat vertex 0, which changes neither a
    support point nor an "any piece pair collides" answer. counts (N,) the real piece counts."""

    vertices: torch.Tensor
    counts: torch.Tensor

    def to(self, device=None, dtype=None) -> "ConvexPieces":
        return ConvexPieces(self.vertices.to(device=device, dtype=dtype), self.counts.to(device))

    def scaled(self, factor: float) -> "ConvexPieces":
        return ConvexPieces(self.vertices * factor, self.counts)


def pad_pieces(pieces_per_object: list[list[np.ndarray]], dtype=torch.float32) -> ConvexPieces:
    """Pad each object's list of (Vi, 3) pieces to the largest piece count and vertex count."""
    if not pieces_per_object or any(len(p) == 0 for p in pieces_per_object):
        raise ValueError("pieces_per_object: expected at least one piece for every object")
    p_max = max(len(p) for p in pieces_per_object)
    v_max = max(len(v) for p in pieces_per_object for v in p)
    out = np.empty((len(pieces_per_object), p_max, v_max, 3))
    for i, pieces in enumerate(pieces_per_object):
        for j in range(p_max):
            piece = pieces[j if j < len(pieces) else 0]
            out[i, j, : len(piece)] = piece
            out[i, j, len(piece):] = piece[0]
    counts = torch.tensor([len(p) for p in pieces_per_object])
    return ConvexPieces(torch.as_tensor(out, dtype=dtype), counts)


def object_set_pieces(vertices: list[np.ndarray], faces: list[np.ndarray], spec: DecompositionSpec,
                      cache_dir: str | Path, progress: bool = True, dtype=torch.float32,
                      workers: int = 1) -> ConvexPieces:
    """The padded pieces of many meshes (an object set's `vertices` / `faces` lists), cached.
    workers > 1 decomposes the missing ones in that many processes (each entry is its own file,
    written atomically, so they never clash)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from tqdm import tqdm

    _coacd()  # fail before the loop, naming the extra
    if len(vertices) == 0 or len(vertices) != len(faces):
        raise ValueError(f"vertices, faces: expected equally long, non-empty lists, got {len(vertices)}, {len(faces)}")
    if int(workers) < 1:
        raise ValueError(f"workers: expected >= 1, got {workers}")
    jobs = list(zip(vertices, faces))
    bar = dict(total=len(jobs), desc=f"CoACD t={spec.threshold} <= {spec.max_pieces} pieces", disable=not progress)
    if workers == 1 or len(jobs) == 1:
        pieces = [cached_decompose(v, f, spec, cache_dir) for v, f in tqdm(jobs, **bar)]
    else:
        # Spawned, not forked: a fork copies locks that torch's or OpenMP's threads may hold, and the
        # child waits on them forever (seen as a hung test run).
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(int(workers), len(jobs)), mp_context=spawn) as pool:
            pieces = list(tqdm(pool.map(cached_decompose, *zip(*jobs), [spec] * len(jobs), [cache_dir] * len(jobs)), **bar))
    return pad_pieces(pieces, dtype)
