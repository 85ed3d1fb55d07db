// Contact clustering to at most k contacts per query (algorithm: contact_cluster_kernels.h).
//
// contactnet::cluster_contacts(Tensor points, Tensor normals, Tensor depths, Tensor offsets,
//                              int max_contacts, float normal_weight, float depth_weight,
//                              int hierarchical_max, int kmeans_sample)
//     points (N, 3), normals (N, 3), depths (N,) float32/float64: packed contacts; query q owns
//     rows offsets[q] .. offsets[q+1) of offsets (Q + 1,) int64
//  -> points (Q, k, 3), normals (Q, k, 3), depths (Q, k): padded clusters (zeros past count)
//     source (Q, k) int64: row of each cluster's deepest member (-1 past count)
//     counts (Q,) int64: clusters of each query, min(k, its contacts) unless k-means empties one
//     Sets of at most hierarchical_max contacts are merged agglomeratively, larger ones by
//     k-means whose Lloyd iterations run on a stride sample of kmeans_sample (>= k) contacts.
#pragma once

#include <tuple>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "common/checks.h"
#include "contact_cluster/contact_cluster_kernels.h"

namespace contactnet {

using ClusterOut = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

template <typename Launch>
ClusterOut cluster_contacts_impl(const at::Tensor& points, const at::Tensor& normals,
                                 const at::Tensor& depths, const at::Tensor& offsets,
                                 int64_t max_contacts, double normal_weight, double depth_weight,
                                 int64_t hierarchical_max, int64_t kmeans_sample,
                                 const Launch& launch) {
  check_float_input(points, "points", {-1, 3});
  check_float_input(normals, "normals", {points.size(0), 3});
  check_float_input(depths, "depths", {points.size(0)});
  check_input(offsets, "offsets", {-1});
  check_same_device_dtype(points, "points", normals, "normals");
  check_same_device_dtype(points, "points", depths, "depths");
  TORCH_CHECK(offsets.scalar_type() == at::kLong && offsets.device() == points.device(),
              "offsets: expected int64 on the contacts' device");
  TORCH_CHECK(offsets.size(0) >= 1, "offsets: expected Q + 1 >= 1 entries");
  TORCH_CHECK(max_contacts >= 1, "max_contacts: expected >= 1, got ", max_contacts);
  TORCH_CHECK(max_contacts < (int64_t(1) << 31), "max_contacts: too large");
  TORCH_CHECK(kmeans_sample >= max_contacts, "kmeans_sample: expected >= max_contacts (",
              max_contacts, "), got ", kmeans_sample);
  const int64_t q = offsets.size(0) - 1, n = points.size(0), k = max_contacts;
  const auto opt = points.options();
  at::Tensor out_points = at::empty({q, k, 3}, opt), out_normals = at::empty({q, k, 3}, opt),
             out_depths = at::empty({q, k}, opt),
             out_source = at::empty({q, k}, opt.dtype(at::kLong)),
             out_counts = at::empty({q}, opt.dtype(at::kLong));
  at::Tensor sums = at::empty({n, 8}, opt), labels = at::empty({n}, opt.dtype(at::kInt)),
             mind = at::empty({n}, opt), lower = at::empty({n}, opt),
             centroids = at::empty({q * k, kCentreStride}, opt);
  AT_DISPATCH_FLOATING_TYPES(points.scalar_type(), "cluster_contacts", [&] {
    launch(points, q,
           ClusterFunctor<scalar_t>{
               points.data_ptr<scalar_t>(), normals.data_ptr<scalar_t>(),
               depths.data_ptr<scalar_t>(), offsets.data_ptr<int64_t>(), k,
               static_cast<scalar_t>(normal_weight), static_cast<scalar_t>(depth_weight),
               hierarchical_max, kmeans_sample, sums.data_ptr<scalar_t>(), labels.data_ptr<int32_t>(),
               mind.data_ptr<scalar_t>(), lower.data_ptr<scalar_t>(),
               centroids.data_ptr<scalar_t>(),
               out_points.data_ptr<scalar_t>(), out_normals.data_ptr<scalar_t>(),
               out_depths.data_ptr<scalar_t>(), out_source.data_ptr<int64_t>(),
               out_counts.data_ptr<int64_t>()});
  });
  return {out_points, out_normals, out_depths, out_source, out_counts};
}

}  // namespace contactnet
