#include "mesh_bvh/mesh_bvh.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "common/bvh.h"
#include "common/checks.h"

namespace contactnet {
namespace {

int64_t count_nodes(int64_t n) {
  if (n <= kBvhLeafSize) return 1;
  return 1 + count_nodes(n / 2) + count_nodes(n - n / 2);
}

int64_t tree_depth(int64_t n) {
  if (n <= kBvhLeafSize) return 1;
  return 1 + std::max(tree_depth(n / 2), tree_depth(n - n / 2));
}

// Eigen-decomposition of a symmetric 3x3 matrix by cyclic Jacobi rotations: a = V diag(w) V^T,
// eigenvectors in the columns of v. Build-time only (double), so simplicity beats speed.
void symmetric_eigen3(double a[3][3], double w[3], double v[3][3]) {
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) v[i][j] = i == j ? 1.0 : 0.0;
  for (int sweep = 0; sweep < 50; ++sweep) {
    const double off = a[0][1] * a[0][1] + a[0][2] * a[0][2] + a[1][2] * a[1][2];
    const double diag = a[0][0] * a[0][0] + a[1][1] * a[1][1] + a[2][2] * a[2][2];
    if (!(off > 1e-30 * diag)) break;
    for (int p = 0; p < 2; ++p) {
      for (int q = p + 1; q < 3; ++q) {
        if (a[p][q] == 0.0) continue;
        // Rotation angle zeroing a[p][q] (Numerical Recipes' stable form).
        const double theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1.0));
        const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
        for (int k = 0; k < 3; ++k) {  // a <- a J
          const double akp = a[k][p], akq = a[k][q];
          a[k][p] = c * akp - s * akq;
          a[k][q] = s * akp + c * akq;
        }
        for (int k = 0; k < 3; ++k) {  // a <- J^T a
          const double apk = a[p][k], aqk = a[q][k];
          a[p][k] = c * apk - s * aqk;
          a[q][k] = s * apk + c * aqk;
        }
        for (int k = 0; k < 3; ++k) {  // v <- v J
          const double vkp = v[k][p], vkq = v[k][q];
          v[k][p] = c * vkp - s * vkq;
          v[k][q] = s * vkp + c * vkq;
        }
      }
    }
  }
  for (int i = 0; i < 3; ++i) w[i] = a[i][i];
}

template <typename T>
struct Builder {
  const T* tri;           // (F, 3, 3) this mesh's triangles in input order
  const Vec3<T>* centroid;
  int32_t* order;         // permutation being sorted
  BvhNode* nodes;         // this mesh's node rows
  T* dipoles;
  std::vector<double> key;  // split keys, indexed by triangle

  // Chooses the node's box axes and centre (as fcl / RAPID do: axes from the covariance of the
  // node's triangle vertices, largest spread first; centre mid-way along each axis) and returns
  // the major axis, along which the node is split. Half extents come later (fit_half_extents).
  Vec3<double> place_obb(int64_t node, int64_t begin, int64_t end) {
    double mean[3] = {0, 0, 0}, cov[3][3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
    const double count = 3.0 * static_cast<double>(end - begin);
    for (int64_t i = begin; i < end; ++i)
      for (int k = 0; k < 9; ++k) mean[k % 3] += tri[9 * order[i] + k];
    for (double& m : mean) m /= count;
    for (int64_t i = begin; i < end; ++i) {
      for (int k = 0; k < 3; ++k) {
        const T* v = tri + 9 * order[i] + 3 * k;
        const double d[3] = {v[0] - mean[0], v[1] - mean[1], v[2] - mean[2]};
        for (int r = 0; r < 3; ++r)
          for (int c = 0; c < 3; ++c) cov[r][c] += d[r] * d[c];
      }
    }
    double w[3], vec[3][3];
    symmetric_eigen3(cov, w, vec);
    int idx[3] = {0, 1, 2};
    std::sort(idx, idx + 3, [&w](int x, int y) { return w[x] > w[y]; });
    double ax[3][3];
    for (int k = 0; k < 2; ++k)
      for (int r = 0; r < 3; ++r) ax[k][r] = vec[r][idx[k]];
    // Right-handed: third axis = first x second.
    ax[2][0] = ax[0][1] * ax[1][2] - ax[0][2] * ax[1][1];
    ax[2][1] = ax[0][2] * ax[1][0] - ax[0][0] * ax[1][2];
    ax[2][2] = ax[0][0] * ax[1][1] - ax[0][1] * ax[1][0];
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int64_t i = begin; i < end; ++i)
      for (int k = 0; k < 3; ++k) {
        const T* v = tri + 9 * order[i] + 3 * k;
        for (int a = 0; a < 3; ++a) {
          const double s = ax[a][0] * v[0] + ax[a][1] * v[1] + ax[a][2] * v[2];
          lo[a] = std::min(lo[a], s);
          hi[a] = std::max(hi[a], s);
        }
      }
    float* out = nodes[node].box;
    for (int r = 0; r < 3; ++r) {
      double centre = 0.0;
      for (int a = 0; a < 3; ++a) {
        out[3 * a + r] = static_cast<float>(ax[a][r]);
        centre += ax[a][r] * 0.5 * (lo[a] + hi[a]);
      }
      out[9 + r] = static_cast<float>(centre);
    }
    return {ax[0][0], ax[0][1], ax[0][2]};
  }

