//===- FreeAfterLastUse.cpp - Dealloc buffers right after their last use --===//

#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "llvm/ADT/DenseSet.h"

namespace mlir::zest {
#define GEN_PASS_DEF_FREEAFTERLASTUSEPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

/// Positions of a block's operations, numbered once: moving deallocs while
/// asking Operation::isBeforeInBlock would renumber the block after every
/// move, quadratic in the size of a training step.
class BlockOrder {
public:
  explicit BlockOrder(Block *block) {
    unsigned position = 0;
    for (Operation &op : *block)
      positions[&op] = position++;
  }
  unsigned operator[](Operation *op) const { return positions.lookup(op); }

private:
  llvm::DenseMap<Operation *, unsigned> positions;
};

/// The last operation of `block` that uses `buffer` or a value derived from
/// it, or null if a derived value leaves the block or reaches a terminator.
static Operation *findLastUse(Value buffer, Operation *dealloc, Block *block,
                              const BlockOrder &order) {
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
      if (order[last] < order[top])
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
    // Decide every move first, against the original order, then move.
    llvm::DenseMap<Block *, std::unique_ptr<BlockOrder>> orders;
    SmallVector<std::pair<memref::DeallocOp, Operation *>> moves;
    getOperation().walk([&](memref::DeallocOp dealloc) {
      Value buffer = dealloc.getMemref();
      auto alloc = buffer.getDefiningOp<memref::AllocOp>();
      Block *block = dealloc->getBlock();
      if (!alloc || alloc->getBlock() != block)
        return;
      std::unique_ptr<BlockOrder> &order = orders[block];
      if (!order)
        order = std::make_unique<BlockOrder>(block);
      if (Operation *last = findLastUse(buffer, dealloc, block, *order))
        if ((*order)[last] < (*order)[dealloc])
          moves.push_back({dealloc, last});
    });
    for (auto [dealloc, last] : moves)
      dealloc->moveAfter(last);
  }
};
} // namespace
