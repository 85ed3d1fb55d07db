"""IPC barrier kernels: squared distances with derivatives (`distances`), collision candidates
(`candidates`: grid and fixed-capacity searches, and the body-level search of affine bodies), the
log barrier, the barrier and friction potentials with gradients, (PSD-projected) Hessians and
their assembly (`potentials`), conservative CCD (`ccd`), and the fused chain rule from contact stencils to affine body pairs
(`body_derivatives`, the stepper's), and the stepper's whole incremental potential of affine bodies
with its derivatives in one op each (`affine_potential`), its batched Newton solves (`cholesky`) and its Newton loop's per-environment bookkeeping (`newton`). C++ on CPU, CUDA on GPU, float32 or float64. Every public
name is importable from this package. (The dense torch chain rule to rigid / affine body DOFs, the
tests' reference, is `contactnet.sim.reference`.)

Conventions (the same as IPC Toolkit 1.6.1, against which the tests compare):

- "Distance" in this module means the SQUARED Euclidean distance d². ``dhat`` arguments are the
  unsquared activation distance d̂ in metres.
- Barrier: b(x, x̂) = -(x - x̂)² ln(x / x̂) for 0 < x < x̂, else 0, applied to x = d², x̂ = d̂²
  (IPC Toolkit's ``barrier(d², d̂²)``, ``BarrierPotential(dhat, stiffness)``). x ≤ 0 (touching or
  penetrating) gives b = +inf, b' = -inf, b'' = +inf: the configuration is infeasible.
- Potential: B(x) = κ Σ_k m_k(x) b(d_k²(x), d̂²) over candidates k, with m_k the edge–edge
  mollifier (1 for face–vertex candidates). κ multiplies the energy, gradient and Hessian.
- Stencils: a face–vertex candidate (vertex, face) acts on (p, t0, t1, t2); an edge–edge
  candidate (edge_a, edge_b) on (ea0, ea1, eb0, eb1). Per-candidate gradients are (N, 12) and
  Hessians (N, 12, 12) on those 4 vertices × 3 coordinates; face–vertex candidates come first.
- Padding: a candidate row of -1 (from the fixed-capacity `*_candidates_padded` searches, which
  never read back to the host) contributes 0 to every potential, gradient and Hessian and has no
  impact (tmax) in CCD; `candidate_stencils` gives it the last face's / edge's vertices, which
  receive those zeros harmlessly.
- Assembled derivatives use DOF 3·v + c (vertex-major, the flattening of a (V, 3) tensor); the
  assembled Hessian is a coalesced sparse COO tensor of shape (3V, 3V).
- Index tensors (faces, edges, vertex_body, candidates) of any integer dtype or layout are
  accepted: converted once to contiguous int64 (no copy when they already are). Argument checks
  follow the policy of `contactnet.ops._checks` (index values: C++ on the CPU, Python on a GPU,
  skipped under CUDA graph capture and inside `trusted_indices()`; inside `trusted_inputs()`, for
  hot loops over tensors contactnet built, nothing is checked, in Python or C++).
"""

from contactnet.ops._checks import trusted_indices, trusted_inputs
from contactnet.ops.ipc.affine_potential import (
    affine_contact_forces,
    affine_positions,
    affine_potential,
    affine_potential_derivatives,
    contact_statistics,
)
from contactnet.ops.ipc.body_derivatives import BodyPairDerivatives, body_pair_derivatives, body_pair_derivatives_sum
from contactnet.ops.ipc.candidates import (
    BodySearch,
    BodyTrees,
    BoundedCandidates,
    Candidates,
    PaddedCandidates,
    body_candidates,
    body_candidates_padded,
    body_trees,
    candidate_extents,
    candidate_stencils,
    collision_candidates,
    collision_candidates_padded,
    mesh_edges,
    prune_candidates,
    prune_candidates_padded,
    swept_candidates,
    swept_candidates_padded,
)
from contactnet.ops.ipc.ccd import ccd_time_of_impact, collision_free_step, collision_free_steps
from contactnet.ops.ipc.cholesky import cholesky_solve
from contactnet.ops.ipc.newton import line_search_accept, newton_check, relative_displacement_bound
from contactnet.ops.ipc.distances import (
    edge_edge_distance_squared,
    edge_edge_distance_squared_gradient,
    edge_edge_distance_squared_hessian,
    edge_edge_mollifier,
    edge_edge_mollifier_gradient,
    edge_edge_mollifier_hessian,
    edge_edge_mollifier_threshold,
    point_edge_distance_squared,
    point_edge_distance_squared_gradient,
    point_edge_distance_squared_hessian,
    point_point_distance_squared,
    point_point_distance_squared_gradient,
    point_point_distance_squared_hessian,
    point_triangle_distance_squared,
    point_triangle_distance_squared_gradient,
    point_triangle_distance_squared_hessian,
)
from contactnet.ops.ipc.potentials import (
    BarrierHessian,
    BarrierValues,
    assemble_hessian,
    barrier,
    barrier_potential,
    barrier_potential_gradient,
    barrier_potential_hessian,
    friction_potential,
    friction_potential_gradient,
    friction_potential_hessian,
)

__all__ = [
    "BarrierHessian",
    "BarrierValues",
    "BodyPairDerivatives",
    "BodySearch",
    "BodyTrees",
    "BoundedCandidates",
    "Candidates",
    "PaddedCandidates",
    "affine_contact_forces",
    "affine_positions",
    "affine_potential",
    "affine_potential_derivatives",
    "assemble_hessian",
    "barrier",
    "barrier_potential",
    "barrier_potential_gradient",
    "barrier_potential_hessian",
    "body_candidates",
    "body_candidates_padded",
    "body_pair_derivatives",
    "body_pair_derivatives_sum",
    "body_trees",
    "candidate_extents",
    "candidate_stencils",
    "ccd_time_of_impact",
    "cholesky_solve",
    "collision_candidates",
    "collision_candidates_padded",
    "collision_free_step",
    "collision_free_steps",
    "contact_statistics",
    "edge_edge_distance_squared",
    "edge_edge_distance_squared_gradient",
    "edge_edge_distance_squared_hessian",
    "edge_edge_mollifier",
    "edge_edge_mollifier_gradient",
    "edge_edge_mollifier_hessian",
    "edge_edge_mollifier_threshold",
    "friction_potential",
    "friction_potential_gradient",
    "friction_potential_hessian",
    "line_search_accept",
    "mesh_edges",
    "newton_check",
    "point_edge_distance_squared",
    "point_edge_distance_squared_gradient",
    "point_edge_distance_squared_hessian",
    "point_point_distance_squared",
    "point_point_distance_squared_gradient",
    "point_point_distance_squared_hessian",
    "point_triangle_distance_squared",
    "point_triangle_distance_squared_gradient",
    "point_triangle_distance_squared_hessian",
    "prune_candidates",
    "prune_candidates_padded",
    "relative_displacement_bound",
    "swept_candidates",
    "swept_candidates_padded",
    "trusted_indices",
    "trusted_inputs",
]