  // Half extents of a placed box, fitted in double around its axes and centre AS STORED in
  // float32 (read back from the node, after the whole tree is placed: computing them from the
  // double values that were rounded into the node let GCC 12 -O3 mix rounded and unrounded
  // copies, and boxes missed their triangles by ~1e-9), then rounded up: the box contains the
  // triangles as stored.
  void fit_half_extents(int64_t node, int64_t begin, int64_t end) {
    float* box = nodes[node].box;
    double axes[3][3], centre[3];
    for (int k = 0; k < 9; ++k) axes[k / 3][k % 3] = box[k];
    for (int r = 0; r < 3; ++r) centre[r] = box[9 + r];
    double half[3] = {0, 0, 0};
    for (int64_t i = begin; i < end; ++i)
      for (int k = 0; k < 3; ++k) {
        const T* v = tri + 9 * order[i] + 3 * k;
        for (int a = 0; a < 3; ++a) {
          const double s = axes[a][0] * (v[0] - centre[0]) + axes[a][1] * (v[1] - centre[1]) +
                           axes[a][2] * (v[2] - centre[2]);
          half[a] = std::max(half[a], std::abs(s));
        }
      }
    for (int a = 0; a < 3; ++a) {
      const double grown = half[a] * (1.0 + 4.0 * std::numeric_limits<float>::epsilon());
      float h = static_cast<float>(grown);
      if (static_cast<double>(h) < grown)
        h = std::nextafter(h, std::numeric_limits<float>::infinity());
      box[12 + a] = h;
    }
  }

  // Dipole of the node for the fast winding number: area vector, area-weighted centre, radius.
  void fill_dipole(int64_t node, int64_t begin, int64_t end) {
    Vec3<T> lo = load3(tri + 9 * order[begin]), hi = lo;
    Vec3<T> area = make_vec3(T(0), T(0), T(0)), centre = area;
    T total = T(0);
    for (int64_t i = begin; i < end; ++i) {
      Vec3<T> v[3];
      load_tri(tri, order[i], v);
      for (int k = 0; k < 3; ++k) {
        lo = {std::min(lo.x, v[k].x), std::min(lo.y, v[k].y), std::min(lo.z, v[k].z)};
        hi = {std::max(hi.x, v[k].x), std::max(hi.y, v[k].y), std::max(hi.z, v[k].z)};
      }
      const Vec3<T> a = T(0.5) * cross(v[1] - v[0], v[2] - v[0]);
      const T w = norm(a);
      area = area + a;
      centre = centre + w * centroid[order[i]];
      total += w;
    }
    centre = total > T(0) ? (T(1) / total) * centre : T(0.5) * (lo + hi);
    T radius = T(0);
    for (int64_t i = begin; i < end; ++i) {
      Vec3<T> v[3];
      load_tri(tri, order[i], v);
      for (int k = 0; k < 3; ++k) radius = std::max(radius, norm(v[k] - centre));
    }
    store3(dipoles + 7 * node, area);
    store3(dipoles + 7 * node + 3, centre);
    dipoles[7 * node + 6] = radius;
  }

