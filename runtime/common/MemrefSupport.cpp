//===- MemrefSupport.cpp - Support functions compiled code calls ----------===//
//
// `memref.copy` between non-contiguous views lowers to a call to
// `memrefCopy` (upstream keeps it in libmlir_c_runner_utils); the runtime
// provides it so executables need no MLIR library.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstring>

namespace {
/// An unranked memref: rank and a pointer to the ranked descriptor
/// {allocated, aligned, offset, sizes[rank], strides[rank]}.
struct UnrankedMemRef {
  int64_t rank;
  void *descriptor;
};

struct View {
  char *data;
  const int64_t *sizes;
  const int64_t *strides;
};

View unpack(const UnrankedMemRef &memref, int64_t elementSize) {
  auto *fields = static_cast<int64_t *>(memref.descriptor);
  char *aligned = reinterpret_cast<char *>(fields[1]);
  return {aligned + fields[2] * elementSize, fields + 3,
          fields + 3 + memref.rank};
}

void copy(const View &src, const View &dst, int64_t rank, int64_t dim,
          int64_t srcOffset, int64_t dstOffset, int64_t elementSize) {
  if (dim == rank) {
    std::memcpy(dst.data + dstOffset * elementSize,
                src.data + srcOffset * elementSize, elementSize);
    return;
  }
  for (int64_t i = 0; i < src.sizes[dim]; ++i)
    copy(src, dst, rank, dim + 1, srcOffset + i * src.strides[dim],
         dstOffset + i * dst.strides[dim], elementSize);
}
} // namespace

extern "C" void memrefCopy(int64_t elementSize, UnrankedMemRef *src,
                           UnrankedMemRef *dst) {
  View from = unpack(*src, elementSize), to = unpack(*dst, elementSize);
  copy(from, to, src->rank, 0, 0, 0, elementSize);
}
