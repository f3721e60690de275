//===- AttentionHost.cpp - The CUDA attention, built for the host ---------===//
//
// cuda-blas/Attention.cpp compiled as C++ for the emulated device, as
// LinearProductsHost.cpp does for the products: its kernels run as host
// functions, every pointer argument checked to be device memory.
//
//===----------------------------------------------------------------------===//

#include "../cuda-blas/Attention.cpp"