  // Pre-order walk of a built subtree (the same ranges build() split into).
  void fit_all_half_extents(int64_t node, int64_t begin, int64_t end) {
    fit_half_extents(node, begin, end);
    const int32_t link = nodes[node].link;
    if (is_leaf(link)) return;
    const int64_t mid = begin + (end - begin) / 2;
    fit_all_half_extents(node + 1, begin, mid);
    fit_all_half_extents(link, mid, end);
  }

  void build(int64_t node, int64_t begin, int64_t end) {
    const Vec3<double> major = place_obb(node, begin, end);
    fill_dipole(node, begin, end);
    const int64_t n = end - begin;
    if (n <= kBvhLeafSize) {
      nodes[node].link = leaf_link(begin, n);
      return;
    }
    // Median split of the centroids along the box's major axis (ties by index, so the build is
    // deterministic).
    for (int64_t i = begin; i < end; ++i) {
      const Vec3<T> c = centroid[order[i]];
      key[order[i]] = major.x * c.x + major.y * c.y + major.z * c.z;
    }
    const int64_t mid = begin + n / 2;
    const double* k = key.data();
    std::nth_element(order + begin, order + mid, order + end, [k](int32_t a, int32_t b) {
      return k[a] < k[b] || (k[a] == k[b] && a < b);
    });
    const int64_t left = node + 1;
    const int64_t right = left + count_nodes(n / 2);
    nodes[node].link = static_cast<int32_t>(right);
    build(left, begin, mid);
    build(right, mid, end);
  }
};

template <typename T>
void build_all(const at::Tensor& vertices, const at::Tensor& faces, const int64_t* voff,
               const int64_t* foff, int64_t num_meshes, const int64_t* noff, at::Tensor& tris,
               at::Tensor& tri_ids, at::Tensor& nodes, at::Tensor& dipoles) {
  const T* V = vertices.data_ptr<T>();
  const int64_t* Fc = faces.data_ptr<int64_t>();
  T* out_tris = tris.data_ptr<T>();
  int32_t* out_ids = tri_ids.data_ptr<int32_t>();
  at::parallel_for(0, num_meshes, 1, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const int64_t f0 = foff[m], nf = foff[m + 1] - foff[m];
      const T* mv = V + 3 * voff[m];
      std::vector<T> tri(9 * nf);
      std::vector<Vec3<T>> centroid(nf);
      for (int64_t i = 0; i < nf; ++i) {
        for (int k = 0; k < 3; ++k) {
          const Vec3<T> v = load3(mv + 3 * Fc[3 * (f0 + i) + k]);
          store3(tri.data() + 9 * i + 3 * k, v);
        }
        centroid[i] = (T(1) / T(3)) * (load3(tri.data() + 9 * i) + load3(tri.data() + 9 * i + 3) +
                                       load3(tri.data() + 9 * i + 6));
      }
      std::vector<int32_t> order(nf);
      std::iota(order.begin(), order.end(), 0);
      Builder<T> b{tri.data(),
                   centroid.data(),
                   order.data(),
                   reinterpret_cast<BvhNode*>(nodes.data_ptr<int32_t>()) + noff[m],
                   dipoles.data_ptr<T>() + 7 * noff[m],
                   std::vector<double>(nf)};
      b.build(0, 0, nf);
      b.fit_all_half_extents(0, 0, nf);
      for (int64_t i = 0; i < nf; ++i) {
        std::copy(tri.data() + 9 * order[i], tri.data() + 9 * order[i] + 9,
                  out_tris + 9 * (f0 + i));
        out_ids[f0 + i] = order[i];
      }
    }
  });
}

}  // namespace

