//===- RuntimeCalls.h - Building calls into the Zest runtime ----*- C++ -*-===//
//
// Shared by the conversions that call the runtime C API (zest_runtime.h):
// declaring its functions and passing buffers as raw pointers.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_CONVERSION_RUNTIMECALLS_H
#define ZEST_CONVERSION_RUNTIMECALLS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::zest {

/// Returns `func.func private @name(args) -> results` in `module`, declaring
/// it on first use.
func::FuncOp getOrDeclareRuntimeFn(ModuleOp module, StringRef name,
                                   TypeRange args, TypeRange results);

/// Emits a call to runtime function `name`, declaring it if needed.
func::CallOp callRuntime(OpBuilder &builder, Location loc, StringRef name,
                         TypeRange results, ValueRange args);

struct RuntimeProduct;

/// Emits a call to `product` (the GPU runtime's with `cuda`), declaring it
/// if needed. `args` must match its C signature in zest_runtime.h (i32,
/// i64, `!llvm.ptr`): a mismatch is a compiler bug, reported as fatal.
func::CallOp callProduct(OpBuilder &builder, Location loc,
                         const RuntimeProduct &product, bool cuda,
                         ValueRange args);

/// Returns an `!llvm.ptr` to the first element of `memref` (aligned base
/// pointer plus offset), for runtime functions that take `void *`.
Value getElementPointer(OpBuilder &builder, Location loc, Value memref);

/// Returns `value` (index) as i64.
Value toI64(OpBuilder &builder, Location loc, Value value);

} // namespace mlir::zest

#endif // ZEST_CONVERSION_RUNTIMECALLS_H
