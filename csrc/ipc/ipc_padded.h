// Fixed-capacity variants of the IPC broad phases, for stepping without host syncs (a CUDA graph
// can capture them): the pairs of ipc_collision_candidates / ipc_swept_candidates (same boxes,
// same CandidatePairFilter), found by a sort-and-sweep, whose memory is fixed by the input sizes
// (the grid of the variable-size search is sized from values read on the host), into pair lists
// of a fixed number of rows.
//
// ipc_collision_candidates_padded(vertices (V, 3), faces (F, 3) int64, edges (E, 2) int64,
//                                 vertex_body (V,) int64 or None, dhat, capacity,
//                                 vertex_active (V,) bool or None, face_active (F,) bool or None,
//                                 edge_active (E,) bool or None)
//   -> fv (capacity, 2) int64, ee (capacity, 2) int64, counts (2,) int64.
//      The pairs of ipc_collision_candidates (in sweep order, not sorted), the first `capacity` of
//      each kind; rows beyond them are -1 (padding, which every IPC op treats as no candidate).
//      counts = the number of face–vertex and edge–edge pairs found, which exceeds `capacity` when
//      some were dropped: check it. Inactive primitives (mask false) take part in no pair.
// ipc_swept_candidates_padded(vertices_t0, vertices_t1, faces, edges, vertex_body, min_distance,
//                             capacity, vertex_active, face_active, edge_active)
//   -> fv, ee, counts: the same for the swept boxes of ipc_swept_candidates.
#pragma once

#include <limits>
#include <optional>
#include <tuple>

#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/full.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include "ipc/ipc.h"

namespace contactnet {

// Sort-and-sweep over boxes sorted by lo along column 0 (the sweep axis): item i enumerates the
// partners of one box, each overlapping pair exactly once (by the member whose lower bound comes
// first), between sets A (vertices) and B (faces), or within one set (edges, filter.self). Pass 1
// (out == null) counts per item; pass 2 writes at offset[i] the pairs whose row is < capacity.
template <typename T>
struct PaddedSweepFunctor {
  CandidatePairFilter<T> filter;
  const T* box_a;       // (na, 6) sorted by lo[0]
  const T* key_a;       // (na,) lo[0], ascending
  const int64_t* id_a;  // (na,) original primitive ids
  int64_t na;
  const T* box_b;  // B likewise (unused when filter.self)
  const T* key_b;
  const int64_t* id_b;
  int64_t nb;
  const int64_t* offset;
  int64_t* count;  // pass 1
  int64_t* out;    // pass 2: (capacity, 2)
  int64_t capacity;

  struct CappedWrite {
    int64_t* out;
    int64_t row;
    int64_t capacity;
    int64_t n;
    CN_HD void operator()(int64_t a, int64_t b) {
      if (out && row + n < capacity) {
        out[2 * (row + n)] = a;
        out[2 * (row + n) + 1] = b;
      }
      ++n;
    }
  };

  // First index in the ascending a[0, n) whose value is >= x (strict: > x).
  static CN_HD int64_t first_at_least(const T* a, int64_t n, T x, bool strict) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (strict ? !(a[mid] > x) : a[mid] < x)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  }

  CN_HD void operator()(int64_t i) const {
    CappedWrite sink{out, out ? offset[i] : 0, capacity, 0};
    if (filter.self) {
      const T* bi = box_a + 6 * i;
      for (int64_t j = i + 1; j < na && !(key_a[j] > bi[3]); ++j)
        if (boxes_overlap(bi, box_a + 6 * j)) filter.take(id_a[i], id_a[j], sink);
    } else if (i < na) {
      // B boxes whose lower bound lies in [lo_a, hi_a].
      const T* ba = box_a + 6 * i;
      for (int64_t j = first_at_least(key_b, nb, ba[0], false); j < nb && !(key_b[j] > ba[3]); ++j)
        if (boxes_overlap(ba, box_b + 6 * j)) filter.take(id_a[i], id_b[j], sink);
    } else {
      // A boxes whose lower bound lies in (lo_b, hi_b].
      const int64_t k = i - na;
      const T* bb = box_b + 6 * k;
      for (int64_t j = first_at_least(key_a, na, bb[0], true); j < na && !(key_a[j] > bb[3]); ++j)
        if (boxes_overlap(box_a + 6 * j, bb)) filter.take(id_a[j], id_b[k], sink);
    }
    if (count) count[i] = sink.n;
  }
};

