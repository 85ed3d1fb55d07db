// The IPC ops as one list, for both devices: every op's name, schema and implementation, the
// implementation parameterised by a device's launchers. ipc_cpu.cpp defines the schemas from this
// list and registers it for the CPU, ipc_cuda.cu registers the same list for CUDA, so the two
// devices cannot register different op sets. (ipc_assemble_hessian, a CPU-only helper, is
// defined and registered in ipc_cpu.cpp alone; see ipc.h. So is the body-level search's tree
// build, ipc_body_trees: ipc_body_trees.h.)
//
// Launchers L: a struct of static launchers, one per cost class of per-index work:
//   L::cheap    distances, barrier, potential values and gradients, friction values and gradients
//   L::heavy    friction Hessians, CCD (~10 µs per candidate)
//   L::hessian  projected barrier Hessians (a host launcher may share features, see ipc.h)
//   L::grid     the uniform-grid broad phase (a host launcher may collect pairs in one pass)
//   L::sweep    the sort-and-sweep broad phase
//   L::traversal the body-level search's traversal parts (very uneven: near contact or not)
//   L::block    one 12×12 body block per index (the fused body-pair chain rule)
//   L::ordered  indices that add into shared rows: in order on the host (deterministic sums),
//               atomic on a device
#pragma once

#include <cstring>
#include <optional>
#include <string>
#include <tuple>

#include <ATen/core/Tensor.h>

#include "ipc/affine_potential.h"
#include "ipc/body_derivatives.h"
#include "ipc/ipc.h"
#include "ipc/ipc_body_search.h"
#include "ipc/ipc_candidates.h"
#include "ipc/newton_steps.h"

namespace contactnet {

template <typename L>
struct IpcOps {
  using Tensor = at::Tensor;
  using OptTensor = std::optional<at::Tensor>;

  template <int Order>
  static Tensor point_point(const Tensor& p, const Tensor& q) {
    return ipc_distance_impl(kIpcPointPoint, Order, {p, q}, nullptr, L::cheap);
  }
  template <int Order>
  static Tensor point_edge(const Tensor& p, const Tensor& e0, const Tensor& e1) {
    return ipc_distance_impl(kIpcPointEdge, Order, {p, e0, e1}, nullptr, L::cheap);
  }
  template <int Order>
  static Tensor point_triangle(const Tensor& p, const Tensor& t0, const Tensor& t1,
                               const Tensor& t2) {
    return ipc_distance_impl(kIpcPointTriangle, Order, {p, t0, t1, t2}, nullptr, L::cheap);
  }
  template <int Order>
  static Tensor edge_edge(const Tensor& a0, const Tensor& a1, const Tensor& b0, const Tensor& b1) {
    return ipc_distance_impl(kIpcEdgeEdge, Order, {a0, a1, b0, b1}, nullptr, L::cheap);
  }
  template <int Order>
  static Tensor mollifier(const Tensor& a0, const Tensor& a1, const Tensor& b0, const Tensor& b1,
                          const Tensor& eps_x) {
    return ipc_distance_impl(kIpcMollifier, Order, {a0, a1, b0, b1}, &eps_x, L::cheap);
  }

  static std::tuple<Tensor, Tensor, Tensor> barrier(const Tensor& d2, double dhat) {
    return ipc_barrier_impl(d2, dhat, L::cheap);
  }

