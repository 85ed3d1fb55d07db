// The switch behind `contactnet.ops.ipc.trusted_inputs()`: see `values_trusted` in checks.h.
#include <torch/library.h>

#include "common/checks.h"

namespace contactnet {
namespace {

// Sets this thread's switch; returns its previous state (for the context manager to restore).
bool trust_index_values(bool on) {
  const bool before = values_trusted;
  values_trusted = on;
  return before;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def("trust_index_values(bool on) -> bool", &trust_index_values);
}

}  // namespace contactnet
