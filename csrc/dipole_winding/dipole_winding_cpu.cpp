#include <torch/library.h>

#include "common/launch_cpu.h"
#include "dipole_winding/dipole_winding.h"

namespace contactnet {
namespace {

// A query costs one probe's S dipoles (about a microsecond) to all P of them: tasks of 16.
constexpr CpuLauncher kEncloseLaunch{16};

at::Tensor dipoles_enclose_cpu(const at::Tensor& dipoles, const at::Tensor& ids, const at::Tensor& probes,
                               double inside) {
  return dipoles_enclose_impl(dipoles, ids, probes, inside, kEncloseLaunch);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def("dipoles_enclose(Tensor dipoles, Tensor ids, Tensor probes, float inside) -> Tensor");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) { m.impl("dipoles_enclose", &dipoles_enclose_cpu); }

}  // namespace contactnet
