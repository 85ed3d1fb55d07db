#include <torch/library.h>

#include "common/launch_cpu.h"
#include "contact_cluster/contact_cluster.h"

namespace contactnet {
namespace {

constexpr CpuLauncher kClusterLaunch{1};

ClusterOut cluster_contacts_cpu(const at::Tensor& points, const at::Tensor& normals,
                                const at::Tensor& depths, const at::Tensor& offsets,
                                int64_t max_contacts, double normal_weight, double depth_weight,
                                int64_t hierarchical_max, int64_t kmeans_sample) {
  return cluster_contacts_impl(points, normals, depths, offsets, max_contacts, normal_weight,
                               depth_weight, hierarchical_max, kmeans_sample, kClusterLaunch);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def(
      "cluster_contacts(Tensor points, Tensor normals, Tensor depths, Tensor offsets, "
      "int max_contacts, float normal_weight, float depth_weight, int hierarchical_max, "
      "int kmeans_sample) -> "
      "(Tensor points, Tensor normals, Tensor depths, Tensor source, Tensor counts)");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) { m.impl("cluster_contacts", &cluster_contacts_cpu); }

}  // namespace contactnet
