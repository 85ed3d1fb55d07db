// Containment by dipole winding numbers (algorithm: dipole_winding_kernels.h).
//
// contactnet::dipoles_enclose(Tensor dipoles, Tensor ids, Tensor probes, float inside)
//     dipoles (N, S, 7): each object's cloud dipoles (contactnet.geometry.winding.surface_dipoles)
//     ids (Q,) int64 in [0, N); probes (Q, P, 3) in object ids[q]'s frame; one float dtype, one device
//  -> (Q,) bool: every probe of the query has a winding number >= inside (true when P = 0)
#pragma once

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "common/checks.h"
#include "dipole_winding/dipole_winding_kernels.h"

namespace contactnet {

template <typename Launch>
at::Tensor dipoles_enclose_impl(const at::Tensor& dipoles, const at::Tensor& ids, const at::Tensor& probes,
                                double inside, const Launch& launch) {
  check_float_input(dipoles, "dipoles", {-1, -1, 7});
  check_index_input(ids, "ids", {-1}, dipoles.size(0));
  check_float_input(probes, "probes", {ids.size(0), -1, 3});
  check_same_device_dtype(probes, "probes", dipoles, "dipoles");
  check_same_device(ids, "ids", dipoles, "dipoles");
  at::Tensor out = at::empty({ids.size(0)}, dipoles.options().dtype(at::kBool));
  AT_DISPATCH_FLOATING_TYPES(dipoles.scalar_type(), "dipoles_enclose", [&] {
    launch(dipoles, ids.size(0),
           DipolesEncloseFunctor<scalar_t>{dipoles.data_ptr<scalar_t>(), ids.data_ptr<int64_t>(),
                                           probes.data_ptr<scalar_t>(), dipoles.size(1), probes.size(1),
                                           static_cast<scalar_t>(inside), out.data_ptr<bool>()});
  });
  return out;
}

}  // namespace contactnet
