// Batched mesh–mesh queries over a packed BVH library (layout: common/bvh.h). Q queries, query q
// = (mesh ids_a[q] at poses_a[q], mesh ids_b[q] at poses_b[q]). float32 or float64; one device.
//
// Every op starts with the library's BVH tensors (from contactnet::build_mesh_bvh):
//     tris (F, 3, 3) T, tri_ids (F,) int32, nodes (N, 16) int32 (BvhNode records),
//     dipoles (N, 7) T, node_offsets (M + 1,) int64, face_offsets (M + 1,) int64,
//     ids_a (Q,) int64, ids_b (Q,) int64, poses_a (Q, 7) T, poses_b (Q, 7) T
//     (poses [x, y, z, qw, qx, qy, qz] with unit quaternions; ids in [0, M))
//
// contactnet::mesh_distance(..., float upper_bound)
//  -> distance (Q,) T: minimum surface distance (0 when intersecting); upper_bound when no pair
//                      is closer than upper_bound (then tri ids are -1 and points NaN)
//     point_a (Q, 3), point_b (Q, 3) world closest points; tri_a (Q,), tri_b (Q,) int64 face ids
//
// contactnet::mesh_collide(..., float winding_threshold, float beta)
//  -> collide (Q,) bool: the surfaces intersect or touch, or a vertex of one mesh has generalised
//     winding number >= winding_threshold in the other (fast winding number, far-field beta)
//
// contactnet::blem_contacts_raw(..., Tensor r_a, Tensor r_b, bool compact)
//     r_a, r_b (Q,) T boundary layers
//  -> points (C, 3), normals (C, 3), depths (C,), distances (C,), points_a (C, 3),
//     points_b (C, 3), tri_a (C,) int64, tri_b (C,) int64, intersecting (C,) bool,
//     offsets (Q + 1,) int64: query q owns rows offsets[q] .. offsets[q+1), in traversal order.
//     One row per triangle pair with d(tA, tB) <= r_a + r_b (formulas in common/blem.h).
//     compact: only what clustering reads -- points, normals, depths, and in tri_a / tri_b the
//     pair's rows in its meshes' BVH leaf order (not face ids); distances, points_a, points_b
//     and intersecting have 0 rows. Less than half the bytes per contact.
//
// contactnet::blem_contact_rows(..., Tensor r_a, Tensor r_b, Tensor query, Tensor row_a,
//                               Tensor row_b)   query, row_a, row_b (M,) int64
//  -> the nine per-contact tensors above for M rows (full), row i the contact of leaf rows
//     row_a[i], row_b[i] of query query[i], bitwise as blem_contacts_raw emits it.
#pragma once

#include <tuple>
#include <utility>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include "common/bvh_checks.h"
#include "common/checks.h"
#include "mesh_query/mesh_query_kernels.h"

// The BVH tensors and queries every device entry point takes, and their bundle.
#define CN_BVH_ARGS                                                                             \
  const at::Tensor &tris, const at::Tensor &tri_ids, const at::Tensor &nodes,                   \
      const at::Tensor &dipoles, const at::Tensor &node_offsets, const at::Tensor &face_offsets, \
      const at::Tensor &ids_a, const at::Tensor &ids_b, const at::Tensor &poses_a,              \
      const at::Tensor &poses_b
#define CN_BVH_PASS                                                                            \
  BvhTensors {                                                                                 \
    tris, tri_ids, nodes, dipoles, node_offsets, face_offsets, ids_a, ids_b, poses_a, poses_b  \
  }