  static std::tuple<Tensor, Tensor> collision_candidates(const Tensor& vertices,
                                                         const Tensor& faces, const Tensor& edges,
                                                         const OptTensor& vertex_body,
                                                         double dhat) {
    return ipc_collision_candidates_impl(vertices, faces, edges, vertex_body, dhat, L::grid);
  }
  static std::tuple<Tensor, Tensor> swept_candidates(const Tensor& v0, const Tensor& v1,
                                                     const Tensor& faces, const Tensor& edges,
                                                     const OptTensor& vertex_body,
                                                     double min_distance) {
    return ipc_swept_candidates_impl(v0, v1, faces, edges, vertex_body, min_distance, L::grid);
  }
  static std::tuple<Tensor, Tensor, Tensor> collision_candidates_padded(
      const Tensor& vertices, const Tensor& faces, const Tensor& edges,
      const OptTensor& vertex_body, double dhat, int64_t capacity,
      const OptTensor& vertex_active, const OptTensor& face_active,
      const OptTensor& edge_active) {
    return ipc_collision_candidates_padded_impl(vertices, faces, edges, vertex_body, dhat,
                                                capacity, vertex_active, face_active, edge_active,
                                                L::sweep);
  }
  static std::tuple<Tensor, Tensor, Tensor> swept_candidates_padded(
      const Tensor& v0, const Tensor& v1, const Tensor& faces, const Tensor& edges,
      const OptTensor& vertex_body, double min_distance, int64_t capacity,
      const OptTensor& vertex_active, const OptTensor& face_active,
      const OptTensor& edge_active) {
    return ipc_swept_candidates_padded_impl(v0, v1, faces, edges, vertex_body, min_distance,
                                            capacity, vertex_active, face_active, edge_active,
                                            L::sweep);
  }
  static std::tuple<Tensor, Tensor, Tensor> body_candidates(
      const Tensor& v0, const OptTensor& v1, const Tensor& faces, const Tensor& edges,
      const OptTensor& vertex_body, const Tensor& q0, const OptTensor& q1,
      const Tensor& body_pairs, const Tensor& box, const Tensor& node, const Tensor& prim,
      const Tensor& root, double reach, bool prune) {
    auto [fv, ee, counts, stats] = ipc_body_candidates_padded_impl(
        v0, v1, faces, edges, vertex_body, q0, q1, body_pairs, box, node, prim, root, reach, -1,
        prune, L::traversal);
    return {fv, ee, stats};
  }
  static std::tuple<Tensor, Tensor, Tensor, Tensor> body_candidates_padded(
      const Tensor& v0, const OptTensor& v1, const Tensor& faces, const Tensor& edges,
      const OptTensor& vertex_body, const Tensor& q0, const OptTensor& q1,
      const Tensor& body_pairs, const Tensor& box, const Tensor& node, const Tensor& prim,
      const Tensor& root, double reach, int64_t capacity, bool prune) {
    TORCH_CHECK(capacity >= 0, "capacity: expected >= 0, got ", capacity);
    return ipc_body_candidates_padded_impl(v0, v1, faces, edges, vertex_body, q0, q1, body_pairs,
                                           box, node, prim, root, reach, capacity, prune,
                                           L::traversal);
  }

  // Order 0: energy, 1: gradient (the cheap launcher computes both in one pass).
  template <int Order>
  static Tensor barrier_potential(const Tensor& vertices, const Tensor& rest, const Tensor& faces,
                                  const Tensor& edges, const Tensor& fv, const Tensor& ee,
                                  double dhat, double kappa) {
    auto out = ipc_barrier_potential_impl(vertices, rest, faces, edges, fv, ee, dhat, kappa,
                                          Order, false, L::cheap);
    return Order == 0 ? std::get<0>(out) : std::get<1>(out);
  }
  static Tensor barrier_potential_hessian(const Tensor& vertices, const Tensor& rest,
                                          const Tensor& faces, const Tensor& edges,
                                          const Tensor& fv, const Tensor& ee, double dhat,
                                          double kappa, bool project_to_psd) {
    return std::get<2>(ipc_barrier_potential_impl(vertices, rest, faces, edges, fv, ee, dhat,
                                                  kappa, 2, project_to_psd, L::hessian));
  }

  template <int Order>
  static Tensor friction_potential(const Tensor& velocities, const Tensor& lagged,
                                   const Tensor& rest, const Tensor& faces, const Tensor& edges,
                                   const Tensor& fv, const Tensor& ee, double dhat, double kappa,
                                   double mu, double eps_v) {
    if constexpr (Order == 2)
      return ipc_friction_impl(velocities, lagged, rest, faces, edges, fv, ee, dhat, kappa, mu,
                               eps_v, Order, L::heavy);
    else
      return ipc_friction_impl(velocities, lagged, rest, faces, edges, fv, ee, dhat, kappa, mu,
                               eps_v, Order, L::cheap);
  }

  static std::tuple<Tensor, Tensor> prune_candidates(const Tensor& v0, const OptTensor& v1,
                                                     const Tensor& faces, const Tensor& edges,
                                                     const Tensor& fv, const Tensor& ee,
                                                     double reach) {
    return ipc_prune_candidates_impl(v0, v1, faces, edges, fv, ee, reach, L::cheap);
  }
  static std::tuple<Tensor, Tensor, Tensor> prune_candidates_padded(
      const Tensor& v0, const OptTensor& v1, const Tensor& faces, const Tensor& edges,
      const Tensor& fv, const Tensor& ee, double reach, int64_t capacity) {
    return ipc_prune_candidates_padded_impl(v0, v1, faces, edges, fv, ee, reach, capacity,
                                            L::cheap);
  }

