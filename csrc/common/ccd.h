// Conservative continuous collision detection for point–triangle and edge–edge pairs under linear
// displacements (shared by both devices).
//
// Additive CCD (ACCD; Li, Kaufman, Jiang, "Codimensional Incremental Potential Contact", 2021 §5):
// with the mean displacement removed, the distance between the primitives shrinks at most at rate
// l = |Δp| + max|Δt_i| (point–triangle) or max|Δa_i| + max|Δb_j| (edge–edge) per unit step, so
// advancing by s (d - ξ) / l keeps the distance above ξ. Repeating until the remaining gap falls
// below (1 - s) of the initial one gives a time of impact that is never later than the true one:
// every returned step is collision-free (distance > ξ) in exact arithmetic. Evaluated in double
// whatever the input precision, so rounding stays far below the (1 - s) safety margin.
//
// Here "distance" is Euclidean; the squared distances come from ipc_distance.h.
#pragma once

#include <cstdint>

#include "ipc_distance.h"

namespace contactnet {

struct CcdParams {
  double min_distance;            // ξ ≥ 0: the separation the step must keep
  double tmax;                    // only impacts in [0, tmax] are searched
  double conservative_rescaling;  // s in (0, 1]; IPC Toolkit's AdditiveCCD default is 0.9
  int64_t max_iterations;         // cap on ACCD iterations; on hitting it the (safe) toi so far is returned
};

// x: the 4 vertices at step 0 (p, t0, t1, t2 or ea0, ea1, eb0, eb1); dx: their displacements.
// Returns the time of impact in [0, tmax], or tmax when there is none before tmax.
CN_HD double additive_ccd(const Vec3<double> x0[4], const Vec3<double> dx0[4], bool edge_edge,
                          const CcdParams& prm) {
  Vec3<double> x[4], dx[4];
  const Vec3<double> mean = 0.25 * (dx0[0] + dx0[1] + dx0[2] + dx0[3]);
  for (int k = 0; k < 4; ++k) {
    x[k] = x0[k];
    dx[k] = dx0[k] - mean;  // distance is translation invariant: keep only the relative motion
  }
  auto max2 = [](double a, double b) { return a > b ? a : b; };
  const double n0 = norm(dx[0]), n1 = norm(dx[1]), n2 = norm(dx[2]), n3 = norm(dx[3]);
  const double max_disp = edge_edge ? max2(n0, n1) + max2(n2, n3) : n0 + max2(n1, max2(n2, n3));
  auto dist2 = [&](const Vec3<double>* v) {
    return edge_edge ? edge_edge_distance(v[0], v[1], v[2], v[3])
                     : point_triangle_distance(v[0], v[1], v[2], v[3]);
  };
  const double xi = prm.min_distance, xi2 = xi * xi, s = prm.conservative_rescaling;
  double d2 = dist2(x);
  double d = sqrt(d2);
  if (!(d > xi)) return 0.0;  // already closer than the minimum separation: no step is safe
  if (max_disp == 0.0) return prm.tmax;
  double d_func = d2 - xi2;                     // d² - ξ² = (d - ξ)(d + ξ)
  const double gap = (1.0 - s) * d_func / (d + xi);  // stop once d - ξ < (1 - s)(d₀ - ξ)
  double toi = 0.0;
  for (int64_t it = 0; it < prm.max_iterations; ++it) {
    const double step = s * d_func / ((d + xi) * max_disp);  // tₗ = s (d - ξ) / l
    for (int k = 0; k < 4; ++k) x[k] = x[k] + step * dx[k];
    d2 = dist2(x);
    d = sqrt(d2);
    d_func = d2 - xi2;
    if (!(d_func > 0.0) || (toi > 0.0 && d_func / (d + xi) < gap)) break;
    toi += step;
    if (toi > prm.tmax) return prm.tmax;
  }
  return toi;
}

}  // namespace contactnet
