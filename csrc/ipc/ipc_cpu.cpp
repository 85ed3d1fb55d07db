#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "common/launch_cpu.h"
#include "ipc/cholesky_solve.h"
#include "ipc/ipc_body_trees.h"
#include "ipc/ipc_ops.h"

namespace contactnet {
namespace {

// Grid items in one pass: each task keeps its pairs, concatenated in task order afterwards.
struct CpuCollectingLauncher : CpuLauncher {
  static constexpr bool kCollectsPairs = true;

  template <typename F>
  at::Tensor collect_pairs(const F& f, int64_t items, const at::TensorOptions& opt) const {
    const int64_t tasks = (items + grain - 1) / grain;
    std::vector<std::vector<int64_t>> found(tasks);
    at::parallel_for(0, tasks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        HostPairs sink{&found[t]};
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

// The launchers of ipc_ops.h; grains (indices per task) such that one task does a few
// microseconds of work. Alone, with a device's fused candidate sums (affine_potential.h,
// candidate_sums.h) whose adds run serially here: the GPU's form of those ops, run on the CPU for
// its tests (registered as _<op>_device_form, below).
struct IpcCpuDeviceFormLaunchers {
  static constexpr CpuLauncher cheap{1024};           // distances, barrier, boxes: ~10-100 ns each
  static constexpr CpuLauncher medium{64};  // barrier gradients, friction's factors: ~0.2-0.5 µs each
  static constexpr CpuLauncher heavy{32};             // Hessian + PSD projection, CCD: ~10 µs each
  static constexpr CpuPotentialLauncher hessian{{8}};
  // Grid queries cost ~1-5 µs each; also the grain of the box and grid-entry loops (~50 ns per
  // primitive), so small meshes run inline rather than paying a parallel region per loop.
  static constexpr CpuCollectingLauncher grid{{1024}};
  static constexpr CpuLauncher sweep{64};  // one sweep item scans many boxes
  // body-pair traversals (near contact or not), traversed once: the pairs kept between passes
  static constexpr CpuRecordingLauncher traversal{};
  static constexpr CpuLauncher block{64};  // one 12×12 body block, ~1 µs
  static constexpr CpuSerialLauncher ordered{};
};

// The CPU's: per-candidate arrays evaluated in parallel, then sums by environment or body.
struct IpcCpuLaunchers : IpcCpuDeviceFormLaunchers {
  static constexpr bool kSumsOnHost = true;
};

// The device-form ops: (their name, that of the op whose schema they share, the function).
template <typename F>
void for_each_device_form_op(const F& visit) {
  using Ops = IpcOps<IpcCpuDeviceFormLaunchers>;
  visit("_ipc_affine_potential_device_form", "ipc_affine_potential", &Ops::affine_potential);
  visit("_ipc_affine_potential_derivatives_device_form", "ipc_affine_potential_derivatives",
        &Ops::affine_potential_derivatives);
  visit("_ipc_affine_contact_forces_device_form", "ipc_affine_contact_forces",
        &Ops::affine_contact_forces);
  visit("_ipc_contact_statistics_device_form", "ipc_contact_statistics", &Ops::contact_statistics);
  visit("_ipc_collision_free_steps_device_form", "ipc_collision_free_steps",
        &Ops::collision_free_steps);
}

std::string ipc_schema(const std::string& op) {
  std::string out;
  for_each_ipc_op<IpcCpuLaunchers>([&](const char* name, const char* schema, auto) {
    if (op == name) out = schema;
  });
  return out;
}

using Tensor = at::Tensor;

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
  for_each_ipc_op<IpcCpuLaunchers>([&](const char* name, const char* schema, auto) {
    m.def((std::string(name) + schema).c_str());
  });
  for_each_device_form_op([&](const char* name, const char* like, auto) {
    m.def((std::string(name) + ipc_schema(like)).c_str());
  });
  m.def(
      "ipc_assemble_hessian(Tensor local, Tensor stencils, int num_vertices) -> "
      "(Tensor indices, Tensor values)");
  m.def(
      "ipc_body_trees(Tensor rest_vertices, Tensor faces, Tensor edges, Tensor vertex_body, "
      "int num_bodies) -> (Tensor box, Tensor node, Tensor prim, Tensor root)");
  m.def(
      "ipc_cholesky_solve(Tensor(a!) hessian, Tensor gradient, Tensor shift, Tensor? fixed=None) "
      "-> (Tensor solution, Tensor factorised)");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) {
  for_each_ipc_op<IpcCpuLaunchers>(
      [&](const char* name, const char*, auto fn) { m.impl(name, fn); });
  for_each_device_form_op([&](const char* name, const char*, auto fn) { m.impl(name, fn); });
  m.impl("ipc_assemble_hessian", &assemble_hessian_cpu);
  m.impl("ipc_body_trees", &ipc_body_trees_cpu);
  m.impl("ipc_cholesky_solve", &ipc_cholesky_solve_cpu);
}

}  // namespace contactnet