  static Tensor ccd(const Tensor& v0, const Tensor& v1, const Tensor& faces, const Tensor& edges,
                    const Tensor& fv, const Tensor& ee, double min_distance, double tmax,
                    double conservative_rescaling, int64_t max_iterations) {
    return ipc_ccd_impl(v0, v1, faces, edges, fv, ee, min_distance, tmax, conservative_rescaling,
                        max_iterations, L::heavy);
  }

  static Tensor collision_free_steps(const Tensor& v0, const Tensor& v1, const Tensor& faces,
                                     const Tensor& edges, const Tensor& fv, const Tensor& ee,
                                     const Tensor& vertex_env, int64_t num_envs,
                                     double min_distance, double conservative_rescaling,
                                     int64_t max_iterations, const OptTensor& extents) {
    return ipc_collision_free_steps_impl<L>(v0, v1, faces, edges, fv, ee, vertex_env, num_envs,
                                            min_distance, conservative_rescaling, max_iterations,
                                            extents);
  }

  static std::tuple<Tensor, Tensor> body_pair_derivatives(const Tensor& local_gradient,
                                                          const Tensor& local_hessian,
                                                          const Tensor& stencils,
                                                          const Tensor& is_face_vertex,
                                                          const Tensor& rest) {
    return ipc_body_pair_derivatives_impl(local_gradient, local_hessian, stencils, is_face_vertex,
                                          rest, L::block);
  }
  static std::tuple<Tensor, Tensor> body_pair_derivatives_sum(
      const Tensor& local_gradient, const Tensor& local_hessian, const Tensor& stencils,
      const Tensor& is_face_vertex, const Tensor& rest, const Tensor& body_index,
      const Tensor& block_index, int64_t num_bodies, int64_t num_blocks) {
    return ipc_body_pair_derivatives_sum_impl(local_gradient, local_hessian, stencils,
                                              is_face_vertex, rest, body_index, block_index,
                                              num_bodies, num_blocks, L::ordered);
  }