// Boxes sorted by their lower bound along column 0: sorted boxes, keys and original ids.
inline void sort_boxes_by_lo(const at::Tensor& box, at::Tensor& sorted, at::Tensor& key,
                             at::Tensor& order) {
  auto sk = box.select(1, 0).sort();
  key = std::get<0>(sk).contiguous();
  order = std::get<1>(sk).contiguous();
  sorted = box.index_select(0, order).contiguous();
}

inline void check_active(const std::optional<at::Tensor>& mask, const char* name, int64_t n,
                         const at::Tensor& like) {
  if (!mask.has_value()) return;
  check_input(*mask, name, {n});
  TORCH_CHECK(mask->scalar_type() == at::kBool, name, ": expected bool, got ", mask->scalar_type());
  TORCH_CHECK(mask->device() == like.device(), name, " must be on the vertices' device");
}

// Inactive rows of `box` (n, 6) become the empty box (lo = +inf, hi = -inf): it sorts last and
// overlaps nothing, so the sweep never visits it.
inline at::Tensor mask_boxes(const at::Tensor& box, const std::optional<at::Tensor>& active) {
  if (!active.has_value()) return box;
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor empty = at::full({6}, inf, box.options());
  empty.narrow(0, 3, 3).fill_(-inf);
  return at::where(active->unsqueeze(1), box, empty).contiguous();
}

template <typename Launch>
std::tuple<at::Tensor, at::Tensor, at::Tensor> ipc_candidates_padded_impl(
    const at::Tensor& v0, const at::Tensor* v1, const at::Tensor& faces, const at::Tensor& edges,
    const std::optional<at::Tensor>& vertex_body, const std::optional<at::Tensor>& vertex_active,
    const std::optional<at::Tensor>& face_active, const std::optional<at::Tensor>& edge_active,
    double inflate, double dhat2, int64_t capacity, const Launch& launch) {
  const int64_t V = v0.size(0), F = faces.size(0), E = edges.size(0);
  TORCH_CHECK(capacity >= 0, "capacity: expected >= 0, got ", capacity);
  check_active(vertex_active, "vertex_active", V, v0);
  check_active(face_active, "face_active", F, v0);
  check_active(edge_active, "edge_active", E, v0);
  const auto lopt = faces.options().dtype(at::kLong);
  at::Tensor fv = at::full({capacity, 2}, -1, lopt), ee = at::full({capacity, 2}, -1, lopt);
  at::Tensor counts = at::zeros({2}, lopt);
  AT_DISPATCH_FLOATING_TYPES(v0.scalar_type(), "ipc_candidates_padded", [&] {
    using T = scalar_t;
    const T* p0 = v0.data_ptr<T>();
    at::Tensor vbox, fbox, ebox;
    std::tie(vbox, fbox, ebox) =
        primitive_boxes<T>(v0, v1 ? v1->data_ptr<T>() : nullptr, faces, edges, inflate, launch);
    vbox = mask_boxes(vbox, vertex_active);
    fbox = mask_boxes(fbox, face_active);
    ebox = mask_boxes(ebox, edge_active);
    // Sweep along the axis where the vertices spread most, chosen on the device: the box columns
    // are rotated so that axis comes first (overlap tests do not depend on the column order).
    if (V > 0) {
      at::Tensor extent = std::get<0>(v0.max(0)).sub(std::get<0>(v0.min(0)));
      at::Tensor cols = extent.argmax().add(at::arange(3, lopt)).remainder(3);
      at::Tensor perm = at::cat({cols, cols.add(3)});
      vbox = vbox.index_select(1, perm);
      fbox = fbox.index_select(1, perm);
      ebox = ebox.index_select(1, perm);
    }
    at::Tensor sv, kv, iv, sf, kf, i_f, se, ke, ie;
    sort_boxes_by_lo(vbox, sv, kv, iv);
    sort_boxes_by_lo(fbox, sf, kf, i_f);
    sort_boxes_by_lo(ebox, se, ke, ie);

    auto run = [&](PaddedSweepFunctor<T> f, int64_t items, at::Tensor& pairs, int64_t which) {
      at::Tensor count = at::empty({items}, lopt);
      f.count = count.data_ptr<int64_t>();
      launch(v0, items, f);
      at::Tensor offset = count.cumsum(0).sub(count).contiguous();
      counts.narrow(0, which, 1).copy_(count.sum().reshape({1}));
      f.count = nullptr;
      f.offset = offset.data_ptr<int64_t>();
      f.out = pairs.data_ptr<int64_t>();
      f.capacity = capacity;
      launch(v0, items, f);
    };
    PaddedSweepFunctor<T> base{};
    base.filter.vertices = p0;
    base.filter.faces = faces.data_ptr<int64_t>();
    base.filter.edges = edges.data_ptr<int64_t>();
    base.filter.body = vertex_body.has_value() ? vertex_body->data_ptr<int64_t>() : nullptr;
    base.filter.dhat2 = T(dhat2);

    PaddedSweepFunctor<T> fvs = base;
    fvs.filter.self = false;
    fvs.box_a = sv.data_ptr<T>();
    fvs.key_a = kv.data_ptr<T>();
    fvs.id_a = iv.data_ptr<int64_t>();
    fvs.na = V;
    fvs.box_b = sf.data_ptr<T>();
    fvs.key_b = kf.data_ptr<T>();
    fvs.id_b = i_f.data_ptr<int64_t>();
    fvs.nb = F;
    run(fvs, V + F, fv, 0);

    PaddedSweepFunctor<T> ees = base;
    ees.filter.self = true;
    ees.box_a = se.data_ptr<T>();
    ees.key_a = ke.data_ptr<T>();
    ees.id_a = ie.data_ptr<int64_t>();
    ees.na = E;
    run(ees, E, ee, 1);
  });
  return {fv, ee, counts};
}

