"""Non-learned collision checkers that LOCC is measured against (LOCC §IV, Fig. 6): UCF-GJK on
CoACD convex pieces and IS-CD with exact winding-number occupancy, batched with fixed shapes in
plain torch (CPU or CUDA), and PieceGjk, the same pieces checked the way a CPU library does
(culled piece pairs, early-exit C++ GJK). Each is a callable `(ids_a, ids_b, poses_a, poses_b) ->
(Q,) bool` over an object set. CoACD is optional: `pip install 'contactnet[baselines]'`."""

from contactnet.baselines.convex_pieces import (
    ConvexPieces,
    DecompositionSpec,
    cached_decompose,
    decompose,
    object_set_pieces,
    pad_pieces,
)
from contactnet.baselines.gjk import gjk_intersect, gjk_piece_pairs
from contactnet.baselines.is_cd import ImplicitSurfaceCD, pad_triangles, winding_numbers
from contactnet.baselines.piece_gjk import PieceGjk
from contactnet.baselines.ucf_gjk import UcfGjk

__all__ = [
    "ConvexPieces",
    "DecompositionSpec",
    "ImplicitSurfaceCD",
    "PieceGjk",
    "UcfGjk",
    "cached_decompose",
    "decompose",
    "gjk_intersect",
    "gjk_piece_pairs",
    "object_set_pieces",
    "pad_pieces",
    "pad_triangles",
    "winding_numbers",
]
