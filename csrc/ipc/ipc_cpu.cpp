#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "common/launch_cpu.h"
#include "ipc/ipc.h"

namespace contactnet {
namespace {

// Indices per task, so that one task does a few microseconds of work.
constexpr CpuLauncher kCheapLaunch{1024};     // distances, barrier, boxes
// Sweep items in one pass: each task keeps its pairs, concatenated in task order afterwards.
struct CpuSweepLauncher : CpuLauncher {
  static constexpr bool kCollectsPairs = true;

  struct Append {
    std::vector<int64_t>* pairs;
    void operator()(int64_t a, int64_t b) {
      pairs->push_back(a);
      pairs->push_back(b);
    }
  };

  template <typename F>
  at::Tensor collect_pairs(const F& f, int64_t items, const at::TensorOptions& opt) const {
    const int64_t tasks = (items + grain - 1) / grain;
    std::vector<std::vector<int64_t>> found(tasks);
    at::parallel_for(0, tasks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        Append sink{&found[t]};
        for (int64_t i = t * grain; i < std::min(items, (t + 1) * grain); ++i) f.visit(i, sink);
      }
    });
    int64_t total = 0;
    for (const auto& v : found) total += static_cast<int64_t>(v.size()) / 2;
    at::Tensor pairs = at::empty({total, 2}, opt);
    int64_t* out = pairs.data_ptr<int64_t>();
    for (const auto& v : found) out = std::copy(v.begin(), v.end(), out);
    return pairs;
  }
};
// Grid queries cost ~1-5 µs each; also the grain of the box and grid-entry loops (~50 ns per
// primitive), so small meshes run inline rather than paying a parallel region per loop.
constexpr CpuSweepLauncher kSweepLaunch{{1024}};
constexpr CpuLauncher kPotentialLaunch{32};   // Hessian + PSD projection: ~10 µs per candidate

// Projected barrier Hessians with each shared point–point / point–edge feature evaluated once
// (about 4× fewer evaluations of those on meshes) and copied to the other candidates on it.
struct CpuPotentialLauncher : CpuLauncher {
  static constexpr bool kSharesFeatures = true;

  template <typename F>
  void hessian_by_feature(const F& f, int64_t n) const {
    using Key = std::array<int64_t, 4>;  // feature key, candidate
    const int64_t tasks = (n + grain - 1) / grain;
    std::vector<std::vector<Key>> found(tasks);
    std::vector<char> shared(n, 0);
    at::parallel_for(0, tasks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        for (int64_t i = t * grain; i < std::min(n, (t + 1) * grain); ++i) {
          int64_t key[3];
          if (f.feature_key(i, key)) {
            found[t].push_back({key[0], key[1], key[2], i});
            shared[i] = 1;
          }
        }
    });
    std::vector<Key> keys;
    for (const auto& v : found) keys.insert(keys.end(), v.begin(), v.end());
    std::sort(keys.begin(), keys.end());
    std::vector<int64_t> group;  // start of each run of equal keys
    for (size_t k = 0; k < keys.size(); ++k)
      if (k == 0 || !std::equal(keys[k].begin(), keys[k].begin() + 3, keys[k - 1].begin()))
        group.push_back(static_cast<int64_t>(k));
    group.push_back(static_cast<int64_t>(keys.size()));
    const int64_t groups = static_cast<int64_t>(group.size()) - 1;
    at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        if (!shared[i]) f(i);
    });
    at::parallel_for(0, groups, grain, [&](int64_t begin, int64_t end) {
      for (int64_t g = begin; g < end; ++g) {
        const Key& rep = keys[group[g]];
        f(rep[3]);
        for (int64_t k = group[g] + 1; k < group[g + 1]; ++k)
          f.copy_feature_hessian(rep[3], keys[k][3], rep.data());
      }
    });
  }
};
constexpr CpuPotentialLauncher kHessianLaunch{{32}};

using Tensor = at::Tensor;
using OptTensor = std::optional<at::Tensor>;

Tensor pp(int order, const Tensor& p, const Tensor& q) {
  return ipc_distance_impl(kIpcPointPoint, order, {p, q}, nullptr, kCheapLaunch);
}
Tensor pe(int order, const Tensor& p, const Tensor& e0, const Tensor& e1) {
  return ipc_distance_impl(kIpcPointEdge, order, {p, e0, e1}, nullptr, kCheapLaunch);
}
Tensor pt(int order, const Tensor& p, const Tensor& t0, const Tensor& t1, const Tensor& t2) {
  return ipc_distance_impl(kIpcPointTriangle, order, {p, t0, t1, t2}, nullptr, kCheapLaunch);
}
Tensor ee(int order, const Tensor& a0, const Tensor& a1, const Tensor& b0, const Tensor& b1) {
  return ipc_distance_impl(kIpcEdgeEdge, order, {a0, a1, b0, b1}, nullptr, kCheapLaunch);
}
Tensor moll(int order, const Tensor& a0, const Tensor& a1, const Tensor& b0, const Tensor& b1,
            const Tensor& eps_x) {
  return ipc_distance_impl(kIpcMollifier, order, {a0, a1, b0, b1}, &eps_x, kCheapLaunch);
}

