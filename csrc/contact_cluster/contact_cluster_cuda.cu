#include <torch/library.h>

#include "common/launch_cuda.cuh"
#include "contact_cluster/contact_cluster.h"

namespace contactnet {
namespace {

// One thread per query: clustering is a small serial task per query.
ClusterOut cluster_contacts_cuda(const at::Tensor& points, const at::Tensor& normals,
                                 const at::Tensor& depths, const at::Tensor& offsets,
                                 int64_t max_contacts, double normal_weight, double depth_weight,
                                 int64_t hierarchical_max, int64_t kmeans_sample) {
  return cluster_contacts_impl(points, normals, depths, offsets, max_contacts, normal_weight,
                               depth_weight, hierarchical_max, kmeans_sample, CudaLauncher{});
}

}  // namespace

TORCH_LIBRARY_IMPL(contactnet, CUDA, m) { m.impl("cluster_contacts", &cluster_contacts_cuda); }

}  // namespace contactnet