namespace contactnet {

using MeshDistanceOut = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
using BlemRawOut = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor,
                              at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
using BlemRowsOut = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor,
                               at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

struct BvhTensors {
  const at::Tensor &tris, &tri_ids, &nodes, &dipoles, &node_offsets, &face_offsets;
  const at::Tensor &ids_a, &ids_b, &poses_a, &poses_b;
};

// CPU value checks in one pass over the raw data (on other devices the Python wrapper checks, see
// common/checks.h): ids in range, poses finite with a non-zero quaternion (check_query_poses),
// boundary-layer widths finite and >= 0.
inline void check_query_values(const BvhTensors& b, int64_t num_meshes);

inline void check_query_inputs(const BvhTensors& b) {
  const int64_t num_meshes = check_bvh_tensors(b.tris, b.tri_ids, b.nodes, b.dipoles,
                                               b.node_offsets, b.face_offsets);
  check_input(b.ids_a, "ids_a", {-1});
  check_input(b.ids_b, "ids_b", {b.ids_a.size(0)});
  check_float_input(b.poses_a, "poses_a", {b.ids_a.size(0), 7});
  check_float_input(b.poses_b, "poses_b", {b.ids_a.size(0), 7});
  TORCH_CHECK(b.ids_a.scalar_type() == at::kLong && b.ids_b.scalar_type() == at::kLong,
              "ids_a, ids_b: expected int64");
  for (const at::Tensor* t : {&b.ids_a, &b.ids_b, &b.poses_a, &b.poses_b})
    TORCH_CHECK(t->device() == b.tris.device(), "mesh query inputs must share one device, got ",
                t->device(), " and ", b.tris.device());
  for (const at::Tensor* t : {&b.poses_a, &b.poses_b})
    TORCH_CHECK(t->scalar_type() == b.tris.scalar_type(),
                "mesh query float inputs must share one dtype");
  if (values_checked_in_cpp(b.ids_a)) check_query_values(b, num_meshes);
}

inline void check_query_values(const BvhTensors& b, int64_t num_meshes) {
  const char* names[2] = {"ids_a", "ids_b"};
  const at::Tensor* ids[2] = {&b.ids_a, &b.ids_b};
  for (int k = 0; k < 2; ++k) {
    const int64_t* id = ids[k]->data_ptr<int64_t>();
    for (int64_t q = 0, n = ids[k]->numel(); q < n; ++q)
      TORCH_CHECK_VALUE(id[q] >= 0 && id[q] < num_meshes, names[k], ": mesh ids must lie in [0, ",
                        num_meshes, "), got ", id[q], " (query ", q, ")");
  }
  AT_DISPATCH_FLOATING_TYPES(b.poses_a.scalar_type(), "check_query_poses", [&] {
    check_query_poses<scalar_t>(b.poses_a, "poses_a");
    check_query_poses<scalar_t>(b.poses_b, "poses_b");
  });
}

template <typename T>
QueryInputs<T> query_inputs(const BvhTensors& b) {
  return {bvh_view<T>(b.tris, b.tri_ids, b.nodes, b.dipoles, b.node_offsets, b.face_offsets),
          b.ids_a.data_ptr<int64_t>(), b.ids_b.data_ptr<int64_t>(), b.poses_a.data_ptr<T>(),
          b.poses_b.data_ptr<T>()};
}

template <typename Launch>
MeshDistanceOut mesh_distance_impl(const BvhTensors& b, double upper_bound, const Launch& launch) {
  check_query_inputs(b);
  const int64_t q = b.ids_a.size(0);
  const auto opt = b.tris.options();
  at::Tensor distance = at::empty({q}, opt), point_a = at::empty({q, 3}, opt),
             point_b = at::empty({q, 3}, opt), tri_a = at::empty({q}, opt.dtype(at::kLong)),
             tri_b = at::empty({q}, opt.dtype(at::kLong));
  AT_DISPATCH_FLOATING_TYPES(b.tris.scalar_type(), "mesh_distance", [&] {
    launch(b.tris, q,
           MeshDistanceFunctor<scalar_t>{query_inputs<scalar_t>(b),
                                         static_cast<scalar_t>(upper_bound),
                                         distance.data_ptr<scalar_t>(),
                                         point_a.data_ptr<scalar_t>(),
                                         point_b.data_ptr<scalar_t>(),
                                         tri_a.data_ptr<int64_t>(), tri_b.data_ptr<int64_t>()});
  });
  return {distance, point_a, point_b, tri_a, tri_b};
}

template <typename Launch>
at::Tensor mesh_collide_impl(const BvhTensors& b, double winding_threshold, double beta,
                             const Launch& launch) {
  check_query_inputs(b);
  const int64_t q = b.ids_a.size(0);
  at::Tensor collide = at::empty({q}, b.tris.options().dtype(at::kBool));
  AT_DISPATCH_FLOATING_TYPES(b.tris.scalar_type(), "mesh_collide", [&] {
    launch(b.tris, q,
           MeshCollideFunctor<scalar_t>{query_inputs<scalar_t>(b),
                                        static_cast<scalar_t>(winding_threshold),
                                        static_cast<scalar_t>(beta), collide.data_ptr<bool>()});
  });
  return collide;
}

inline void check_blem_inputs(const BvhTensors& b, const at::Tensor& r_a, const at::Tensor& r_b) {
  check_query_inputs(b);
  const int64_t q = b.ids_a.size(0);
  check_float_input(r_a, "r_a", {q});
  check_float_input(r_b, "r_b", {q});
  check_same_device_dtype(r_a, "r_a", b.tris, "tris");
  check_same_device_dtype(r_b, "r_b", b.tris, "tris");
  if (!values_checked_in_cpp(r_a)) return;
  AT_DISPATCH_FLOATING_TYPES(r_a.scalar_type(), "check_radii", [&] {
    for (const auto& [r, name] : {std::pair{&r_a, "r_a"}, std::pair{&r_b, "r_b"}}) {
      const scalar_t* w = r->data_ptr<scalar_t>();
      for (int64_t i = 0; i < q; ++i)
        TORCH_CHECK_VALUE(std::isfinite(w[i]) && w[i] >= scalar_t(0), name,
                          ": boundary-layer widths must be finite and >= 0 (query ", i, ")");
    }
  });
}

// The packed contact outputs for n contacts.
struct BlemTensors {
  at::Tensor points, normals, depths, distances, points_a, points_b, tri_a, tri_b, intersecting;