template <int Order>
Tensor pp_cpu(const Tensor& p, const Tensor& q) { return pp(Order, p, q); }
template <int Order>
Tensor pe_cpu(const Tensor& p, const Tensor& e0, const Tensor& e1) { return pe(Order, p, e0, e1); }
template <int Order>
Tensor pt_cpu(const Tensor& p, const Tensor& t0, const Tensor& t1, const Tensor& t2) {
  return pt(Order, p, t0, t1, t2);
}
template <int Order>
Tensor ee_cpu(const Tensor& a0, const Tensor& a1, const Tensor& b0, const Tensor& b1) {
  return ee(Order, a0, a1, b0, b1);
}
template <int Order>
Tensor moll_cpu(const Tensor& a0, const Tensor& a1, const Tensor& b0, const Tensor& b1,
                const Tensor& eps_x) {
  return moll(Order, a0, a1, b0, b1, eps_x);
}

std::tuple<Tensor, Tensor, Tensor> barrier_cpu(const Tensor& d2, double dhat) {
  return ipc_barrier_impl(d2, dhat, kCheapLaunch);
}

std::tuple<Tensor, Tensor> candidates_cpu(const Tensor& vertices, const Tensor& faces,
                                          const Tensor& edges, const OptTensor& vertex_body,
                                          double dhat) {
  return ipc_collision_candidates_impl(vertices, faces, edges, vertex_body, dhat, kSweepLaunch);
}

std::tuple<Tensor, Tensor> swept_candidates_cpu(const Tensor& v0, const Tensor& v1,
                                                const Tensor& faces, const Tensor& edges,
                                                const OptTensor& vertex_body,
                                                double min_distance) {
  return ipc_swept_candidates_impl(v0, v1, faces, edges, vertex_body, min_distance, kSweepLaunch);
}

Tensor potential_cpu(const Tensor& vertices, const Tensor& rest, const Tensor& faces,
                     const Tensor& edges, const Tensor& fv, const Tensor& ee, double dhat,
                     double kappa) {
  return std::get<0>(ipc_barrier_potential_impl(vertices, rest, faces, edges, fv, ee, dhat, kappa,
                                                0, false, kCheapLaunch));
}
Tensor potential_gradient_cpu(const Tensor& vertices, const Tensor& rest, const Tensor& faces,
                              const Tensor& edges, const Tensor& fv, const Tensor& ee, double dhat,
                              double kappa) {
  return std::get<1>(ipc_barrier_potential_impl(vertices, rest, faces, edges, fv, ee, dhat, kappa,
                                                1, false, kCheapLaunch));
}
Tensor potential_hessian_cpu(const Tensor& vertices, const Tensor& rest, const Tensor& faces,
                             const Tensor& edges, const Tensor& fv, const Tensor& ee, double dhat,
                             double kappa, bool project_to_psd) {
  return std::get<2>(ipc_barrier_potential_impl(vertices, rest, faces, edges, fv, ee, dhat, kappa,
                                                2, project_to_psd, kHessianLaunch));
}

template <int Order>
Tensor friction_cpu(const Tensor& velocities, const Tensor& lagged, const Tensor& rest,
                    const Tensor& faces, const Tensor& edges, const Tensor& fv, const Tensor& ee,
                    double dhat, double kappa, double mu, double eps_v) {
  return ipc_friction_impl(velocities, lagged, rest, faces, edges, fv, ee, dhat, kappa, mu, eps_v,
                           Order, Order == 2 ? kPotentialLaunch : kCheapLaunch);
}

Tensor ccd_cpu(const Tensor& v0, const Tensor& v1, const Tensor& faces, const Tensor& edges,
               const Tensor& fv, const Tensor& ee, double min_distance, double tmax,
               double conservative_rescaling, int64_t max_iterations) {
  return ipc_ccd_impl(v0, v1, faces, edges, fv, ee, min_distance, tmax, conservative_rescaling,
                      max_iterations, kPotentialLaunch);
}

