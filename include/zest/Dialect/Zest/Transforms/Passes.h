//===- Passes.h - Zest transformation passes --------------------*- C++ -*-===//

#ifndef ZEST_DIALECT_ZEST_TRANSFORMS_PASSES_H
#define ZEST_DIALECT_ZEST_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"

namespace mlir::zest {

#define GEN_PASS_DECL
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"

/// Registration of every Zest pass: registerZestPasses().
#define GEN_PASS_REGISTRATION
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_PASSES_H
