// Whether all of a query's probe points lie inside an object, by the winding number of its cloud's
// surface dipoles (contactnet.geometry.winding.dipole_winding): the CPU loop body and the CUDA
// thread body. A query stops at its first probe outside (winding < 1/2), so a pair that is not
// contained, nearly every pair, costs one probe's S dipoles instead of all of them.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/macros.h"

namespace contactnet {

template <typename T>
struct DipolesEncloseFunctor {
  const T* dipoles;     // (N, S, 7) per dipole: point, area-weighted normal, softening length²
  const int64_t* ids;   // (Q,) the object of each query
  const T* probes;      // (Q, P, 3) in that object's frame
  int64_t s, p;         // S, P
  T inside;             // a probe is inside from this winding number on
  bool* out;            // (Q,)

  // The winding number at probe x, summed dipole by dipole as dipole_winding's formula reads:
  // (d · a n) / (|d|² + soften)^(3/2) / (4π), d = dipole point − x.
  CN_HD T winding(const T* dip, const T* x) const {
    T sum = T(0);
    for (int64_t i = 0; i < s; ++i, dip += 7) {
      const T d0 = dip[0] - x[0], d1 = dip[1] - x[1], d2 = dip[2] - x[2];
      const T r2 = d0 * d0 + d1 * d1 + d2 * d2 + dip[6];
      const T inv = T(1) / sqrt(r2);
      sum += (d0 * dip[3] + d1 * dip[4] + d2 * dip[5]) * (inv * inv * inv);
    }
    return sum / T(12.566370614359172953850573533118011537);
  }

  CN_HD void operator()(int64_t q) const {
    const T* dip = dipoles + 7 * s * ids[q];
    bool all = true;
    for (int64_t j = 0; j < p && all; ++j) all = winding(dip, probes + 3 * (q * p + j)) >= inside;
    out[q] = all;
  }
};

}  // namespace contactnet
