//===- RuntimeProducts.h - The runtime's products, as zestc calls them
//-*-C++-*-//
//
// The products and fused linear layers of the runtime C API come from one
// list (runtime/include/zest_products.def) that declares them in
// zest_runtime.h and zest_runtime_cuda.h; this header expands the same list
// for the compiler: names, element types and the C signatures the calls
// zest-matmul-to-blas builds are checked against, and the positions of the
// parameters zest-plan-memory and the cost model read.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_CONVERSION_RUNTIMEPRODUCTS_H
#define ZEST_CONVERSION_RUNTIMEPRODUCTS_H

#include "zest_runtime.h"

#include "mlir/IR/Types.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/ErrorHandling.h"

#include <optional>
#include <type_traits>

namespace mlir::zest {

/// The kinds of product, named as in the C API (`zest_<kind>...`).
enum class ProductKind {
  sgemm,
  sgemm_batched,
  widening_gemm,
  widening_gemm_batched,
  linear_forward,
  linear_backward,
  attention_forward,
  attention_backward,
  cross_entropy_forward,
  cross_entropy_backward,
  linear_cross_entropy,
  grouped_matmul,
  grouped_matmul_weight_grad
};

/// Whether the CUDA runtime computes `kind` on cuBLASLt (and so takes its
/// workspace); attention and the cross-entropy are kernels of its own (the
/// fused head and loss, and the grouped products, run theirs on cuBLASLt).
inline bool isCublasLtProduct(ProductKind kind) {
  return kind != ProductKind::attention_forward &&
         kind != ProductKind::attention_backward &&
         kind != ProductKind::cross_entropy_forward &&
         kind != ProductKind::cross_entropy_backward;
}

/// How a C parameter is passed: the MLIR type a call gives it.
enum class ProductParam { I32, I64, F32, Pointer };

/// One entry point of zest_products.def.
struct RuntimeProduct {
  ProductKind kind;
  /// "", "_bf16" or "_f16": the element storage.
  llvm::StringLiteral suffix;
  /// The CPU (OpenBLAS) and GPU (cuBLASLt) entry points.
  llvm::StringLiteral cpuName, cudaName;
  /// The C parameters, in order, and their names (ZEST_<kind>_ARGS).
  llvm::ArrayRef<ProductParam> params;
  llvm::StringLiteral paramNames;

  /// The entry point of `cuda` or of the CPU runtime.
  llvm::StringRef getName(bool cuda) const { return cuda ? cudaName : cpuName; }
  /// The position of parameter `name` (e.g. "activation").
  unsigned getParamIndex(llvm::StringRef name) const;
};

namespace detail {
template <typename T> constexpr ProductParam getProductParam() {
  if constexpr (std::is_pointer_v<T>)
    return ProductParam::Pointer;
  else if constexpr (std::is_floating_point_v<T>)
    return ProductParam::F32;
  else if constexpr (sizeof(T) == 8)
    return ProductParam::I64;
  else
    return ProductParam::I32;
}
/// The parameters of C function type `Fn`.
template <typename Fn, typename Indices> struct ProductParams;
template <typename Fn, size_t... I>
struct ProductParams<Fn, std::index_sequence<I...>> {
  using Traits = llvm::function_traits<Fn *>;
  static constexpr ProductParam value[] = {
      getProductParam<typename Traits::template arg_t<I>>()...};
};
template <typename Fn>
constexpr llvm::ArrayRef<ProductParam> getProductParams() {
  return ProductParams<Fn, std::make_index_sequence<
                               llvm::function_traits<Fn *>::num_args>>::value;
}
#define ZEST_PRODUCT_STRINGIZE(...) #__VA_ARGS__
#define ZEST_PRODUCT_NAMES(...) ZEST_PRODUCT_STRINGIZE(__VA_ARGS__)
} // namespace detail

/// Every product of the C API, in zest_products.def's order.
inline llvm::ArrayRef<RuntimeProduct> getRuntimeProducts() {
#define ZEST_PRODUCT(KIND, SUFFIX, T)                                          \
  RuntimeProduct{ProductKind::KIND,                                            \
                 #SUFFIX,                                                      \
                 "zest_" #KIND #SUFFIX,                                        \
                 "zest_cuda_" #KIND #SUFFIX,                                   \
                 detail::getProductParams<decltype(zest_##KIND##SUFFIX)>(),    \
                 ZEST_PRODUCT_NAMES(ZEST_##KIND##_ARGS)},
  static const RuntimeProduct products[] = {
#include "zest_products.def"
  };
#undef ZEST_PRODUCT
  return products;
}

inline unsigned RuntimeProduct::getParamIndex(llvm::StringRef name) const {
  llvm::SmallVector<llvm::StringRef> names;
  llvm::StringRef(paramNames).split(names, ',');
  for (auto [index, param] : llvm::enumerate(names))
    if (param.trim() == name)
      return index;
  llvm_unreachable("no such parameter in the C API");
}

/// The product of `kind` for elements of `elementType` (f32, bf16, f16);
/// null if the runtime has none.
inline const RuntimeProduct *lookupRuntimeProduct(ProductKind kind,
                                                  Type elementType) {
  llvm::StringRef suffix = elementType.isBF16()  ? "_bf16"
                           : elementType.isF16() ? "_f16"
                           : elementType.isF32() ? ""
                                                 : "?";
  for (const RuntimeProduct &product : getRuntimeProducts())
    if (product.kind == kind && product.suffix == suffix)
      return &product;
  return nullptr;
}

/// The product `callee` calls, CPU or GPU (`cuda` tells which); null for any
/// other function.
inline const RuntimeProduct *lookupRuntimeProduct(llvm::StringRef callee,
                                                  bool *cuda = nullptr) {
  for (const RuntimeProduct &product : getRuntimeProducts())
    if (callee == product.cpuName || callee == product.cudaName) {
      if (cuda)
        *cuda = callee == product.cudaName;
      return &product;
    }
  return nullptr;
}

} // namespace mlir::zest

#endif // ZEST_CONVERSION_RUNTIMEPRODUCTS_H