BuildMeshBvhOut build_mesh_bvh_cpu(const at::Tensor& vertices, const at::Tensor& faces,
                                   const at::Tensor& vertex_offsets,
                                   const at::Tensor& face_offsets) {
  check_float_input(vertices, "vertices", {-1, 3});
  check_input(faces, "faces", {-1, 3});
  check_input(vertex_offsets, "vertex_offsets", {-1});
  check_input(face_offsets, "face_offsets", {-1});
  TORCH_CHECK(faces.scalar_type() == at::kLong, "faces: expected int64");
  TORCH_CHECK(vertex_offsets.scalar_type() == at::kLong && face_offsets.scalar_type() == at::kLong,
              "vertex_offsets, face_offsets: expected int64");
  TORCH_CHECK(vertex_offsets.size(0) == face_offsets.size(0) && face_offsets.size(0) >= 1,
              "vertex_offsets and face_offsets: expected the same length M + 1 >= 1");
  const int64_t num_meshes = face_offsets.size(0) - 1;
  const int64_t* voff = vertex_offsets.data_ptr<int64_t>();
  const int64_t* foff = face_offsets.data_ptr<int64_t>();
  const int64_t* F = faces.data_ptr<int64_t>();
  TORCH_CHECK(foff[0] == 0 && voff[0] == 0, "offsets must start at 0");
  TORCH_CHECK(foff[num_meshes] == faces.size(0) && voff[num_meshes] == vertices.size(0),
              "offsets must end at the number of faces / vertices");
  TORCH_CHECK(faces.size(0) < (int64_t(1) << 31), "build_mesh_bvh: at most 2^31 - 1 faces");
  std::vector<int64_t> noff(num_meshes + 1, 0);
  for (int64_t m = 0; m < num_meshes; ++m) {
    const int64_t nf = foff[m + 1] - foff[m], nv = voff[m + 1] - voff[m];
    TORCH_CHECK(nf >= 1, "build_mesh_bvh: mesh ", m, " has no faces");
    TORCH_CHECK(nf <= (int64_t(1) << (31 - kLeafCountBits)), "build_mesh_bvh: mesh ", m, " has ",
                nf, " faces, more than the 2^", 31 - kLeafCountBits, " a leaf link can address");
    TORCH_CHECK(tree_depth(nf) <= kBvhMaxDepth, "build_mesh_bvh: mesh ", m, " too large");
    for (int64_t i = 3 * foff[m]; i < 3 * foff[m + 1]; ++i)
      TORCH_CHECK(F[i] >= 0 && F[i] < nv, "build_mesh_bvh: mesh ", m,
                  " has a face index out of range [0, ", nv, ")");
    noff[m + 1] = noff[m] + count_nodes(nf);
  }
  const int64_t nodes = noff[num_meshes];
  const auto opt = vertices.options();
  at::Tensor tris = at::empty({faces.size(0), 3, 3}, opt);
  at::Tensor tri_ids = at::empty({faces.size(0)}, opt.dtype(at::kInt));
  at::Tensor node_rows = at::empty({nodes, kNodeWords}, opt.dtype(at::kInt));
  at::Tensor dipoles = at::empty({nodes, 7}, opt);
  at::Tensor node_offsets = at::empty({num_meshes + 1}, opt.dtype(at::kLong));
  std::copy(noff.begin(), noff.end(), node_offsets.data_ptr<int64_t>());
  AT_DISPATCH_FLOATING_TYPES(vertices.scalar_type(), "build_mesh_bvh", [&] {
    build_all<scalar_t>(vertices, faces, voff, foff, num_meshes, noff.data(), tris, tri_ids,
                        node_rows, dipoles);
  });
  return {tris, tri_ids, node_rows, dipoles, node_offsets};
}

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def(
      "build_mesh_bvh(Tensor vertices, Tensor faces, Tensor vertex_offsets, Tensor face_offsets) "
      "-> (Tensor tris, Tensor tri_ids, Tensor nodes, Tensor dipoles, Tensor node_offsets)");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) { m.impl("build_mesh_bvh", &build_mesh_bvh_cpu); }

}  // namespace contactnet
