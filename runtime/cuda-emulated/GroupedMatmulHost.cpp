//===- GroupedMatmulHost.cpp - The CUDA grouped products, for the host ----===//
//
// cuda-blas/GroupedMatmul.cpp compiled as C++ for the emulated device, as
// AttentionHost.cpp does for attention.
//
//===----------------------------------------------------------------------===//

#include "../cuda-blas/GroupedMatmul.cpp"
