//===- BufferizableOpInterfaceImpl.cpp - Bufferizing Zest ops -------------===//
//
// The fused linear, attention and cross-entropy ops (the fused head and loss
// too) are destination-style: on tensors they return their destinations, on
// memrefs they write them. Bufferizing one swaps each operand for its buffer
// and drops the results, as for linalg. An optimization barrier is its
// operand's buffer.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/BufferizableOpInterfaceImpl.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"

#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace mlir::zest;

namespace {

template <typename OpTy>
struct WriteOnlyDestinationModel
    : public DstBufferizableOpInterfaceExternalModel<
          WriteOnlyDestinationModel<OpTy>, OpTy> {
  /// Destinations are only written: a `tensor.empty` or a slice of a
  /// gradient buffer can be one without a copy of its old contents.
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &) const {
    return !cast<DestinationStyleOpInterface>(op).isDpsInit(&operand);
  }

  /// The cross-entropy's backward reads each logit before it writes the
  /// gradient at the same place (on every target), so the gradient may
  /// overwrite the logits (zest-reuse-logits); no other op is element-wise.
  bool bufferizesToElementwiseAccess(Operation *op, const AnalysisState &,
                                     ArrayRef<OpOperand *> operands) const {
    auto backward = dyn_cast<CrossEntropyBackwardOp>(op);
    return backward && llvm::all_of(operands, [&](OpOperand *operand) {
             return operand == &backward.getLogitsMutable() ||
                    operand == &backward.getGradLogitsMutable();
           });
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto dps = cast<DestinationStyleOpInterface>(op);
    SmallVector<Value> operands, inits;
    for (OpOperand &operand : op->getOpOperands()) {
      FailureOr<Value> buffer =
          getBuffer(rewriter, operand.get(), options, state);
      if (failed(buffer))
        return failure();
      operands.push_back(*buffer);
      if (dps.isDpsInit(&operand))
        inits.push_back(*buffer);
    }
    rewriter.setInsertionPoint(op);
    OperationState bufferState(op->getLoc(), op->getName());
    bufferState.addOperands(operands);
    bufferState.propertiesAttr = op->getPropertiesAsAttribute();
    bufferState.addAttributes(llvm::to_vector(op->getDiscardableAttrs()));
    rewriter.create(bufferState);
    replaceOpWithBufferizedValues(rewriter, op, inits);
    return success();
  }
};

/// The barrier is its operand: it bufferizes to the operand's buffer,
/// neither reading nor writing it.
struct OptimizationBarrierModel
    : public BufferizableOpInterface::ExternalModel<OptimizationBarrierModel,
                                                    OptimizationBarrierOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return false;
  }

  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return false;
  }

  AliasingValueList getAliasingValues(Operation *op, OpOperand &,
                                      const AnalysisState &) const {
    return {{op->getResult(0), BufferRelation::Equivalent}};
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    FailureOr<Value> buffer =
        getBuffer(rewriter, op->getOperand(0), options, state);
    if (failed(buffer))
      return failure();
    replaceOpWithBufferizedValues(rewriter, op, *buffer);
    return success();
  }
};

} // namespace

void mlir::zest::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, ZestDialect *) {
    LinearOp::attachInterface<WriteOnlyDestinationModel<LinearOp>>(*ctx);
    LinearBackwardOp::attachInterface<
        WriteOnlyDestinationModel<LinearBackwardOp>>(*ctx);
    AttentionOp::attachInterface<WriteOnlyDestinationModel<AttentionOp>>(*ctx);
    AttentionBackwardOp::attachInterface<
        WriteOnlyDestinationModel<AttentionBackwardOp>>(*ctx);
    CrossEntropyOp::attachInterface<WriteOnlyDestinationModel<CrossEntropyOp>>(
        *ctx);
    CrossEntropyBackwardOp::attachInterface<
        WriteOnlyDestinationModel<CrossEntropyBackwardOp>>(*ctx);
    LinearCrossEntropyOp::attachInterface<
        WriteOnlyDestinationModel<LinearCrossEntropyOp>>(*ctx);
    GroupedMatmulOp::attachInterface<
        WriteOnlyDestinationModel<GroupedMatmulOp>>(*ctx);
    GroupedMatmulWeightGradOp::attachInterface<
        WriteOnlyDestinationModel<GroupedMatmulWeightGradOp>>(*ctx);
    ExpertRoutingOp::attachInterface<
        WriteOnlyDestinationModel<ExpertRoutingOp>>(*ctx);
    ExpertDispatchOp::attachInterface<
        WriteOnlyDestinationModel<ExpertDispatchOp>>(*ctx);
    ExpertCombineOp::attachInterface<
        WriteOnlyDestinationModel<ExpertCombineOp>>(*ctx);
    OptimizationBarrierOp::attachInterface<OptimizationBarrierModel>(*ctx);
  });
}
