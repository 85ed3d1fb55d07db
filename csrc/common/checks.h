// Loud, copy-free argument checks for op entry points (host code, both devices). The Python
// wrappers raise ValueError/TypeError first; these guard direct torch.ops.contactnet calls.
#pragma once

#include <initializer_list>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

namespace contactnet {

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

inline void check_same_device_dtype(const at::Tensor& a, const char* name_a, const at::Tensor& b,
                                    const char* name_b) {
  TORCH_CHECK(a.device() == b.device(), name_a, " and ", name_b, " must be on the same device, got ",
              a.device(), " and ", b.device());
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), name_a, " and ", name_b,
              " must have the same dtype, got ", a.scalar_type(), " and ", b.scalar_type());
}

inline void check_same_batch(const at::Tensor& a, const char* name_a, const at::Tensor& b,
                             const char* name_b) {
  TORCH_CHECK(a.size(0) == b.size(0), name_a, " and ", name_b,
              " must have the same batch size, got ", a.size(0), " and ", b.size(0));
}

}  // namespace contactnet
