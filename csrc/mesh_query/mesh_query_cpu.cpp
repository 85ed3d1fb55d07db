#include <cstring>
#include <memory>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/library.h>

#include "common/host_buffer.h"
#include "common/launch_cpu.h"
#include "mesh_query/mesh_query.h"

namespace contactnet {
namespace {

// One query is a whole BVH traversal (microseconds to milliseconds): one query per task.
constexpr CpuLauncher kQueryLaunch{1};

MeshDistanceOut mesh_distance_cpu(CN_BVH_ARGS, double upper_bound) {
  return mesh_distance_impl(CN_BVH_PASS, upper_bound, kQueryLaunch);
}
at::Tensor mesh_collide_cpu(CN_BVH_ARGS, double winding_threshold, double beta) {
  return mesh_collide_impl(CN_BVH_PASS, winding_threshold, beta, kQueryLaunch);
}
// Collects the contacts of a run of queries, in order, in one traversal each (the device path
// needs a counting traversal first), straight into growable output columns (common/host_buffer.h):
// when one task ran every query, they become the output tensors without a copy. A compact sink
// keeps only the columns a compact output has (mesh_query.h).
template <typename T>
struct ColumnSink {
  static constexpr bool kStores = true;
  // points, normals, depths, distances, points_a, points_b, tri_a, tri_b, intersecting
  static constexpr int kColumns = 9;
  static constexpr size_t kRowBytes[kColumns] = {3 * sizeof(T), 3 * sizeof(T), sizeof(T),
                                                 sizeof(T),     3 * sizeof(T), 3 * sizeof(T),
                                                 sizeof(int64_t), sizeof(int64_t), sizeof(bool)};
  static constexpr bool kInCompact[kColumns] = {true,  true,  true, false, false,
                                                 false, true,  true, false};
  HostBuffer columns[kColumns];
  ContactOut<T> out{};
  int64_t rows = 0, capacity = 0;
  bool compact;

