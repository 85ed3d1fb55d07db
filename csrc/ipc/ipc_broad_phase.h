// Broad phases of the IPC candidate searches, side by side: per-primitive boxes and the exact
// pair filter they share, then the two ways of finding overlapping boxes.
//   - Uniform grid (GridEntryFunctor, GridFunctor): boxes entered in the cells they overlap; the
//     grid is sized from values read on the host. Variable-size pair lists
//     (ipc_collision_candidates, ipc_swept_candidates).
//   - Sort-and-sweep (SweepFunctor): boxes sorted along one axis, each scanning the partners whose
//     lower bound falls inside it; its memory is fixed by the input sizes, so no host read.
//     Fixed-capacity pair lists (ipc_*_candidates_padded), CUDA-graph capturable.
// Both report every overlapping pair exactly once and pass it through CandidatePairFilter, so
// they find the same pairs. (A third, for affine bodies, traverses per-body rest-frame trees and
// ends in the same primitive_box / boxes_overlap / CandidatePairFilter test:
// ipc_body_broad_phase.h.) Per-index functors: the same code runs in the CPU loop and as the body
// of the CUDA kernel; the host drivers are in ipc_candidates.h.
#pragma once

#include <cstdint>

#include "common/barrier.h"
#include "common/ipc_distance.h"

namespace contactnet {

// ---------------------------------------------------------------------------------------------
// Box (lo, hi) of primitive i: it covers the primitive at v0 and (when given) v1, inflated by
// `inflate` on every side. Two boxes inflated by r/2 each overlap whenever their primitives are
// closer than r. prim: (n, nv) vertex ids, or null (primitive i is vertex i). Every broad phase
// (grid, sweep, body trees) computes its boxes here, so all of them apply the same test.
template <typename T>
CN_HD void primitive_box(const T* v0, const T* v1, const int64_t* prim, int nv, int64_t i,
                         T inflate, T box[6]) {
  T lo[3], hi[3];
  for (int c = 0; c < 3; ++c) {
    lo[c] = inf_value<T>();
    hi[c] = -inf_value<T>();
  }
  const int count = prim ? nv : 1;
  for (int k = 0; k < count; ++k) {
    const int64_t v = prim ? prim[nv * i + k] : i;
    for (int t = 0; t < (v1 ? 2 : 1); ++t) {
      const T* p = (t == 0 ? v0 : v1) + 3 * v;
      for (int c = 0; c < 3; ++c) {
        lo[c] = p[c] < lo[c] ? p[c] : lo[c];
        hi[c] = p[c] > hi[c] ? p[c] : hi[c];
      }
    }
  }
  for (int c = 0; c < 3; ++c) {
    box[c] = lo[c] - inflate;
    box[3 + c] = hi[c] + inflate;
  }
}

// Boxes (n, 6) of primitive_box for every primitive.
template <typename T>
struct PrimitiveBoxFunctor {
  const T* v0;
  const T* v1;  // null for a static query
  const int64_t* prim;  // (n, nv) vertex ids, or null: primitive i is vertex i
  int nv;
  T inflate;
  T* box;  // (n, 6)