  BlemTensors(at::Tensor points, at::Tensor normals, at::Tensor depths, at::Tensor distances,
              at::Tensor points_a, at::Tensor points_b, at::Tensor tri_a, at::Tensor tri_b,
              at::Tensor intersecting)
      : points(std::move(points)), normals(std::move(normals)), depths(std::move(depths)),
        distances(std::move(distances)), points_a(std::move(points_a)),
        points_b(std::move(points_b)), tri_a(std::move(tri_a)), tri_b(std::move(tri_b)),
        intersecting(std::move(intersecting)) {}
  // n rows; a compact output's distances, points_a, points_b and intersecting get 0.
  BlemTensors(int64_t n, const at::TensorOptions& opt, bool compact = false)
      : points(at::empty({n, 3}, opt)), normals(at::empty({n, 3}, opt)),
        depths(at::empty({n}, opt)), distances(at::empty({compact ? 0 : n}, opt)),
        points_a(at::empty({compact ? 0 : n, 3}, opt)),
        points_b(at::empty({compact ? 0 : n, 3}, opt)),
        tri_a(at::empty({n}, opt.dtype(at::kLong))), tri_b(at::empty({n}, opt.dtype(at::kLong))),
        intersecting(at::empty({compact ? 0 : n}, opt.dtype(at::kBool))) {}