  explicit ColumnSink(bool compact) : compact(compact) {}
  bool kept(int c) const { return kInCompact[c] || !compact; }
  void grow() {
    capacity = capacity == 0 ? 1024 : 2 * capacity;
    for (int c = 0; c < kColumns; ++c)
      if (kept(c)) columns[c].reserve(size_t(capacity) * kRowBytes[c], size_t(rows) * kRowBytes[c]);
    out = {reinterpret_cast<T*>(columns[0].data()),       reinterpret_cast<T*>(columns[1].data()),
           reinterpret_cast<T*>(columns[2].data()),       reinterpret_cast<T*>(columns[3].data()),
           reinterpret_cast<T*>(columns[4].data()),       reinterpret_cast<T*>(columns[5].data()),
           reinterpret_cast<int64_t*>(columns[6].data()), reinterpret_cast<int64_t*>(columns[7].data()),
           reinterpret_cast<bool*>(columns[8].data()),    compact};
  }
  void emit(int64_t, const WorldContact<T>& c) {
    if (rows == capacity) grow();
    out.store(rows++, c);
  }
  // Copies rows 0 .. rows into `dst` from row `first` on.
  void copy_to(const ContactOut<T>& dst, int64_t first) const {
    void* to[kColumns] = {dst.points, dst.normals, dst.depths, dst.distances, dst.points_a,
                          dst.points_b, dst.tri_a, dst.tri_b, dst.intersecting};
    for (int c = 0; c < kColumns; ++c)
      if (rows > 0 && kept(c))
        std::memcpy(static_cast<char*>(to[c]) + size_t(first) * kRowBytes[c], columns[c].data(),
                    size_t(rows) * kRowBytes[c]);
  }
  BlemTensors into_tensors(const at::TensorOptions& opt) {
    const auto lng = opt.dtype(at::kLong);
    const auto column = [&](int c, at::IntArrayRef sizes, const at::TensorOptions& o) {
      if (!kept(c)) {
        std::vector<int64_t> empty(sizes.begin(), sizes.end());
        empty[0] = 0;
        return at::empty(empty, o);
      }
      return columns[c].into_tensor(sizes, o, size_t(rows) * kRowBytes[c]);
    };
    return {column(0, {rows, 3}, opt), column(1, {rows, 3}, opt), column(2, {rows}, opt),
            column(3, {rows}, opt),    column(4, {rows, 3}, opt), column(5, {rows, 3}, opt),
            column(6, {rows}, lng),    column(7, {rows}, lng),    column(8, {rows}, opt.dtype(at::kBool))};
  }
};

BlemRawOut blem_contacts_raw_cpu(CN_BVH_ARGS, const at::Tensor& r_a, const at::Tensor& r_b,
                                 bool compact) {
  const BvhTensors b = CN_BVH_PASS;
  check_blem_inputs(b, r_a, r_b);
  const int64_t q = ids_a.size(0);
  at::Tensor offsets = at::empty({q + 1}, tris.options().dtype(at::kLong));
  BlemRawOut result;
  AT_DISPATCH_FLOATING_TYPES(tris.scalar_type(), "blem_contacts_raw", [&] {
    using T = scalar_t;
    const QueryInputs<T> in = query_inputs<T>(b);
    const T* ra = r_a.data_ptr<T>();
    const T* rb = r_b.data_ptr<T>();
    int64_t* off = offsets.data_ptr<int64_t>();
    // One sink per task, kept at the task's first query; off[i + 1] = query i's count for now.
    std::vector<std::unique_ptr<ColumnSink<T>>> sinks(q);
    at::parallel_for(0, q, 1, [&](int64_t begin, int64_t end) {
      auto sink = std::make_unique<ColumnSink<T>>(compact);
      for (int64_t i = begin; i < end; ++i) {
        const int64_t before = sink->rows;
        blem_query(in, ra, rb, i, *sink);
        off[i + 1] = sink->rows - before;
      }
      sinks[begin] = std::move(sink);
    });
    off[0] = 0;
    for (int64_t i = 0; i < q; ++i) off[i + 1] += off[i];
    const auto opt = tris.options();
    if (q == 0) {
      result = BlemTensors(0, opt, compact).with_offsets(offsets);
    } else if (sinks[0]->rows == off[q]) {  // one task ran every query
      result = sinks[0]->into_tensors(opt).with_offsets(offsets);
    } else {
      const BlemTensors out(off[q], opt, compact);
      const ContactOut<T> view = out.view<T>(compact);
      at::parallel_for(0, q, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          if (sinks[i]) sinks[i]->copy_to(view, off[i]);
      });
      result = out.with_offsets(offsets);
    }
  });
  return result;
}

BlemRowsOut blem_contact_rows_cpu(CN_BVH_ARGS, const at::Tensor& r_a, const at::Tensor& r_b,
                                  const at::Tensor& query, const at::Tensor& row_a,
                                  const at::Tensor& row_b) {
  return blem_contact_rows_impl(CN_BVH_PASS, r_a, r_b, query, row_a, row_b, kQueryLaunch);
}

}  // namespace

#define CN_BVH_SCHEMA                                                                     \
  "Tensor tris, Tensor tri_ids, Tensor nodes, Tensor dipoles, "                         \
  "Tensor node_offsets, Tensor face_offsets, Tensor ids_a, Tensor ids_b, Tensor poses_a, " \
  "Tensor poses_b"

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def("mesh_distance(" CN_BVH_SCHEMA
        ", float upper_bound) -> (Tensor distance, Tensor point_a, Tensor point_b, "
        "Tensor tri_a, Tensor tri_b)");
  m.def("mesh_collide(" CN_BVH_SCHEMA ", float winding_threshold, float beta) -> Tensor");
  m.def("blem_contacts_raw(" CN_BVH_SCHEMA
        ", Tensor r_a, Tensor r_b, bool compact=False) -> (Tensor points, Tensor normals, "
        "Tensor depths, Tensor distances, Tensor points_a, Tensor points_b, Tensor tri_a, "
        "Tensor tri_b, Tensor intersecting, Tensor offsets)");
  m.def("blem_contact_rows(" CN_BVH_SCHEMA
        ", Tensor r_a, Tensor r_b, Tensor query, Tensor row_a, Tensor row_b) -> (Tensor points, "
        "Tensor normals, Tensor depths, Tensor distances, Tensor points_a, Tensor points_b, "
        "Tensor tri_a, Tensor tri_b, Tensor intersecting)");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) {
  m.impl("mesh_distance", &mesh_distance_cpu);
  m.impl("mesh_collide", &mesh_collide_cpu);
  m.impl("blem_contacts_raw", &blem_contacts_raw_cpu);
  m.impl("blem_contact_rows", &blem_contact_rows_cpu);
}

}  // namespace contactnet
