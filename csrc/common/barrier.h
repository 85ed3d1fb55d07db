// The IPC log barrier and its derivatives (shared by both devices).
//
//   b(x, x̂) = -(x - x̂)² ln(x / x̂)   for 0 < x < x̂,   0 for x ≥ x̂
//
// contactnet, like IPC Toolkit's BarrierPotential, applies it to SQUARED distances: x = d², x̂ = d̂²
// (the derivatives below are with respect to x = d²). x ≤ 0 (touching or penetrating) gives
// b = +inf, b' = -inf, b'' = +inf: an infinitely repulsive barrier.
#pragma once

#include <cmath>
#include <limits>

#include "macros.h"

namespace contactnet {

template <typename T>
CN_HD T inf_value() {
  return std::numeric_limits<T>::infinity();
}

template <typename T>
CN_HD T barrier(T x, T xhat) {
  if (!(x > T(0))) return inf_value<T>();
  if (x >= xhat) return T(0);
  const T dx = x - xhat;
  return -dx * dx * std::log(x / xhat);  // -(x - x̂)² ln(x / x̂)
}

template <typename T>
CN_HD T barrier_first_derivative(T x, T xhat) {
  if (!(x > T(0))) return -inf_value<T>();
  if (x >= xhat) return T(0);
  const T dx = x - xhat;
  return -T(2) * dx * std::log(x / xhat) - dx * dx / x;  // b' = -2(x - x̂) ln(x/x̂) - (x - x̂)²/x
}

template <typename T>
CN_HD T barrier_second_derivative(T x, T xhat) {
  if (!(x > T(0))) return inf_value<T>();
  if (x >= xhat) return T(0);
  const T dx = x - xhat;
  const T r = dx / x;
  return -T(2) * std::log(x / xhat) - T(4) * r + r * r;  // b'' = -2 ln(x/x̂) - 4(x - x̂)/x + (x - x̂)²/x²
}

}  // namespace contactnet
