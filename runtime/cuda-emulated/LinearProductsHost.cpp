//===- LinearProductsHost.cpp - The CUDA products, built for the host -----===//
//
// cuda-blas/LinearProducts.cpp is CUDA (its epilogue kernels are launched
// with <<<>>>); the emulated runtime compiles the very same file as C++,
// with ZEST_CUDA_EMULATED turning the kernels into host functions
// (EpilogueKernels.cuh). A build property cannot give one source file two
// languages, hence this file.
//
//===----------------------------------------------------------------------===//

#include "../cuda-blas/LinearProducts.cpp"
