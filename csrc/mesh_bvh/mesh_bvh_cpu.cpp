#include "mesh_bvh/mesh_bvh.h"

#include <algorithm>
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

template <typename T>
struct Builder {
  const T* tri;           // (F, 3, 3) this mesh's triangles in input order
  const Vec3<T>* centroid;
  int32_t* order;         // permutation being sorted
  T* boxes;               // this mesh's node rows
  int32_t* children;
  T* dipoles;

  void fill_node(int64_t node, int64_t begin, int64_t end) {
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
    store3(boxes + 6 * node, lo);
    store3(boxes + 6 * node + 3, hi);
    store3(dipoles + 7 * node, area);
    store3(dipoles + 7 * node + 3, centre);
    dipoles[7 * node + 6] = radius;
  }

  void build(int64_t node, int64_t begin, int64_t end) {
    fill_node(node, begin, end);
    const int64_t n = end - begin;
    if (n <= kBvhLeafSize) {
      children[2 * node] = static_cast<int32_t>(-1 - begin);
      children[2 * node + 1] = static_cast<int32_t>(n);
      return;
    }
    Vec3<T> lo = centroid[order[begin]], hi = lo;
    for (int64_t i = begin + 1; i < end; ++i) {
      const Vec3<T> c = centroid[order[i]];
      lo = {std::min(lo.x, c.x), std::min(lo.y, c.y), std::min(lo.z, c.z)};
      hi = {std::max(hi.x, c.x), std::max(hi.y, c.y), std::max(hi.z, c.z)};
    }
    const Vec3<T> ext = hi - lo;
    const int axis = ext.x >= ext.y && ext.x >= ext.z ? 0 : (ext.y >= ext.z ? 1 : 2);
    const int64_t mid = begin + n / 2;
    const Vec3<T>* cen = centroid;
    std::nth_element(order + begin, order + mid, order + end, [cen, axis](int32_t a, int32_t b) {
      const T ca = axis == 0 ? cen[a].x : (axis == 1 ? cen[a].y : cen[a].z);
      const T cb = axis == 0 ? cen[b].x : (axis == 1 ? cen[b].y : cen[b].z);
      return ca < cb || (ca == cb && a < b);
    });
    const int64_t left = node + 1;
    const int64_t right = left + count_nodes(n / 2);
    children[2 * node] = static_cast<int32_t>(left);
    children[2 * node + 1] = static_cast<int32_t>(right);
    build(left, begin, mid);
    build(right, mid, end);
  }
};

template <typename T>
void build_all(const at::Tensor& vertices, const at::Tensor& faces, const int64_t* voff,
               const int64_t* foff, int64_t num_meshes, const int64_t* noff, at::Tensor& tris,
               at::Tensor& tri_ids, at::Tensor& boxes, at::Tensor& children, at::Tensor& dipoles) {
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
                   boxes.data_ptr<T>() + 6 * noff[m],
                   children.data_ptr<int32_t>() + 2 * noff[m],
                   dipoles.data_ptr<T>() + 7 * noff[m]};
      b.build(0, 0, nf);
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
  at::Tensor boxes = at::empty({nodes, 2, 3}, opt);
  at::Tensor children = at::empty({nodes, 2}, opt.dtype(at::kInt));
  at::Tensor dipoles = at::empty({nodes, 7}, opt);
  at::Tensor node_offsets = at::empty({num_meshes + 1}, opt.dtype(at::kLong));
  std::copy(noff.begin(), noff.end(), node_offsets.data_ptr<int64_t>());
  AT_DISPATCH_FLOATING_TYPES(vertices.scalar_type(), "build_mesh_bvh", [&] {
    build_all<scalar_t>(vertices, faces, voff, foff, num_meshes, noff.data(), tris, tri_ids, boxes,
                        children, dipoles);
  });
  return {tris, tri_ids, boxes, children, dipoles, node_offsets};
}

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def(
      "build_mesh_bvh(Tensor vertices, Tensor faces, Tensor vertex_offsets, Tensor face_offsets) "
      "-> (Tensor tris, Tensor tri_ids, Tensor boxes, Tensor children, Tensor dipoles, "
      "Tensor node_offsets)");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) { m.impl("build_mesh_bvh", &build_mesh_bvh_cpu); }

}  // namespace contactnet
