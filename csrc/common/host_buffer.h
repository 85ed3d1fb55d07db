// Host-only growable byte buffer for op outputs whose size is known only after the work (the
// BLEM contacts of a query), that becomes a tensor's storage without a copy.
//
// Large outputs (hundreds of MB of contacts on million-triangle meshes) cost as much in the
// kernel as in the arithmetic when collected in a std::vector and then packed: every doubling
// copies the rows and pages in fresh memory, and the pack pages in the tensors once more. Here a
// buffer past kMapBytes lives in its own anonymous mapping (Linux): it grows by mremap, which
// moves page tables rather than bytes, asks for transparent huge pages (1/512 of the page
// faults), and is handed to a tensor as is. Small buffers stay on the malloc heap, whose pages
// are usually resident already. Elsewhere the buffer is plain malloc/realloc.
#pragma once

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace contactnet {

class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  HostBuffer(HostBuffer&& o) noexcept { *this = std::move(o); }
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(capacity_, o.capacity_);
    std::swap(mapped_, o.mapped_);
    return *this;
  }
  ~HostBuffer() { release_memory(data_, capacity_, mapped_); }

  char* data() const { return data_; }
  size_t capacity() const { return capacity_; }

  // Grows the capacity to at least `bytes`, keeping the first `used` bytes.
  void reserve(size_t bytes, size_t used) {
    if (bytes <= capacity_) return;
#if defined(__linux__)
    if (bytes > kMapBytes) {
      const size_t cap = round_up(bytes, kHugePage);
      void* p;
      if (mapped_) {
        p = mremap(data_, capacity_, cap, MREMAP_MAYMOVE);
        if (p == MAP_FAILED) throw std::bad_alloc();
      } else {
        p = mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        if (used > 0) std::memcpy(p, data_, used);
        std::free(data_);
        mapped_ = true;
      }
#ifdef MADV_HUGEPAGE
      madvise(p, cap, MADV_HUGEPAGE);  // advisory: a refusal only costs speed
#endif
      data_ = static_cast<char*>(p);
      capacity_ = cap;
      return;
    }
#endif
    void* p = std::realloc(data_, bytes);
    if (p == nullptr) throw std::bad_alloc();
    data_ = static_cast<char*>(p);
    capacity_ = bytes;
  }

  // Hands the memory to a CPU tensor of `sizes` and `options` (its first `used` bytes), leaving
  // this buffer empty. A mapping is first cut back to the pages in use, so the tensor holds no
  // spare capacity.
  at::Tensor into_tensor(at::IntArrayRef sizes, const at::TensorOptions& options, size_t used) {
    if (data_ == nullptr) reserve(1, 0);  // a valid pointer even for an empty tensor
#if defined(__linux__)
    const size_t pages = round_up(used > 0 ? used : 1, kPage);
    if (mapped_ && pages < capacity_ && mremap(data_, capacity_, pages, 0) != MAP_FAILED)
      capacity_ = pages;  // shrinking in place; on failure the tensor keeps the whole mapping
#else
    (void)used;
#endif
    char* p = std::exchange(data_, nullptr);
    const size_t cap = std::exchange(capacity_, 0);
    const bool mapped = std::exchange(mapped_, false);
    return at::from_blob(
        p, sizes, [cap, mapped](void* q) { release_memory(static_cast<char*>(q), cap, mapped); },
        options);
  }

 private:
  static constexpr size_t kMapBytes = size_t(1) << 21;
  static constexpr size_t kHugePage = size_t(1) << 21;
  static constexpr size_t kPage = size_t(1) << 12;
  static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }
  static void release_memory(char* p, size_t cap, bool mapped) {
    if (p == nullptr) return;
#if defined(__linux__)
    if (mapped) {
      munmap(p, cap);
      return;
    }
#endif
    (void)cap;
    (void)mapped;
    std::free(p);
  }

  char* data_ = nullptr;
  size_t capacity_ = 0;
  bool mapped_ = false;
};

}  // namespace contactnet