template <typename Launch>
std::tuple<at::Tensor, at::Tensor, at::Tensor> ipc_collision_candidates_padded_impl(
    const at::Tensor& vertices, const at::Tensor& faces, const at::Tensor& edges,
    const std::optional<at::Tensor>& vertex_body, double dhat, int64_t capacity,
    const std::optional<at::Tensor>& vertex_active, const std::optional<at::Tensor>& face_active,
    const std::optional<at::Tensor>& edge_active, const Launch& launch) {
  check_vertices(vertices, "vertices");
  check_mesh(vertices, faces, edges, vertex_body);
  TORCH_CHECK(dhat > 0, "dhat: expected > 0, got ", dhat);
  return ipc_candidates_padded_impl(vertices, nullptr, faces, edges, vertex_body, vertex_active,
                                    face_active, edge_active, 0.5 * dhat, dhat * dhat, capacity,
                                    launch);
}

template <typename Launch>
std::tuple<at::Tensor, at::Tensor, at::Tensor> ipc_swept_candidates_padded_impl(
    const at::Tensor& v0, const at::Tensor& v1, const at::Tensor& faces, const at::Tensor& edges,
    const std::optional<at::Tensor>& vertex_body, double min_distance, int64_t capacity,
    const std::optional<at::Tensor>& vertex_active, const std::optional<at::Tensor>& face_active,
    const std::optional<at::Tensor>& edge_active, const Launch& launch) {
  check_vertices(v0, "vertices_t0");
  check_vertices(v1, "vertices_t1");
  check_same_device_dtype(v0, "vertices_t0", v1, "vertices_t1");
  check_same_batch(v0, "vertices_t0", v1, "vertices_t1");
  check_mesh(v0, faces, edges, vertex_body);
  TORCH_CHECK(min_distance >= 0, "min_distance: expected >= 0, got ", min_distance);
  return ipc_candidates_padded_impl(v0, &v1, faces, edges, vertex_body, vertex_active,
                                    face_active, edge_active, 0.5 * min_distance, -1.0, capacity,
                                    launch);
}

}  // namespace contactnet
