// Trilinear samples of M³ grids stored as table rows, each query reading its own grid in place:
// what F.grid_sample (zero padding, align_corners=False) gives on a per-query copy of the grid,
// without the copy (a LOCC table's co-occupancy keys: D·M³ numbers per query otherwise).
//
// contactnet::grid_sample_rows(Tensor rows, int grid, Tensor ids, Tensor coords)
//     rows (N·M³, D) T: grid n's cell (i, j, k) at row n·M³ + (i·M + j)·M + k
//     grid M >= 1; ids (Q,) int64 in [0, N); coords (Q, P, 3) T in the grid's box units,
//     [-1, 1] across it, coords[..., 0] along i
//  -> (Q, P, D) T
// contactnet::grid_sample_rows_backward(rows, grid, ids, coords, Tensor grad_out (Q, P, D))
//  -> grad_coords (Q, P, 3) T (the rows get no gradient here; see contactnet/ops/grid_sample_rows.py)
#pragma once

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "common/checks.h"
#include "grid_sample_rows/grid_sample_rows_kernels.h"

namespace contactnet {

// Metadata (and on the CPU the ids' range, common/checks.h); returns P.
inline int64_t check_grid_sample_rows(const at::Tensor& rows, int64_t grid, const at::Tensor& ids,
                                      const at::Tensor& coords) {
  check_float_input(rows, "rows", {-1, -1});
  TORCH_CHECK_VALUE(grid >= 1, "grid: expected M >= 1, got ", grid);
  const int64_t cells = grid * grid * grid;
  TORCH_CHECK_VALUE(rows.size(0) % cells == 0, "rows: expected N·M³ rows (M = ", grid, "), got ",
                    rows.size(0));
  check_index_input(ids, "ids", {-1}, rows.size(0) / cells);
  check_float_input(coords, "coords", {ids.size(0), -1, 3});
  check_same_device(ids, "ids", rows, "rows");
  check_same_device_dtype(coords, "coords", rows, "rows");
  return coords.size(1);
}

template <typename Launch>
at::Tensor grid_sample_rows_impl(const at::Tensor& rows, int64_t grid, const at::Tensor& ids,
                                 const at::Tensor& coords, const Launch& launch) {
  const int64_t p = check_grid_sample_rows(rows, grid, ids, coords);
  at::Tensor out = at::empty({ids.size(0), p, rows.size(1)}, rows.options());
  AT_DISPATCH_FLOATING_TYPES(rows.scalar_type(), "grid_sample_rows", [&] {
    launch(rows, ids.size(0) * p,
           GridSampleRowsFunctor<scalar_t>{rows.data_ptr<scalar_t>(), ids.data_ptr<int64_t>(),
                                           coords.data_ptr<scalar_t>(), grid, rows.size(1), p,
                                           out.data_ptr<scalar_t>()});
  });
  return out;
}

template <typename Launch>
at::Tensor grid_sample_rows_backward_impl(const at::Tensor& rows, int64_t grid, const at::Tensor& ids,
                                          const at::Tensor& coords, const at::Tensor& grad_out,
                                          const Launch& launch) {
  const int64_t p = check_grid_sample_rows(rows, grid, ids, coords);
  check_float_input(grad_out, "grad_out", {ids.size(0), p, rows.size(1)});
  check_same_device_dtype(grad_out, "grad_out", rows, "rows");
  at::Tensor grad = at::empty({ids.size(0), p, 3}, rows.options());
  AT_DISPATCH_FLOATING_TYPES(rows.scalar_type(), "grid_sample_rows_backward", [&] {
    launch(rows, ids.size(0) * p,
           GridSampleRowsBackwardFunctor<scalar_t>{
               rows.data_ptr<scalar_t>(), ids.data_ptr<int64_t>(), coords.data_ptr<scalar_t>(),
               grad_out.data_ptr<scalar_t>(), grid, rows.size(1), p, grad.data_ptr<scalar_t>()});
  });
  return grad;
}

}  // namespace contactnet