  static Tensor affine_positions(const Tensor& q, const Tensor& rest, const Tensor& vertex_body) {
    return ipc_affine_positions_impl<L>(q, rest, vertex_body);
  }
  static std::tuple<Tensor, Tensor, Tensor> affine_contact_forces(
      const Tensor& vertices, const Tensor& lagged, const Tensor& rest, const Tensor& faces,
      const Tensor& edges, const Tensor& vertex_body, const Tensor& fv, const Tensor& ee,
      const Tensor& lag_fv, const Tensor& lag_ee, const Tensor& lag_mu, int64_t num_envs,
      int64_t num_bodies, double dt, double dhat, double kappa, double eps_v,
      const OptTensor& extents, const OptTensor& lag_extents) {
    return ipc_affine_contact_forces_impl<L>(vertices, lagged, rest, faces, edges, vertex_body, fv,
                                             ee, lag_fv, lag_ee, lag_mu, num_envs, num_bodies, dt,
                                             dhat, kappa, eps_v, extents, lag_extents);
  }
  static std::tuple<Tensor, Tensor> contact_statistics(const Tensor& vertices, const Tensor& faces,
                                                       const Tensor& edges,
                                                       const Tensor& vertex_body, const Tensor& fv,
                                                       const Tensor& ee, int64_t num_envs,
                                                       int64_t num_bodies,
                                                       const OptTensor& extents) {
    return ipc_contact_statistics_impl<L>(vertices, faces, edges, vertex_body, fv, ee, num_envs,
                                          num_bodies, extents);
  }
  static Tensor affine_potential(const Tensor& q, const Tensor& q_hat, const Tensor& weight,
                                 const Tensor& mass, const Tensor& ortho, const Tensor& vertices,
                                 const Tensor& rest, const Tensor& faces, const Tensor& edges,
                                 const Tensor& vertex_body, const Tensor& fv, const Tensor& ee,
                                 const Tensor& lagged, const Tensor& lag_fv, const Tensor& lag_ee,
                                 const Tensor& lag_mu, double dt, double dhat, double kappa,
                                 double eps_v, const OptTensor& extents,
                                 const OptTensor& lag_extents) {
    return ipc_affine_potential_impl<L>(q, q_hat, weight, mass, ortho, vertices, rest, faces, edges,
                                        vertex_body, fv, ee, lagged, lag_fv, lag_ee, lag_mu, dt,
                                        dhat, kappa, eps_v, extents, lag_extents);
  }
  static std::tuple<Tensor, Tensor, Tensor> affine_potential_derivatives(
      const Tensor& q, const Tensor& q_hat, const Tensor& weight, const Tensor& mass,
      const Tensor& ortho, const Tensor& vertices, const Tensor& rest, const Tensor& faces,
      const Tensor& edges, const Tensor& vertex_body, const Tensor& fv, const Tensor& ee,
      const Tensor& lagged, const Tensor& lag_fv, const Tensor& lag_ee, const Tensor& lag_mu,
      double dt, double dhat, double kappa, double eps_v, const OptTensor& frictionless_hessian,
      bool keep_frictionless, const OptTensor& extents, const OptTensor& lag_extents) {
    return ipc_affine_potential_derivatives_impl<L>(q, q_hat, weight, mass, ortho, vertices, rest,
                                                    faces, edges, vertex_body, fv, ee, lagged,
                                                    lag_fv, lag_ee, lag_mu, dt, dhat, kappa,
                                                    eps_v, frictionless_hessian,
                                                    keep_frictionless, extents, lag_extents);
  }
  static std::tuple<Tensor, Tensor, Tensor, Tensor> newton_check(
      const Tensor& dq, const Tensor& radius, double limit, const Tensor& done,
      const Tensor& converged, const Tensor& iterations) {
    return ipc_newton_check_impl<L>(dq, radius, limit, done, converged, iterations);
  }
  static Tensor relative_displacement_bound(const Tensor& dq, const Tensor& radius,
                                            const Tensor& present) {
    return ipc_relative_displacement_bound_impl<L>(dq, radius, present);
  }
  static std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> line_search_accept(
      const Tensor& q, const Tensor& trial, const Tensor& x, const Tensor& x_trial,
      const Tensor& vertex_env, const Tensor& energy, const Tensor& trial_energy,
      const Tensor& accepted, const Tensor& alpha) {
    return ipc_line_search_accept_impl<L>(q, trial, x, x_trial, vertex_env, energy, trial_energy,
                                          accepted, alpha);
  }
};

// Calls visit(name, schema, implementation) for every IPC op, `schema` being the arguments and
// returns that follow the name.
template <typename L, typename Visit>
void for_each_ipc_op(Visit&& visit) {
  using Ops = IpcOps<L>;
  const char* pp = "(Tensor p, Tensor q) -> Tensor";
  const char* pe = "(Tensor p, Tensor e0, Tensor e1) -> Tensor";
  const char* pt = "(Tensor p, Tensor t0, Tensor t1, Tensor t2) -> Tensor";
  const char* ee = "(Tensor ea0, Tensor ea1, Tensor eb0, Tensor eb1) -> Tensor";
  const char* moll = "(Tensor ea0, Tensor ea1, Tensor eb0, Tensor eb1, Tensor eps_x) -> Tensor";
  visit("ipc_point_point_distance", pp, &Ops::template point_point<0>);
  visit("ipc_point_point_distance_gradient", pp, &Ops::template point_point<1>);
  visit("ipc_point_point_distance_hessian", pp, &Ops::template point_point<2>);
  visit("ipc_point_edge_distance", pe, &Ops::template point_edge<0>);
  visit("ipc_point_edge_distance_gradient", pe, &Ops::template point_edge<1>);
  visit("ipc_point_edge_distance_hessian", pe, &Ops::template point_edge<2>);
  visit("ipc_point_triangle_distance", pt, &Ops::template point_triangle<0>);
  visit("ipc_point_triangle_distance_gradient", pt, &Ops::template point_triangle<1>);
  visit("ipc_point_triangle_distance_hessian", pt, &Ops::template point_triangle<2>);
  visit("ipc_edge_edge_distance", ee, &Ops::template edge_edge<0>);
  visit("ipc_edge_edge_distance_gradient", ee, &Ops::template edge_edge<1>);
  visit("ipc_edge_edge_distance_hessian", ee, &Ops::template edge_edge<2>);
  visit("ipc_edge_edge_mollifier", moll, &Ops::template mollifier<0>);
  visit("ipc_edge_edge_mollifier_gradient", moll, &Ops::template mollifier<1>);
  visit("ipc_edge_edge_mollifier_hessian", moll, &Ops::template mollifier<2>);

  visit("ipc_barrier", "(Tensor d2, float dhat) -> (Tensor value, Tensor first, Tensor second)",
        &Ops::barrier);

  visit("ipc_collision_candidates",
        "(Tensor vertices, Tensor faces, Tensor edges, Tensor? vertex_body, float dhat) -> "
        "(Tensor fv, Tensor ee)",
        &Ops::collision_candidates);
  visit("ipc_swept_candidates",
        "(Tensor vertices_t0, Tensor vertices_t1, Tensor faces, Tensor edges, "
        "Tensor? vertex_body, float min_distance) -> (Tensor fv, Tensor ee)",
        &Ops::swept_candidates);
  visit("ipc_collision_candidates_padded",
        "(Tensor vertices, Tensor faces, Tensor edges, Tensor? vertex_body, float dhat, "
        "int capacity, Tensor? vertex_active=None, Tensor? face_active=None, "
        "Tensor? edge_active=None) -> (Tensor fv, Tensor ee, Tensor counts)",
        &Ops::collision_candidates_padded);
  visit("ipc_swept_candidates_padded",
        "(Tensor vertices_t0, Tensor vertices_t1, Tensor faces, Tensor edges, "
        "Tensor? vertex_body, float min_distance, int capacity, Tensor? vertex_active=None, "
        "Tensor? face_active=None, Tensor? edge_active=None) -> (Tensor fv, Tensor ee, "
        "Tensor counts)",
        &Ops::swept_candidates_padded);
  visit("ipc_body_candidates",
        "(Tensor vertices_t0, Tensor? vertices_t1, Tensor faces, Tensor edges, "
        "Tensor? vertex_body, Tensor q_t0, Tensor? q_t1, Tensor body_pairs, Tensor box, "
        "Tensor node, Tensor prim, Tensor root, float reach, bool prune=False) -> (Tensor fv, "
        "Tensor ee, Tensor stats)",
        &Ops::body_candidates);
  visit("ipc_body_candidates_padded",
        "(Tensor vertices_t0, Tensor? vertices_t1, Tensor faces, Tensor edges, "
        "Tensor? vertex_body, Tensor q_t0, Tensor? q_t1, Tensor body_pairs, Tensor box, "
        "Tensor node, Tensor prim, Tensor root, float reach, int capacity, bool prune=False) -> "
        "(Tensor fv, Tensor ee, Tensor counts, Tensor stats)",
        &Ops::body_candidates_padded);

  const char* potential =
      "(Tensor vertices, Tensor rest_vertices, Tensor faces, Tensor edges, Tensor fv, Tensor ee, "
      "float dhat, float kappa) -> Tensor";
  visit("ipc_barrier_potential", potential, &Ops::template barrier_potential<0>);
  visit("ipc_barrier_potential_gradient", potential, &Ops::template barrier_potential<1>);
  visit("ipc_barrier_potential_hessian",
        "(Tensor vertices, Tensor rest_vertices, Tensor faces, Tensor edges, Tensor fv, "
        "Tensor ee, float dhat, float kappa, bool project_to_psd) -> Tensor",
        &Ops::barrier_potential_hessian);

  const char* friction =
      "(Tensor velocities, Tensor lagged_vertices, Tensor rest_vertices, Tensor faces, "
      "Tensor edges, Tensor fv, Tensor ee, float dhat, float kappa, float mu, float eps_v) -> "
      "Tensor";
  visit("ipc_friction_potential", friction, &Ops::template friction_potential<0>);
  visit("ipc_friction_potential_gradient", friction, &Ops::template friction_potential<1>);
  visit("ipc_friction_potential_hessian", friction, &Ops::template friction_potential<2>);

  visit("ipc_prune_candidates",
        "(Tensor vertices_t0, Tensor? vertices_t1, Tensor faces, Tensor edges, Tensor fv, "
        "Tensor ee, float reach) -> (Tensor fv, Tensor ee)",
        &Ops::prune_candidates);
  visit("ipc_prune_candidates_padded",
        "(Tensor vertices_t0, Tensor? vertices_t1, Tensor faces, Tensor edges, Tensor fv, "
        "Tensor ee, float reach, int capacity) -> (Tensor fv, Tensor ee, Tensor counts)",
        &Ops::prune_candidates_padded);
  visit("ipc_ccd",
        "(Tensor vertices_t0, Tensor vertices_t1, Tensor faces, Tensor edges, Tensor fv, "
        "Tensor ee, float min_distance, float tmax, float conservative_rescaling, "
        "int max_iterations) -> Tensor",
        &Ops::ccd);
  visit("ipc_collision_free_steps",
        "(Tensor vertices_t0, Tensor vertices_t1, Tensor faces, Tensor edges, Tensor fv, "
        "Tensor ee, Tensor vertex_env, int num_envs, float min_distance, "
        "float conservative_rescaling, int max_iterations, Tensor? extents=None) -> Tensor",
        &Ops::collision_free_steps);

  visit("ipc_body_pair_derivatives",
        "(Tensor local_gradient, Tensor local_hessian, Tensor stencils, Tensor is_face_vertex, "
        "Tensor rest_vertices) -> (Tensor gradient, Tensor hessian)",
        &Ops::body_pair_derivatives);
  visit("ipc_body_pair_derivatives_sum",
        "(Tensor local_gradient, Tensor local_hessian, Tensor stencils, Tensor is_face_vertex, "
        "Tensor rest_vertices, Tensor body_index, Tensor block_index, int num_bodies, "
        "int num_blocks) -> (Tensor gradient, Tensor hessian)",
        &Ops::body_pair_derivatives_sum);

  visit("ipc_affine_positions", "(Tensor q, Tensor rest_vertices, Tensor vertex_body) -> Tensor",
        &Ops::affine_positions);
  visit("ipc_affine_contact_forces",
        "(Tensor vertices, Tensor lagged_vertices, Tensor rest_vertices, Tensor faces, "
        "Tensor edges, Tensor vertex_body, Tensor fv, Tensor ee, Tensor lag_fv, Tensor lag_ee, "
        "Tensor lag_mu, int num_envs, int num_bodies, float dt, float dhat, float kappa, "
        "float eps_v, Tensor? extents=None, Tensor? lag_extents=None) -> (Tensor forces, "
        "Tensor contacts, Tensor min_distance)",
        &Ops::affine_contact_forces);
  visit("ipc_contact_statistics",
        "(Tensor vertices, Tensor faces, Tensor edges, Tensor vertex_body, Tensor fv, Tensor ee, "
        "int num_envs, int num_bodies, Tensor? extents=None) -> (Tensor contacts, "
        "Tensor min_distance)",
        &Ops::contact_statistics);
  const char* affine =
      "(Tensor q, Tensor q_hat, Tensor weight, Tensor mass_matrix, Tensor ortho_weight, "
      "Tensor vertices, Tensor rest_vertices, Tensor faces, Tensor edges, Tensor vertex_body, "
      "Tensor fv, Tensor ee, Tensor lagged_vertices, Tensor lag_fv, Tensor lag_ee, "
      "Tensor lag_mu, float dt, float dhat, float kappa, float eps_v)";
  const std::string body = std::string(affine).substr(0, std::strlen(affine) - 1);
  const char* extents = ", Tensor? extents=None, Tensor? lag_extents=None)";
  visit("ipc_affine_potential", (body + extents + " -> Tensor").c_str(), &Ops::affine_potential);
  const std::string derivatives =
      body + ", Tensor? frictionless_hessian=None, bool keep_frictionless=False" + extents;
  visit("ipc_affine_potential_derivatives",
        (derivatives + " -> (Tensor gradient, Tensor hessian, Tensor frictionless)").c_str(),
        &Ops::affine_potential_derivatives);
  visit("ipc_newton_check",
        "(Tensor dq, Tensor radius, float limit, Tensor done, Tensor converged, Tensor iterations) "
        "-> (Tensor dq_out, Tensor done_out, Tensor converged_out, Tensor iterations_out)",
        &Ops::newton_check);
  visit("ipc_relative_displacement_bound", "(Tensor dq, Tensor radius, Tensor present) -> Tensor",
        &Ops::relative_displacement_bound);
  visit("ipc_line_search_accept",
        "(Tensor q, Tensor trial, Tensor x, Tensor x_trial, Tensor vertex_env, Tensor energy, "
        "Tensor trial_energy, Tensor accepted, Tensor alpha) -> (Tensor q_out, Tensor x_out, "
        "Tensor energy_out, Tensor accepted_out, Tensor alpha_out)",
        &Ops::line_search_accept);
}

}  // namespace contactnet
