//===- Passes.h - Zest conversion passes ------------------------*- C++ -*-===//

#ifndef ZEST_CONVERSION_PASSES_H
#define ZEST_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::zest {

#define GEN_PASS_DECL
#include "zest/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zest/Conversion/Passes.h.inc"

} // namespace mlir::zest

#endif // ZEST_CONVERSION_PASSES_H
