//===- CrossEntropyHost.cpp - The CUDA cross-entropy, built for the host --===//
//
// cuda-blas/CrossEntropy.cpp compiled as C++ for the emulated device, as
// AttentionHost.cpp does for attention.
//
//===----------------------------------------------------------------------===//

#include "../cuda-blas/CrossEntropy.cpp"