  template <typename T>
  ContactOut<T> view(bool compact = false) const {
    return {points.data_ptr<T>(),
            normals.data_ptr<T>(),
            depths.data_ptr<T>(),
            compact ? nullptr : distances.data_ptr<T>(),
            compact ? nullptr : points_a.data_ptr<T>(),
            compact ? nullptr : points_b.data_ptr<T>(),
            tri_a.data_ptr<int64_t>(),
            tri_b.data_ptr<int64_t>(),
            compact ? nullptr : intersecting.data_ptr<bool>(),
            compact};
  }
  BlemRowsOut columns() const {
    return {points, normals, depths, distances, points_a, points_b, tri_a, tri_b, intersecting};
  }
  BlemRawOut with_offsets(const at::Tensor& offsets) const {
    return {points, normals, depths, distances, points_a, points_b, tri_a, tri_b, intersecting,
            offsets};
  }
};

// Two passes (count, then fill at the prefix-summed offsets): the layout for devices without
// per-thread dynamic allocation. The CPU collects in one pass (mesh_query_cpu.cpp).
template <typename Launch>
BlemRawOut blem_contacts_raw_impl(const BvhTensors& b, const at::Tensor& r_a,
                                  const at::Tensor& r_b, bool compact, const Launch& launch) {
  check_blem_inputs(b, r_a, r_b);
  const int64_t q = b.ids_a.size(0);
  const auto opt = b.tris.options();
  at::Tensor counts = at::empty({q}, opt.dtype(at::kLong));
  at::Tensor offsets = at::zeros({q + 1}, opt.dtype(at::kLong));
  AT_DISPATCH_FLOATING_TYPES(b.tris.scalar_type(), "blem_contacts_count", [&] {
    launch(b.tris, q,
           BlemCountFunctor<scalar_t>{query_inputs<scalar_t>(b), r_a.data_ptr<scalar_t>(),
                                      r_b.data_ptr<scalar_t>(), counts.data_ptr<int64_t>()});
  });
  if (q > 0) offsets.narrow(0, 1, q).copy_(at::cumsum(counts, 0));
  const int64_t n = offsets[q].item<int64_t>();
  const BlemTensors out(n, opt, compact);
  if (n > 0) {
    AT_DISPATCH_FLOATING_TYPES(b.tris.scalar_type(), "blem_contacts_fill", [&] {
      launch(b.tris, q,
             BlemFillFunctor<scalar_t>{query_inputs<scalar_t>(b), r_a.data_ptr<scalar_t>(),
                                       r_b.data_ptr<scalar_t>(), offsets.data_ptr<int64_t>(),
                                       out.view<scalar_t>(compact)});
    });
  }
  return out.with_offsets(offsets);
}

// query, row_a, row_b: (M,) int64 on the BVH's device; on the CPU also their values (a query
// index, and a face row of that query's mesh a / b).
inline void check_blem_rows(const BvhTensors& b, const at::Tensor& r_a, const at::Tensor& r_b,
                            const at::Tensor& query, const at::Tensor& row_a,
                            const at::Tensor& row_b) {
  check_blem_inputs(b, r_a, r_b);
  const char* names[3] = {"query", "row_a", "row_b"};
  const at::Tensor* rows[3] = {&query, &row_a, &row_b};
  for (int k = 0; k < 3; ++k) {
    check_input(*rows[k], names[k], {query.size(0)});
    TORCH_CHECK(rows[k]->scalar_type() == at::kLong, names[k], ": expected int64, got ",
                rows[k]->scalar_type());
    TORCH_CHECK(rows[k]->device() == b.tris.device(), names[k], " must be on the device of tris, got ",
                rows[k]->device(), " and ", b.tris.device());
  }
  if (!values_checked_in_cpp(query)) return;
  const int64_t nq = b.ids_a.size(0);
  const int64_t *qs = query.data_ptr<int64_t>(), *ra = row_a.data_ptr<int64_t>(),
                *rb = row_b.data_ptr<int64_t>(), *ia = b.ids_a.data_ptr<int64_t>(),
                *ib = b.ids_b.data_ptr<int64_t>(), *fo = b.face_offsets.data_ptr<int64_t>();
  for (int64_t i = 0, m = query.size(0); i < m; ++i) {
    TORCH_CHECK_VALUE(qs[i] >= 0 && qs[i] < nq, "query: expected indices in [0, ", nq, "), got ",
                      qs[i], " (row ", i, ")");
    const int64_t fa = fo[ia[qs[i]] + 1] - fo[ia[qs[i]]], fb = fo[ib[qs[i]] + 1] - fo[ib[qs[i]]];
    TORCH_CHECK_VALUE(ra[i] >= 0 && ra[i] < fa, "row_a: expected a face row in [0, ", fa,
                      "), got ", ra[i], " (row ", i, ")");
    TORCH_CHECK_VALUE(rb[i] >= 0 && rb[i] < fb, "row_b: expected a face row in [0, ", fb,
                      "), got ", rb[i], " (row ", i, ")");
  }
}

template <typename Launch>
BlemRowsOut blem_contact_rows_impl(const BvhTensors& b, const at::Tensor& r_a,
                                   const at::Tensor& r_b, const at::Tensor& query,
                                   const at::Tensor& row_a, const at::Tensor& row_b,
                                   const Launch& launch) {
  check_blem_rows(b, r_a, r_b, query, row_a, row_b);
  const int64_t m = query.size(0);
  const BlemTensors out(m, b.tris.options());
  if (m > 0) {
    AT_DISPATCH_FLOATING_TYPES(b.tris.scalar_type(), "blem_contact_rows", [&] {
      launch(b.tris, m,
             BlemRowsFunctor<scalar_t>{query_inputs<scalar_t>(b), r_a.data_ptr<scalar_t>(),
                                       r_b.data_ptr<scalar_t>(), query.data_ptr<int64_t>(),
                                       row_a.data_ptr<int64_t>(), row_b.data_ptr<int64_t>(),
                                       out.view<scalar_t>()});
    });
  }
  return out.columns();
}

}  // namespace contactnet