  CN_HD void operator()(int64_t i) const { primitive_box(v0, v1, prim, nv, i, inflate, box + 6 * i); }
};

template <typename T>
CN_HD bool boxes_overlap(const T* a, const T* b) {
  for (int c = 0; c < 3; ++c)
    if (a[c] > b[3 + c] || b[c] > a[3 + c]) return false;
  return true;
}

// First index in the ascending array a[0, n) whose value is ≥ x (with `above`: > x).
template <typename T>
CN_HD int64_t lower_index(const T* a, int64_t n, T x, bool above = false) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (above ? !(a[mid] > x) : a[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// ---------------------------------------------------------------------------------------------
// Narrow filter of the broad phase, for vertex a vs face b, or edge a vs edge b (self): drops pairs
// sharing a vertex; pairs in one body (when body != null; a primitive belongs to the body of its
// first vertex); and, when dhat2 > 0, pairs whose squared distance is not < dhat2.
// Whether the pair of stencil id (2 | 2 vertices per side when is_ee, else 1 | 3) may come
// closer than `reach` on the linear motion v0 → v1 (v1 null: d² < reach2 at v0): the test of
// prune_candidates (PruneFunctor in ipc_kernels.h, which documents it).
template <typename T>
CN_HD bool pair_may_come_within(const T* v0, const T* v1, const int64_t id[4], bool is_ee, T reach,
                                T reach2) {
  const int split = is_ee ? 2 : 1;  // stencil vertices [0, split) are side a
  Vec3<T> v[4];
  for (int k = 0; k < 4; ++k) v[k] = load3(v0 + 3 * id[k]);
  // δ² per side for s = 0 and s = Δ₀ (the root of the largest square: one sqrt per side and
  // kind).
  T moved2[2] = {T(0), T(0)}, relative2[2] = {T(0), T(0)};
  T shared[3] = {T(0), T(0), T(0)};
  for (int k = 0; v1 && k < 4; ++k) {
    const Vec3<T> u = load3(v1 + 3 * id[k]);
    const T dx = u.x - v[k].x, dy = u.y - v[k].y, dz = u.z - v[k].z;
    if (k == 0) shared[0] = dx, shared[1] = dy, shared[2] = dz;
    const T rx = dx - shared[0], ry = dy - shared[1], rz = dz - shared[2];
    const T m2 = dx * dx + dy * dy + dz * dz, r2 = rx * rx + ry * ry + rz * rz;
    T& side = moved2[k < split ? 0 : 1];
    side = m2 > side ? m2 : side;
    T& rel = relative2[k < split ? 0 : 1];
    rel = r2 > rel ? r2 : rel;
  }
  const T absolute_bound = sqrt(moved2[0]) + sqrt(moved2[1]);
  const T relative_bound = sqrt(relative2[0]) + sqrt(relative2[1]);
  const T bound = relative_bound < absolute_bound ? relative_bound : absolute_bound;
  // The gap between the two sides' boxes bounds their distance from below: most pairs of a
  // Verlet list are dropped by it, before the exact distance (same verdicts, with 1e-12 to
  // spare for the box's own rounding).
  const T limit = v1 ? (reach + bound) * (T(1) + T(1e-9)) : reach;
  T gap2 = T(0);
  for (int c = 0; c < 3; ++c) {
    T lo[2] = {inf_value<T>(), inf_value<T>()}, hi[2] = {-inf_value<T>(), -inf_value<T>()};
    for (int k = 0; k < 4; ++k) {
      const T x = c == 0 ? v[k].x : (c == 1 ? v[k].y : v[k].z);
      const int side = k < split ? 0 : 1;
      lo[side] = x < lo[side] ? x : lo[side];
      hi[side] = x > hi[side] ? x : hi[side];
    }
    const T g = lo[1] - hi[0] > lo[0] - hi[1] ? lo[1] - hi[0] : lo[0] - hi[1];
    if (g > T(0)) gap2 += g * g;
  }
  if (gap2 > limit * limit * (T(1) + T(1e-12))) return false;
  T* const none = nullptr;
  const T d2 = is_ee ? edge_edge_distance(v[0], v[1], v[2], v[3], none, none,
                                          edge_edge_distance_type(v[0], v[1], v[2], v[3]))
                     : point_triangle_distance(v[0], v[1], v[2], v[3], none, none,
                                               point_triangle_distance_type(v[0], v[1], v[2], v[3]));
  if (!v1) return d2 < reach2;
  const T d = sqrt(d2 > T(0) ? d2 : T(0));
  return d < limit;
}

template <typename T>
struct CandidatePairFilter {
  bool self;  // edge–edge within one set
  const T* vertices;
  const int64_t* faces;
  const int64_t* edges;
  const int64_t* body;  // (V,) or null
  T dhat2;              // > 0: keep only pairs with d² < dhat2
  // prune_reach >= 0: keep only pairs that may come within it on vertices → vertices1
  // (pair_may_come_within; vertices1 null: at vertices)
  const T* vertices1 = nullptr;
  T prune_reach = T(-1), prune_reach2 = T(-1);

  CN_HD bool keep(int64_t a, int64_t b) const {
    int64_t id[4];
    if (self) {
      id[0] = edges[2 * a];
      id[1] = edges[2 * a + 1];
      id[2] = edges[2 * b];
      id[3] = edges[2 * b + 1];
      if (id[0] == id[2] || id[0] == id[3] || id[1] == id[2] || id[1] == id[3]) return false;
    } else {
      id[0] = a;
      id[1] = faces[3 * b];
      id[2] = faces[3 * b + 1];
      id[3] = faces[3 * b + 2];
      if (id[0] == id[1] || id[0] == id[2] || id[0] == id[3]) return false;
    }
    if (body && body[id[0]] == body[self ? id[2] : id[1]]) return false;
    if (dhat2 > T(0)) {
      Vec3<T> v[4];
      for (int k = 0; k < 4; ++k) v[k] = load3(vertices + 3 * id[k]);
      const T d = self ? edge_edge_distance(v[0], v[1], v[2], v[3])
                       : point_triangle_distance(v[0], v[1], v[2], v[3]);
      if (!(d < dhat2)) return false;
    }
    if (prune_reach >= T(0) &&
        !pair_may_come_within(vertices, vertices1, id, self, prune_reach, prune_reach2))
      return false;
    return true;
  }

  // Passes a kept pair to sink(a, b), self pairs as a < b.
  template <typename Sink>
  CN_HD void take(int64_t a, int64_t b, Sink& sink) const {
    if (!keep(a, b)) return;
    if (self && a > b) {
      const int64_t t = a;
      a = b;
      b = t;
    }
    sink(a, b);
  }
};

// ---------------------------------------------------------------------------------------------
// Uniform grid. Cell (x, y, z) covers origin + cell·[x, x+1) × … ; its linear id is
// x + dims[0] (y + dims[1] z). Coordinates are clamped into the grid, so entries and queries agree
// on every box's cell range.
template <typename T>
struct UniformGrid {
  T origin[3];
  T inv_cell;
  int64_t dims[3];

  CN_HD int64_t coord(T x, int c) const {
    const T f = (x - origin[c]) * inv_cell;
    const int64_t k = f > T(0) ? static_cast<int64_t>(f) : 0;
    return k < dims[c] ? k : dims[c] - 1;
  }
  CN_HD void range(const T* box, int64_t lo[3], int64_t hi[3]) const {
    for (int c = 0; c < 3; ++c) {
      lo[c] = coord(box[c], c);
      hi[c] = coord(box[3 + c], c);
    }
  }
  CN_HD int64_t id(int64_t x, int64_t y, int64_t z) const {
    return x + dims[0] * (y + dims[1] * z);
  }
};

// Grid entries of boxes: pass 1 (keys == null) counts the cells each box overlaps, pass 2 writes
// (cell id, box id) at offset[i].
template <typename T>
struct GridEntryFunctor {
  UniformGrid<T> grid;
  const T* box;  // (n, 6)
  const int64_t* offset;
  int64_t* count;
  int64_t* keys;
  int64_t* items;

  CN_HD void operator()(int64_t i) const {
    int64_t lo[3], hi[3];
    grid.range(box + 6 * i, lo, hi);
    if (!keys) {
      count[i] = (hi[0] - lo[0] + 1) * (hi[1] - lo[1] + 1) * (hi[2] - lo[2] + 1);
      return;
    }
    int64_t o = offset[i];
    for (int64_t z = lo[2]; z <= hi[2]; ++z)
      for (int64_t y = lo[1]; y <= hi[1]; ++y)
        for (int64_t x = lo[0]; x <= hi[0]; ++x) {
          keys[o] = grid.id(x, y, z);
          items[o++] = i;
        }
  }
};

// Pairs of overlapping boxes between queries A (vertices) and the gridded set B (faces), or
// within the gridded set of edges (self: A = B, pairs a < b). Item i queries the cells of box a_i;
// a pair is reported only from the cell holding the corner max(lo_a, lo_b) of the two boxes'
// intersection, so exactly once, then passes CandidatePairFilter. Pass 1 (out == null) counts per
// item, pass 2 writes at offset[i]; a host launcher may instead collect visit()'s pairs directly.
template <typename T>
struct GridFunctor {
  CandidatePairFilter<T> filter;
  UniformGrid<T> grid;
  const T* box_a;         // (na, 6) query boxes, original order
  const T* box_b;         // (nb, 6) gridded boxes, original order
  const int64_t* keys;    // (m,) cell ids of the grid entries, ascending
  const int64_t* items;   // (m,) box of each entry (ascending within a cell)
  int64_t m;
  const int64_t* offset;
  int64_t* count;  // pass 1
  int64_t* out;    // pass 2: (total, 2)

  template <typename Sink>
  CN_HD void visit(int64_t i, Sink& sink) const {
    const T* ba = box_a + 6 * i;
    int64_t lo[3], hi[3];
    grid.range(ba, lo, hi);
    for (int64_t z = lo[2]; z <= hi[2]; ++z)
      for (int64_t y = lo[1]; y <= hi[1]; ++y)
        for (int64_t x = lo[0]; x <= hi[0]; ++x) {
          const int64_t key = grid.id(x, y, z);
          const int64_t cell[3] = {x, y, z};
          for (int64_t j = lower_index(keys, m, key); j < m && keys[j] == key; ++j) {
            const int64_t b = items[j];
            if (filter.self && b <= i) continue;
            const T* bb = box_b + 6 * b;
            if (!boxes_overlap(ba, bb)) continue;
            bool here = true;
            for (int c = 0; c < 3 && here; ++c)
              here = grid.coord(ba[c] > bb[c] ? ba[c] : bb[c], c) == cell[c];
            if (here) filter.take(i, b, sink);
          }
        }
  }

  struct CountOrWrite {
    int64_t* out;
    int64_t n;
    CN_HD void operator()(int64_t a, int64_t b) {
      if (out) {
        out[2 * n] = a;
        out[2 * n + 1] = b;
      }
      ++n;
    }
  };

  CN_HD void operator()(int64_t i) const {
    CountOrWrite sink{out ? out + 2 * offset[i] : nullptr, 0};
    visit(i, sink);
    if (count) count[i] = sink.n;
  }
};

// ---------------------------------------------------------------------------------------------
// Sort-and-sweep over boxes sorted by lo along column 0 (the sweep axis): item i enumerates the
// partners of one box, each overlapping pair exactly once (by the member whose lower bound comes
// first), between sets A (vertices) and B (faces), or within one set (edges, filter.self). Pass 1
// (out == null) counts per item; pass 2 writes at offset[i] the pairs whose row is < capacity.
template <typename T>
struct SweepFunctor {
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

  CN_HD void operator()(int64_t i) const {
    CappedWrite sink{out, out ? offset[i] : 0, capacity, 0};
    if (filter.self) {
      const T* bi = box_a + 6 * i;
      for (int64_t j = i + 1; j < na && !(key_a[j] > bi[3]); ++j)
        if (boxes_overlap(bi, box_a + 6 * j)) filter.take(id_a[i], id_a[j], sink);
    } else if (i < na) {
      // B boxes whose lower bound lies in [lo_a, hi_a].
      const T* ba = box_a + 6 * i;
      for (int64_t j = lower_index(key_b, nb, ba[0]); j < nb && !(key_b[j] > ba[3]); ++j)
        if (boxes_overlap(ba, box_b + 6 * j)) filter.take(id_a[i], id_b[j], sink);
    } else {
      // A boxes whose lower bound lies in (lo_b, hi_b].
      const int64_t k = i - na;
      const T* bb = box_b + 6 * k;
      for (int64_t j = lower_index(key_a, na, bb[0], /*above=*/true);
           j < na && !(key_a[j] > bb[3]); ++j)
        if (boxes_overlap(box_a + 6 * j, bb)) filter.take(id_a[j], id_b[k], sink);
    }
    if (count) count[i] = sink.n;
  }
};

}  // namespace contactnet