// Sum of (N, 12, 12) stencil blocks as a coalesced (row-major, merged) COO matrix of size 3V,
// without a sort of the N·144 entries: every vertex row gathers the blocks of the candidates that
// touch it, so its column pattern (the distinct vertices of those stencils) is known up front and
// each block lands at its final position. Returns indices (2, nnz) int64 and values (nnz,).
std::tuple<Tensor, Tensor> assemble_hessian_cpu(const Tensor& local, const Tensor& stencils,
                                                int64_t num_vertices) {
  check_float_input(local, "local", {-1, 12, 12});
  check_index_input(stencils, "stencils", {-1, 4}, num_vertices);
  check_same_batch(local, "local", stencils, "stencils");
  TORCH_CHECK(local.device().is_cpu() && stencils.device().is_cpu(),
              "local and stencils: expected CPU tensors");
  const int64_t n = local.size(0), V = num_vertices;
  const int64_t* st = stencils.data_ptr<int64_t>();
  // Incidence of vertices in stencils, CSR: slots 4c + a of the stencils holding vertex v.
  std::vector<int64_t> inc_start(V + 1, 0), inc(4 * n);
  for (int64_t k = 0; k < 4 * n; ++k) ++inc_start[st[k] + 1];
  for (int64_t v = 0; v < V; ++v) inc_start[v + 1] += inc_start[v];
  {
    std::vector<int64_t> fill(inc_start.begin(), inc_start.end() - 1);
    for (int64_t k = 0; k < 4 * n; ++k) inc[fill[st[k]]++] = k;
  }
  // Sorted distinct column vertices of row v; `mark` (one per task) holds the last row that saw
  // a vertex, so no clearing is needed between rows.
  auto row_columns = [&](int64_t v, std::vector<int64_t>& mark, std::vector<int64_t>& cols) {
    cols.clear();
    for (int64_t s = inc_start[v]; s < inc_start[v + 1]; ++s) {
      const int64_t* c = st + 4 * (inc[s] / 4);
      for (int b = 0; b < 4; ++b)
        if (mark[c[b]] != v) {
          mark[c[b]] = v;
          cols.push_back(c[b]);
        }
    }
    std::sort(cols.begin(), cols.end());
  };
  constexpr int64_t kGrain = 2048;
  std::vector<int64_t> row_blocks(V + 1, 0);  // distinct column vertices per row, then offsets
  at::parallel_for(0, V, kGrain, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> mark(V, -1), cols;
    for (int64_t v = begin; v < end; ++v) {
      row_columns(v, mark, cols);
      row_blocks[v + 1] = static_cast<int64_t>(cols.size());
    }
  });
  for (int64_t v = 0; v < V; ++v) row_blocks[v + 1] += row_blocks[v];
  const int64_t nnz = 9 * row_blocks[V];
  Tensor indices = at::empty({2, nnz}, stencils.options());
  Tensor values = at::zeros({nnz}, local.options());
  int64_t* ri = indices.data_ptr<int64_t>();
  int64_t* ci = ri + nnz;
  AT_DISPATCH_FLOATING_TYPES(local.scalar_type(), "ipc_assemble_hessian", [&] {
    const scalar_t* H = local.data_ptr<scalar_t>();
    scalar_t* out = values.data_ptr<scalar_t>();
    at::parallel_for(0, V, kGrain, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> mark(V, -1), cols, where(V);
      for (int64_t v = begin; v < end; ++v) {
        row_columns(v, mark, cols);
        const int64_t k = static_cast<int64_t>(cols.size());
        const int64_t base = 9 * row_blocks[v];  // DOF row 3v + r holds 3k entries
        for (int64_t j = 0; j < k; ++j) {
          where[cols[j]] = j;
          for (int r = 0; r < 3; ++r)
            for (int c = 0; c < 3; ++c) {
              const int64_t e = base + 3 * k * r + 3 * j + c;
              ri[e] = 3 * v + r;
              ci[e] = 3 * cols[j] + c;
            }
        }
        for (int64_t s = inc_start[v]; s < inc_start[v + 1]; ++s) {
          const int64_t cand = inc[s] / 4, a = inc[s] % 4;
          const int64_t* c4 = st + 4 * cand;
          const scalar_t* Hc = H + 144 * cand;
          for (int b = 0; b < 4; ++b) {
            scalar_t* o = out + base + 3 * where[c4[b]];
            for (int r = 0; r < 3; ++r)
              for (int c = 0; c < 3; ++c) o[3 * k * r + c] += Hc[(3 * a + r) * 12 + 3 * b + c];
          }
        }
      }
    });
  });
  return {indices, values};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  const char* suffixes[3] = {"", "_gradient", "_hessian"};
  for (const char* s : suffixes) {
    const std::string sfx(s);
    m.def((std::string("ipc_point_point_distance") + sfx + "(Tensor p, Tensor q) -> Tensor").c_str());
    m.def((std::string("ipc_point_edge_distance") + sfx + "(Tensor p, Tensor e0, Tensor e1) -> Tensor").c_str());
    m.def((std::string("ipc_point_triangle_distance") + sfx +
           "(Tensor p, Tensor t0, Tensor t1, Tensor t2) -> Tensor").c_str());
    m.def((std::string("ipc_edge_edge_distance") + sfx +
           "(Tensor ea0, Tensor ea1, Tensor eb0, Tensor eb1) -> Tensor").c_str());
    m.def((std::string("ipc_edge_edge_mollifier") + sfx +
           "(Tensor ea0, Tensor ea1, Tensor eb0, Tensor eb1, Tensor eps_x) -> Tensor").c_str());
  }
  m.def("ipc_barrier(Tensor d2, float dhat) -> (Tensor value, Tensor first, Tensor second)");
  m.def(
      "ipc_collision_candidates(Tensor vertices, Tensor faces, Tensor edges, "
      "Tensor? vertex_body, float dhat) -> (Tensor fv, Tensor ee)");
  m.def(
      "ipc_swept_candidates(Tensor vertices_t0, Tensor vertices_t1, Tensor faces, Tensor edges, "
      "Tensor? vertex_body, float min_distance) -> (Tensor fv, Tensor ee)");
  const std::string potential_args =
      "(Tensor vertices, Tensor rest_vertices, Tensor faces, Tensor edges, Tensor fv, Tensor ee, "
      "float dhat, float kappa";
  m.def(("ipc_barrier_potential" + potential_args + ") -> Tensor").c_str());
  m.def(("ipc_barrier_potential_gradient" + potential_args + ") -> Tensor").c_str());
  m.def(("ipc_barrier_potential_hessian" + potential_args + ", bool project_to_psd) -> Tensor").c_str());
  const std::string friction_args =
      "(Tensor velocities, Tensor lagged_vertices, Tensor rest_vertices, Tensor faces, "
      "Tensor edges, Tensor fv, Tensor ee, float dhat, float kappa, float mu, float eps_v) -> Tensor";
  m.def(("ipc_friction_potential" + friction_args).c_str());
  m.def(("ipc_friction_potential_gradient" + friction_args).c_str());
  m.def(("ipc_friction_potential_hessian" + friction_args).c_str());
  m.def(
      "ipc_assemble_hessian(Tensor local, Tensor stencils, int num_vertices) -> "
      "(Tensor indices, Tensor values)");
  m.def(
      "ipc_ccd(Tensor vertices_t0, Tensor vertices_t1, Tensor faces, Tensor edges, Tensor fv, "
      "Tensor ee, float min_distance, float tmax, float conservative_rescaling, "
      "int max_iterations) -> Tensor");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) {
  m.impl("ipc_point_point_distance", &pp_cpu<0>);
  m.impl("ipc_point_point_distance_gradient", &pp_cpu<1>);
  m.impl("ipc_point_point_distance_hessian", &pp_cpu<2>);
  m.impl("ipc_point_edge_distance", &pe_cpu<0>);
  m.impl("ipc_point_edge_distance_gradient", &pe_cpu<1>);
  m.impl("ipc_point_edge_distance_hessian", &pe_cpu<2>);
  m.impl("ipc_point_triangle_distance", &pt_cpu<0>);
  m.impl("ipc_point_triangle_distance_gradient", &pt_cpu<1>);
  m.impl("ipc_point_triangle_distance_hessian", &pt_cpu<2>);
  m.impl("ipc_edge_edge_distance", &ee_cpu<0>);
  m.impl("ipc_edge_edge_distance_gradient", &ee_cpu<1>);
  m.impl("ipc_edge_edge_distance_hessian", &ee_cpu<2>);
  m.impl("ipc_edge_edge_mollifier", &moll_cpu<0>);
  m.impl("ipc_edge_edge_mollifier_gradient", &moll_cpu<1>);
  m.impl("ipc_edge_edge_mollifier_hessian", &moll_cpu<2>);
  m.impl("ipc_barrier", &barrier_cpu);
  m.impl("ipc_collision_candidates", &candidates_cpu);
  m.impl("ipc_swept_candidates", &swept_candidates_cpu);
  m.impl("ipc_barrier_potential", &potential_cpu);
  m.impl("ipc_barrier_potential_gradient", &potential_gradient_cpu);
  m.impl("ipc_barrier_potential_hessian", &potential_hessian_cpu);
  m.impl("ipc_friction_potential", &friction_cpu<0>);
  m.impl("ipc_friction_potential_gradient", &friction_cpu<1>);
  m.impl("ipc_friction_potential_hessian", &friction_cpu<2>);
  m.impl("ipc_ccd", &ccd_cpu);
  m.impl("ipc_assemble_hessian", &assemble_hessian_cpu);
}

}  // namespace contactnet
