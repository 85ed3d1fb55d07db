#include <vector>

#include <ATen/Parallel.h>
#include <torch/library.h>

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
// Collects each query's contacts in its own vector in one traversal (the device path needs a
// counting traversal first), then packs them.
template <typename T>
struct VectorSink {
  static constexpr bool kStores = true;
  std::vector<WorldContact<T>>* rows;
  void emit(int64_t, const WorldContact<T>& c) { rows->push_back(c); }
};

BlemRawOut blem_contacts_raw_cpu(CN_BVH_ARGS, const at::Tensor& r_a, const at::Tensor& r_b) {
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
    std::vector<std::vector<WorldContact<T>>> rows(q);
    at::parallel_for(0, q, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        VectorSink<T> sink{&rows[i]};
        blem_query(in, ra, rb, i, sink);
      }
    });
    int64_t* off = offsets.data_ptr<int64_t>();
    off[0] = 0;
    for (int64_t i = 0; i < q; ++i) off[i + 1] = off[i] + static_cast<int64_t>(rows[i].size());
    const BlemTensors out(off[q], tris.options());
    const ContactOut<T> view = out.view<T>();
    at::parallel_for(0, q, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        for (size_t k = 0; k < rows[i].size(); ++k) view.store(off[i] + int64_t(k), rows[i][k]);
    });
    result = out.with_offsets(offsets);
  });
  return result;
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
        ", Tensor r_a, Tensor r_b) -> (Tensor points, Tensor normals, Tensor depths, "
        "Tensor distances, Tensor points_a, Tensor points_b, Tensor tri_a, Tensor tri_b, "
        "Tensor intersecting, Tensor offsets)");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) {
  m.impl("mesh_distance", &mesh_distance_cpu);
  m.impl("mesh_collide", &mesh_collide_cpu);
  m.impl("blem_contacts_raw", &blem_contacts_raw_cpu);
}

}  // namespace contactnet
