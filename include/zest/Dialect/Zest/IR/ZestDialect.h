//===- ZestDialect.h - Zest dialect -----------------------------*- C++ -*-===//

#ifndef ZEST_DIALECT_ZEST_IR_ZESTDIALECT_H
#define ZEST_DIALECT_ZEST_IR_ZESTDIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "zest/Dialect/Zest/IR/ZestDialect.h.inc"

namespace mlir::zest {

/// The communicator, read and written by every collective.
struct CommResource : public SideEffects::Resource::Base<CommResource> {
  llvm::StringRef getName() override { return "zest.comm"; }
};

/// The pool that gathered unit buffers are allocated from.
struct GatherPoolResource
    : public SideEffects::Resource::Base<GatherPoolResource> {
  llvm::StringRef getName() override { return "zest.gather_pool"; }
};

/// The copy engine between host and device memory: offload copies read
/// and write it, so they are never dropped and keep their order.
struct HostCopyResource : public SideEffects::Resource::Base<HostCopyResource> {
  llvm::StringRef getName() override { return "zest.host_copy"; }
};

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_IR_ZESTDIALECT_H
