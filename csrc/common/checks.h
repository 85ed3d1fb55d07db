// Loud, copy-free argument checks for op entry points (host code, both devices), the C++ half of
// contactnet/ops/_checks.py, under the same policy:
//   - metadata (dims, sizes, dtype, device, contiguity) is checked at every entry;
//   - tensor values (index ranges, padding rows, finite poses, ...) only where reading them costs
//     no sync: on the CPU (`values_checked_in_cpp`), in the pass over the data. On a GPU the
//     Python wrappers check them before the launch (skipped under CUDA graph capture), and a
//     direct torch.ops call is trusted.
// Value checks raise ValueError in Python (TORCH_CHECK_VALUE), as the wrappers' own checks do.
#pragma once

#include <cmath>
#include <initializer_list>

#include <ATen/core/Tensor.h>
#include <ATen/ops/aminmax.h>
#include <c10/util/Exception.h>

namespace contactnet {

// Set while the caller vouches for every index it passes (`contactnet.ops.ipc.trusted_inputs()`:
// a stepper's Newton loop over tensors it built), per thread: the CPU value passes are skipped
// too (a fused op's inner ops each checked the faces and edges again).
inline thread_local bool values_trusted = false;

// Whether the C++ entry checks the values of `t` (see the policy above).
inline bool values_checked_in_cpp(const at::Tensor& t) { return t.is_cpu() && !values_trusted; }

// `shape` lists the expected sizes; -1 accepts any size in that dimension.
inline void check_input(const at::Tensor& t, const char* name, std::initializer_list<int64_t> shape) {
  TORCH_CHECK(t.dim() == static_cast<int64_t>(shape.size()), name, ": expected ", shape.size(),
              " dimensions, got shape ", t.sizes());
  int64_t d = 0;
  for (int64_t s : shape) {
    TORCH_CHECK(s < 0 || t.size(d) == s, name, ": expected size ", s, " in dimension ", d,
                ", got shape ", t.sizes());
    ++d;
  }
  TORCH_CHECK(t.is_contiguous(), name, ": expected a contiguous tensor");
}

inline void check_float_input(const at::Tensor& t, const char* name,
                              std::initializer_list<int64_t> shape) {
  check_input(t, name, shape);
  TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble, name,
              ": expected float32 or float64, got ", t.scalar_type());
}

inline void check_bool_input(const at::Tensor& t, const char* name,
                             std::initializer_list<int64_t> shape) {
  check_input(t, name, shape);
  TORCH_CHECK(t.scalar_type() == at::kBool, name, ": expected bool, got ", t.scalar_type());
}

// int64 indices of `shape`, in [0, bound) where values are checked here.
inline void check_index_input(const at::Tensor& t, const char* name,
                              std::initializer_list<int64_t> shape, int64_t bound) {
  check_input(t, name, shape);
  TORCH_CHECK(t.scalar_type() == at::kLong, name, ": expected int64, got ", t.scalar_type());
  if (t.numel() > 0 && values_checked_in_cpp(t)) {
    // Small tensors (the stepper checks ~60 a step) in a loop without dispatch; large ones with
    // ATen's vectorised one-pass kernel.
    bool ok = true;
    if (t.numel() <= 4096) {
      const int64_t* p = t.data_ptr<int64_t>();
      for (int64_t i = 0, n = t.numel(); i < n; ++i) ok &= (p[i] >= 0) & (p[i] < bound);
    } else {
      const auto [lo, hi] = at::aminmax(t);
      ok = lo.item<int64_t>() >= 0 && hi.item<int64_t>() < bound;
    }
    TORCH_CHECK_VALUE(ok, name, ": indices must lie in [0, ", bound, ")");
  }
}

// Rows of an (N, 2) int64 pair list: column c in [0, bound_c), or the whole row -1 (padding of a
// fixed-capacity list). Same rule and messages as check_pair_values in ops/_checks.py.
inline void check_pair_rows(const at::Tensor& pairs, const char* name, int64_t bound0,
                            int64_t bound1) {
  check_input(pairs, name, {-1, 2});
  TORCH_CHECK(pairs.scalar_type() == at::kLong, name, ": expected int64, got ",
              pairs.scalar_type());
  if (!values_checked_in_cpp(pairs)) return;
  const int64_t* p = pairs.data_ptr<int64_t>();
  const int64_t n = pairs.size(0);
  for (int64_t i = 0; i < n; ++i)
    TORCH_CHECK_VALUE((p[2 * i] == -1) == (p[2 * i + 1] == -1), name,
                      ": a padding row must be -1 in every column (row ", i, ")");
  const int64_t bounds[2] = {bound0, bound1};
  for (int c = 0; c < 2; ++c)
    for (int64_t i = 0; i < n; ++i)
      TORCH_CHECK_VALUE(p[2 * i + c] >= -1 && p[2 * i + c] < bounds[c], name, ": column ", c,
                        " must lie in [0, ", bounds[c], ") (or the row be -1 padding), got ",
                        p[2 * i + c], " in row ", i);
}

inline void check_same_device(const at::Tensor& a, const char* name_a, const at::Tensor& b,
                              const char* name_b) {
  TORCH_CHECK(a.device() == b.device(), name_a, " and ", name_b, " must be on the same device, got ",
              a.device(), " and ", b.device());
}

inline void check_same_device_dtype(const at::Tensor& a, const char* name_a, const at::Tensor& b,
                                    const char* name_b) {
  check_same_device(a, name_a, b, name_b);
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), name_a, " and ", name_b,
              " must have the same dtype, got ", a.scalar_type(), " and ", b.scalar_type());
}

inline void check_same_batch(const at::Tensor& a, const char* name_a, const at::Tensor& b,
                             const char* name_b) {
  TORCH_CHECK(a.size(0) == b.size(0), name_a, " and ", name_b,
              " must have the same batch size, got ", a.size(0), " and ", b.size(0));
}

// Values of (Q, 7) poses [x, y, z, qw, qx, qy, qz] (CPU, policy above): finite, with a non-zero
// quaternion (the kernels normalise it).
template <typename T>
void check_query_poses(const at::Tensor& poses, const char* name) {
  const T* p = poses.data_ptr<T>();
  for (int64_t q = 0, n = poses.size(0); q < n; ++q, p += 7) {
    bool finite = true;
    for (int k = 0; k < 7; ++k) finite = finite && std::isfinite(p[k]);
    TORCH_CHECK_VALUE(finite, name, ": contains NaN or Inf (query ", q, ")");
    TORCH_CHECK_VALUE(p[3] != T(0) || p[4] != T(0) || p[5] != T(0) || p[6] != T(0), name,
                      ": contains a zero quaternion (query ", q, ")");
  }
}

}  // namespace contactnet
