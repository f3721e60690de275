//===- FreeAfterLastUse.cpp - Dealloc buffers right after their last use --===//

#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "llvm/ADT/DenseSet.h"

namespace mlir::zest {
#define GEN_PASS_DEF_FREEAFTERLASTUSEPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

/// The last operation of `block` that uses `buffer` or a value derived from
/// it, or null if a derived value leaves the block or reaches a terminator.
static Operation *findLastUse(Value buffer, Operation *dealloc, Block *block) {
  Operation *last = buffer.getDefiningOp();
  SmallVector<Value> worklist = {buffer};
  llvm::DenseSet<Value> seen = {buffer};
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (user == dealloc)
        continue;
      Operation *top = block->findAncestorOpInBlock(*user);
      if (!top || top->hasTrait<OpTrait::IsTerminator>())
        return nullptr;
      if (last->isBeforeInBlock(top))
        last = top;
      // Values computed from the buffer (views, pointers, request handles)
      // keep it alive too, including results of an enclosing op.
      for (Operation *op : {user, top})
        for (Value result : op->getResults())
          if (seen.insert(result).second)
            worklist.push_back(result);
    }
  }
  return last;
}

namespace {
struct FreeAfterLastUsePass
    : public zest::impl::FreeAfterLastUsePassBase<FreeAfterLastUsePass> {
  void runOnOperation() override {
    SmallVector<memref::DeallocOp> deallocs;
    getOperation().walk(
        [&](memref::DeallocOp dealloc) { deallocs.push_back(dealloc); });
    for (memref::DeallocOp dealloc : deallocs) {
      Value buffer = dealloc.getMemref();
      auto alloc = buffer.getDefiningOp<memref::AllocOp>();
      Block *block = dealloc->getBlock();
      if (!alloc || alloc->getBlock() != block)
        continue;
      if (Operation *last = findLastUse(buffer, dealloc, block))
        if (last->isBeforeInBlock(dealloc))
          dealloc->moveAfter(last);
    }
  }
};
} // namespace
