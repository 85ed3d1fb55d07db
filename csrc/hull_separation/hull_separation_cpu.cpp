#include <torch/library.h>

#include "common/launch_cpu.h"
#include "hull_separation/hull_separation.h"

namespace contactnet {
namespace {

// A query is a few microseconds of GJK: tasks of 64 keep the scheduling cost small.
constexpr CpuLauncher kHullLaunch{64};

at::Tensor hulls_separated_cpu(CN_HULL_SEPARATION_ARGS) {
  return hulls_separated_impl(CN_HULL_SEPARATION_PASS, kHullLaunch);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def("hulls_separated(Tensor vertices, Tensor vertex_offsets, Tensor neighbours, "
        "Tensor neighbour_offsets, Tensor ids_a, Tensor ids_b, Tensor poses_a, Tensor poses_b, "
        "float min_gap, int max_iterations) -> Tensor");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) { m.impl("hulls_separated", &hulls_separated_cpu); }

}  // namespace contactnet
