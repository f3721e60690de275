//===- FuseLinear.cpp - Linear layers in linalg to fused Zest ops ---------===//
//
// A linear layer reaches Zest as a matrix product, a bias add and an
// activation (forward), and as an activation backward, two products and a
// column sum (backward). Each of those is a full pass over its output; the
// fused ops compute them in blocks while the data is in cache (DeepSpeed's
// LinearFunctionForZeroStage3, cuBLASLt's epilogues).
//
// Activations are recognized by what their bodies compute, not by how they
// are spelled: a body is evaluated in double on sample points and compared
// with each known activation (or its derivative). PyTorch, torch-mlir and
// hand-written IR spell GELU in many equivalent ways; a near miss (another
// constant, a leaky ReLU) evaluates differently and is left alone.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/Contraction.h"
#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"
#include "zest/Dialect/Zest/Transforms/LinearMatching.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace mlir::zest {
#define GEN_PASS_DEF_FUSELINEARPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

//===----------------------------------------------------------------------===//
// What a scalar body computes
//===----------------------------------------------------------------------===//

/// Evaluates the value `body` yields for block arguments `args`, in double.
/// Values from outside the body must be float constants. Fails on any op
/// outside a small arithmetic set: such a body is never matched.
std::optional<double> evaluate(Block &body, ArrayRef<double> args) {
  DenseMap<Value, double> env;
  for (auto [arg, value] : llvm::zip(body.getArguments(), args))
    env[arg] = value;
  auto valueOf = [&](Value value) -> std::optional<double> {
    auto it = env.find(value);
    if (it != env.end())
      return it->second;
    FloatAttr constant;
    if (matchPattern(value, m_Constant(&constant)))
      return constant.getValueAsDouble();
    return std::nullopt;
  };
  for (Operation &op : body) {
    if (auto yield = dyn_cast<linalg::YieldOp>(op))
      return yield.getNumOperands() == 1 ? valueOf(yield.getOperand(0))
                                         : std::nullopt;
    if (isa<arith::ConstantOp>(op))
      continue; // read through valueOf
    SmallVector<double> in;
    for (Value operand : op.getOperands()) {
      std::optional<double> value = valueOf(operand);
      if (!value)
        return std::nullopt;
      in.push_back(*value);
    }
    std::optional<double> out =
        TypeSwitch<Operation *, std::optional<double>>(&op)
            .Case([&](arith::AddFOp) { return in[0] + in[1]; })
            .Case([&](arith::SubFOp) { return in[0] - in[1]; })
            .Case([&](arith::MulFOp) { return in[0] * in[1]; })
            .Case([&](arith::DivFOp) { return in[0] / in[1]; })
            .Case([&](arith::NegFOp) { return -in[0]; })
            .Case<arith::MaximumFOp, arith::MaxNumFOp>(
                [&](auto) { return std::max(in[0], in[1]); })
            .Case<arith::MinimumFOp, arith::MinNumFOp>(
                [&](auto) { return std::min(in[0], in[1]); })
            .Case([&](arith::SelectOp) { return in[0] != 0 ? in[1] : in[2]; })
            .Case([&](arith::CmpFOp cmp) -> std::optional<double> {
              // Samples are never NaN: ordered and unordered agree.
              double a = in[0], b = in[1];
              switch (cmp.getPredicate()) {
              case arith::CmpFPredicate::OEQ:
              case arith::CmpFPredicate::UEQ:
                return a == b;
              case arith::CmpFPredicate::ONE:
              case arith::CmpFPredicate::UNE:
                return a != b;
              case arith::CmpFPredicate::OGT:
              case arith::CmpFPredicate::UGT:
                return a > b;
              case arith::CmpFPredicate::OGE:
              case arith::CmpFPredicate::UGE:
                return a >= b;
              case arith::CmpFPredicate::OLT:
              case arith::CmpFPredicate::ULT:
                return a < b;
              case arith::CmpFPredicate::OLE:
              case arith::CmpFPredicate::ULE:
                return a <= b;
              default:
                return std::nullopt;
              }
            })
            .Case([&](math::TanhOp) { return std::tanh(in[0]); })
            .Case([&](math::ErfOp) { return std::erf(in[0]); })
            .Case([&](math::ExpOp) { return std::exp(in[0]); })
            .Case([&](math::ExpM1Op) { return std::expm1(in[0]); })
            .Case([&](math::LogOp) { return std::log(in[0]); })
            .Case([&](math::Log1pOp) { return std::log1p(in[0]); })
            .Case([&](math::SqrtOp) { return std::sqrt(in[0]); })
            .Case([&](math::RsqrtOp) { return 1 / std::sqrt(in[0]); })
            .Case([&](math::AbsFOp) { return std::fabs(in[0]); })
            .Case([&](math::PowFOp) { return std::pow(in[0], in[1]); })
            .Case([&](math::FmaOp) { return in[0] * in[1] + in[2]; })
            .Default([](Operation *) { return std::nullopt; });
    if (!out || op.getNumResults() != 1)
      return std::nullopt;
    env[op.getResult(0)] = *out;
  }
  return std::nullopt;
}

constexpr double kSqrt2OverPi = 0.7978845608028654;

double activate(Activation activation, double x) {
  switch (activation) {
  case Activation::Relu:
    return x > 0 ? x : 0;
  case Activation::GeluTanh:
    return 0.5 * x * (1 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
  case Activation::GeluErf:
    return 0.5 * x * (1 + std::erf(x * M_SQRT1_2));
  case Activation::Silu:
    return x / (1 + std::exp(-x));
  case Activation::None:
    return x;
  }
  llvm_unreachable("unknown activation");
}

double derivative(Activation activation, double x) {
  switch (activation) {
  case Activation::Relu:
    return x > 0 ? 1 : 0;
  case Activation::GeluTanh: {
    double t = std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) +
           0.5 * x * (1 - t * t) * kSqrt2OverPi * (1 + 3 * 0.044715 * x * x);
  }
  case Activation::GeluErf:
    return 0.5 * (1 + std::erf(x * M_SQRT1_2)) +
           x * std::exp(-0.5 * x * x) * 0.5 * M_2_SQRTPI * M_SQRT1_2;
  case Activation::Silu: {
    double s = 1 / (1 + std::exp(-x));
    return s * (1 + x * (1 - s));
  }
  case Activation::None:
    return 1;
  }
  llvm_unreachable("unknown activation");
}

/// Pre-activation samples: both signs, near zero and in the tails, never
/// exactly 0 (where ReLU's derivative is a convention).
constexpr double kSamples[] = {-7.3,  -4.1,  -2.6,   -1.9,  -1.3, -0.81,
                               -0.46, -0.21, -0.029, 0.031, 0.17, 0.42,
                               0.73,  1.1,   1.55,   2.3,   3.7,  6.1};

/// The relative precision at which `body` is compared with an activation:
/// that of its constants, float32 (the two GELUs differ by up to 2e-4 and
/// are told apart), or a 16-bit type, where functions closer than twice its
/// epsilon (2^-7 for bf16, 2^-10 for f16) are the same function once stored.
double getTolerance(Block &body) {
  Type type =
      body.getNumArguments() > 0 ? body.getArgument(0).getType() : Type();
  if (type && type.isBF16())
    return 1.0 / 128;
  if (type && type.isF16())
    return 1.0 / 1024;
  return 1e-6;
}

/// True if `actual` is `expected` up to `tolerance` (relative, absolute
/// below 1).
bool close(double actual, double expected, double tolerance) {
  return std::fabs(actual - expected) <=
         tolerance * std::max(1.0, std::fabs(expected));
}

constexpr Activation kActivations[] = {Activation::Relu, Activation::GeluTanh,
                                       Activation::GeluErf, Activation::Silu};

/// The first activation for which `holds(activation, sample)` is true on
/// every sample.
std::optional<Activation>
findActivation(function_ref<bool(Activation, double)> holds) {
  for (Activation activation : kActivations)
    if (llvm::all_of(kSamples, [&](double x) { return holds(activation, x); }))
      return activation;
  return std::nullopt;
}

/// The activation `body` computes of its first argument, if any.
std::optional<Activation> matchActivation(Block &body) {
  double tolerance = getTolerance(body);
  return findActivation([&](Activation activation, double x) {
    std::optional<double> y = evaluate(body, {x, 0.0});
    return y && close(*y, activate(activation, x), tolerance);
  });
}

/// The activation whose backward `body` computes as `f(dy, z) = dy *
/// act'(z)`, with dy the argument `gradIndex` and z the other one.
std::optional<Activation> matchActivationBackward(Block &body,
                                                  unsigned gradIndex) {
  double tolerance = getTolerance(body);
  return findActivation([&](Activation activation, double z) {
    return llvm::all_of(
        std::initializer_list<double>{0.37, -1.9}, [&](double dy) {
          double args[3] = {0, 0, 0};
          args[gradIndex] = dy;
          args[1 - gradIndex] = z;
          std::optional<double> value = evaluate(body, args);
          return value &&
                 close(*value, dy * derivative(activation, z), tolerance);
        });
  });
}

//===----------------------------------------------------------------------===//
// Structural helpers
//===----------------------------------------------------------------------===//

/// True if `op` is an elementwise linalg.generic over 2-D tensors whose
/// inputs are `inputs` with identity maps, plus at most one row vector
/// broadcast along dim 0 (returned in `rowVector`).
bool isElementwise2D(linalg::GenericOp op, unsigned numMatrices,
                     Value *rowVector = nullptr) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumLoops() != 2 || op.getNumParallelLoops() != op.getNumLoops() ||
      !isLinearMatrix(op.getResult(0)))
    return false;
  MLIRContext *ctx = op.getContext();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap row = AffineMap::get(2, 0, {getAffineDimExpr(1, ctx)}, ctx);
  unsigned matrices = 0, vectors = 0;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    if (map == identity && isLinearMatrix(input->get())) {
      ++matrices;
    } else if (rowVector && map == row && isLinearVector(input->get())) {
      ++vectors;
      *rowVector = input->get();
    } else {
      return false;
    }
  }
  return matrices == numMatrices && vectors == (rowVector ? 1 : 0) &&
         op.getMatchingIndexingMap(op.getDpsInitOperand(0)) == identity;
}

/// The row vector `matrix` repeats on every row: the input of a
/// `linalg.broadcast` over dimension 0 or of the generic that copies it
/// (torch-mlir's expand), if so.
Value getBroadcastRow(Value matrix) {
  if (auto broadcast = matrix.getDefiningOp<linalg::BroadcastOp>())
    return broadcast.getDimensions() == ArrayRef<int64_t>{0} &&
                   isLinearVector(broadcast.getInput())
               ? broadcast.getInput()
               : nullptr;
  auto generic = matrix.getDefiningOp<linalg::GenericOp>();
  Value row;
  if (!generic || !isElementwise2D(generic, 0, &row))
    return nullptr;
  auto yield = cast<linalg::YieldOp>(generic.getBody()->getTerminator());
  return yield.getOperand(0) == generic.getBody()->getArgument(0) ? row
                                                                  : nullptr;
}

/// The bias of `op` if it computes `product + bias[n]` (either order), the
/// bias read as a row vector or as a matrix that repeats one.
Value matchBiasAdd(linalg::GenericOp op, Value product) {
  Value bias;
  if (!isElementwise2D(op, 1, &bias)) {
    if (!isElementwise2D(op, 2) || op.getDpsInputs()[0] == op.getDpsInputs()[1])
      return nullptr;
    Value other = op.getDpsInputs()[op.getDpsInputs()[0] == product ? 1 : 0];
    bias = getBroadcastRow(other);
    if (!bias)
      return nullptr;
  }
  Block &body = op.getRegion().front();
  unsigned productIndex = op.getDpsInputs()[0] == product ? 0 : 1;
  if (op.getDpsInputs()[productIndex] != product)
    return nullptr;
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != &body)
    return nullptr;
  Value a = body.getArgument(productIndex),
        b = body.getArgument(1 - productIndex);
  bool match = (add.getLhs() == a && add.getRhs() == b) ||
               (add.getLhs() == b && add.getRhs() == a);
  return match ? bias : nullptr;
}

/// The bias vector `init` broadcasts over rows (`linalg.broadcast` with
/// dimensions = [0]), if it does and is used only there.
Value matchBroadcastBias(Value init) {
  auto broadcast = init.getDefiningOp<linalg::BroadcastOp>();
  if (!broadcast || !init.hasOneUse() ||
      broadcast.getDimensions() != ArrayRef<int64_t>{0} ||
      !isLinearVector(broadcast.getInput()))
    return nullptr;
  return broadcast.getInput();
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// `act(x * op(W) + b)`: a product of an f32 matrix with a plain or
/// transposed weight, a bias (broadcast into the product's destination or
/// added after it) and an activation, each optional but not both.
struct FuseLinearForward : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::LinalgOp product,
                                PatternRewriter &rewriter) const override {
    std::optional<GemmLayout> layout = getMatrixProductLayout(product);
    if (!layout || layout->transA || !product.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(product, "not a product x * op(W)");
    Value x = product.getDpsInputs()[0], w = product.getDpsInputs()[1];
    Value pre = product->getResult(0);
    if (!isLinearMatrix(x) || !isLinearMatrix(w) || !isLinearMatrix(pre))
      return rewriter.notifyMatchFailure(
          product, "not static f32, bf16 or f16 matrices");

    Value init = product.getDpsInits()[0];
    Value bias = matchBroadcastBias(init);
    if (!bias && !getZeroFillDestination(init))
      return rewriter.notifyMatchFailure(
          product, "accumulates into neither zeros nor a broadcast bias");
    Operation *last = product;
    if (!bias && pre.hasOneUse())
      if (auto add = dyn_cast<linalg::GenericOp>(*pre.getUsers().begin()))
        if ((bias = matchBiasAdd(add, pre))) {
          pre = add.getResult(0);
          last = add;
        }

    // The first user that applies a known activation to the whole matrix.
    linalg::GenericOp activationOp;
    Activation activation = Activation::None;
    for (Operation *user : pre.getUsers()) {
      auto generic = dyn_cast<linalg::GenericOp>(user);
      if (!generic || !isElementwise2D(generic, 1) ||
          generic.getDpsInputs()[0] != pre ||
          !haveOneElementType({pre, generic.getResult(0)}))
        continue;
      if (std::optional<Activation> matched =
              matchActivation(generic.getRegion().front())) {
        activationOp = generic;
        activation = *matched;
        break;
      }
    }
    if (!bias && !activationOp)
      return rewriter.notifyMatchFailure(product,
                                         "a plain product: no bias, no "
                                         "activation to fuse");
    Operation *anchor = activationOp ? activationOp.getOperation() : last;
    if (!haveOneElementType({x, w, bias, pre}))
      return rewriter.notifyMatchFailure(product, "mixes element types");
    if (bias && !isAvailableAt(bias, anchor))
      return rewriter.notifyMatchFailure(product, "bias defined too late");
    bool keepPre = activationOp && !pre.hasOneUse();
    // The fused op replaces the chain at its last op; whatever else reads
    // the pre-activation must come after it.
    for (Operation *user : pre.getUsers())
      if (user != anchor && user->getBlock() == anchor->getBlock() &&
          user->isBeforeInBlock(anchor))
        return rewriter.notifyMatchFailure(
            product, "the pre-activation is read before the activation");
    if (anchor->getBlock() != product->getBlock())
      return rewriter.notifyMatchFailure(product, "spans blocks");

    rewriter.setInsertionPoint(anchor);
    Location loc = anchor->getLoc();
    Type type = pre.getType();
    // The activation's (or bias add's) destination, unless it is the chain
    // itself.
    Value output = cast<DestinationStyleOpInterface>(anchor).getDpsInits()[0];
    if (output.getDefiningOp() == product || output.getDefiningOp() == last ||
        !isAvailableAt(output, anchor) ||
        (!activationOp && output == product.getDpsInits()[0]))
      output = createEmpty(rewriter, loc, type);
    Value preInit = keepPre ? createEmpty(rewriter, loc, type) : Value();
    SmallVector<Type> results = {type};
    if (keepPre)
      results.push_back(type);
    auto fused = LinearOp::create(rewriter, loc, results, activation,
                                  layout->transB, x, w, bias, output, preInit);
    if (keepPre)
      rewriter.replaceAllUsesExcept(pre, fused.getResult(1), activationOp);
    rewriter.replaceOp(anchor, fused.getResult(0));
    return success();
  }
};

/// A 16-bit tensor widened by an extf that may also permute it (torch-mlir
/// fuses autocast's cast of an nn.Linear weight with its W^T): the 16-bit
/// tensor and the map it is read through (the identity when plain).
struct Widening {
  Value narrow;
  AffineMap read;
};

static std::optional<Widening> matchWidening(Value value) {
  auto widen = value.getDefiningOp<linalg::GenericOp>();
  if (!widen || !widen.isAllParallelLoops() ||
      !isa_and_nonnull<arith::ExtFOp>(getBodyConversion(widen)))
    return std::nullopt;
  SmallVector<AffineMap> maps = widen.getIndexingMapsArray();
  Value narrow = widen.getDpsInputs()[0];
  if (!maps[1].isIdentity() || !maps[0].isPermutation() ||
      getElementTypeOrSelf(narrow).getIntOrFloatBitWidth() != 16)
    return std::nullopt;
  return Widening{narrow, maps[0]};
}

/// The 16-bit tensor `value` was widened from by a pointwise extf, if so.
static Value getWidenedFrom(Value value) {
  std::optional<Widening> widening = matchWidening(value);
  return widening && widening->read.isIdentity() ? widening->narrow : Value();
}

/// The 16-bit tensor in `wide`'s layout: the widened one, or a transpose of
/// it where the widening permuted it (which the product then reads in
/// place, zest-fold-transposes' patterns).
static Value getNarrowed(const Widening &widening, Value wide,
                         PatternRewriter &rewriter) {
  if (widening.read.isIdentity())
    return widening.narrow;
  Location loc = wide.getLoc();
  auto type = cast<RankedTensorType>(wide.getType())
                  .clone(getElementTypeOrSelf(widening.narrow));
  Value init = createEmpty(rewriter, loc, type);
  // Dimension k of `wide` is dimension permutation[k] of the narrow one.
  AffineMap inverse = inversePermutation(widening.read);
  SmallVector<int64_t> permutation;
  for (unsigned k = 0; k < inverse.getNumResults(); ++k)
    permutation.push_back(inverse.getDimPosition(k));
  return linalg::TransposeOp::create(rewriter, loc, widening.narrow, init,
                                     permutation)
      ->getResult(0);
}

/// The 16-bit bias of autocast's addmm if `wide` (an f32 product) is read
/// only by `wide + b` with `b` widened from `element` (a row vector, or a
/// matrix repeating one): the sum is then `sum`.
static Value matchWidenedBias(Value wide, Type element, Value &sum) {
  auto add = dyn_cast<linalg::GenericOp>(*wide.getUsers().begin());
  Value wideBias = add ? matchBiasAdd(add, wide) : Value();
  Value bias = wideBias ? getWidenedFrom(wideBias) : Value();
  if (!bias || getElementTypeOrSelf(bias) != element ||
      add->getBlock() != wide.getParentBlock())
    return nullptr;
  sum = add->getResult(0);
  return bias;
}

/// Autocast's plain product and addmm, `round(x * op(W) [+ b])`: 16-bit x
/// and W multiplied into an f32 matrix of zeros that only a pointwise truncf
/// reads, back to their type, after adding a bias widened from it, if any.
/// A fused layer in the 16-bit type computes the same values (its kernels
/// accumulate in f32, add the bias and round to nearest even once, as
/// truncf does) without the f32 matrix: half the bytes written, none held,
/// and on a GPU one GEMM with its epilogue instead of three kernels.
struct FuseRoundedProduct : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::LinalgOp product,
                                PatternRewriter &rewriter) const override {
    std::optional<GemmLayout> layout = getMatrixProductLayout(product);
    if (!layout || layout->transA || !product.hasPureTensorSemantics() ||
        product->getNumResults() != 1)
      return rewriter.notifyMatchFailure(product, "not a product x * op(W)");
    Value x = product.getDpsInputs()[0], w = product.getDpsInputs()[1];
    Value wide = product->getResult(0);
    Type element = getElementTypeOrSelf(x);
    if (!isLinearMatrix(x) || !isLinearMatrix(w) || !isLinearMatrix(wide) ||
        element.isF32() || !haveOneElementType({x, w}) ||
        !getElementTypeOrSelf(wide).isF32() ||
        !getZeroFillDestination(product.getDpsInits()[0]) || !wide.hasOneUse())
      return rewriter.notifyMatchFailure(
          product, "not 16-bit matrices into f32 zeros read once");
    Value sum = wide;
    Value bias = matchWidenedBias(wide, element, sum);
    Operation *round = sum.hasOneUse() ? *sum.getUsers().begin() : nullptr;
    if (!round ||
        !isa_and_nonnull<arith::TruncFOp>(getElementConversion(round)) ||
        getElementTypeOrSelf(round->getResult(0)) != element ||
        round->getBlock() != product->getBlock())
      return rewriter.notifyMatchFailure(product,
                                         "not rounded back to its type");
    rewriter.setInsertionPoint(round);
    Type type = round->getResult(0).getType();
    Value output = createEmpty(rewriter, round->getLoc(), type);
    auto fused = LinearOp::create(rewriter, round->getLoc(), TypeRange{type},
                                  Activation::None, layout->transB, x, w, bias,
                                  output, Value());
    rewriter.replaceOp(round, fused.getResult(0));
    return success();
  }
};

/// Autocast's addmm as torch-mlir writes it: x and W rounded to 16 bits,
/// widened back to f32 (W transposed on the way, for an nn.Linear) and
/// multiplied in f32. The product of the 16-bit
/// matrices into the same f32 matrix has the same values (widening is exact
/// and both accumulate in f32) and runs on the 16-bit GEMM: on a GPU the
/// tensor cores instead of f32 CUDA cores (GPT-2's forward products ran at
/// 47 TFLOP/s on an H200), reading half the bytes anywhere. The widened
/// copies go once nothing else reads them.
struct NarrowWidenedProduct : public OpRewritePattern<linalg::MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::MatmulOp product,
                                PatternRewriter &rewriter) const override {
    if (!product.hasPureTensorSemantics() ||
        !getElementTypeOrSelf(product.getResult(0)).isF32())
      return rewriter.notifyMatchFailure(product, "not an f32 product");
    std::optional<Widening> x = matchWidening(product.getInputs()[0]);
    std::optional<Widening> w = matchWidening(product.getInputs()[1]);
    if (!x || !w ||
        getElementTypeOrSelf(x->narrow) != getElementTypeOrSelf(w->narrow))
      return rewriter.notifyMatchFailure(
          product, "not both operands widened from one 16-bit type");
    Value narrowX = getNarrowed(*x, product.getInputs()[0], rewriter);
    Value narrowW = getNarrowed(*w, product.getInputs()[1], rewriter);
    rewriter.replaceOpWithNewOp<linalg::MatmulOp>(
        product, product.getResultTypes(), ValueRange{narrowX, narrowW},
        product.getOutputs(),
        getPrunedAttributeList(
            product, {product.getOperandSegmentSizesAttrName().strref(),
                      linalg::LinalgDialect::kMemoizedIndexingMapsAttrName}));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// The gradients a linear layer's backward computes from `g` (the gradient
/// of its pre-activation), found among `g`'s users.
struct BackwardUses {
  linalg::LinalgOp gradInput, gradWeight, gradBias;
  Value weight, input;
  bool transposeWeight = false, transposeGradWeight = false;
  /// Users of `g` that are none of the above.
  unsigned others = 0;
};

/// True if `op` sums a matrix over its rows (a bias gradient): a
/// `linalg.reduce` over dimension 0 or the equivalent generic, with an
/// `addf` combiner, starting from zeros.
bool isColumnSum(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !linalgOp.hasPureTensorSemantics() ||
      linalgOp.getNumDpsInputs() != 1 || linalgOp.getNumDpsInits() != 1 ||
      !isLinearVector(linalgOp->getResult(0)) ||
      !getZeroFillDestination(linalgOp.getDpsInits()[0]))
    return false;
  if (auto reduce = dyn_cast<linalg::ReduceOp>(op)) {
    if (reduce.getDimensions() != ArrayRef<int64_t>{0})
      return false;
  } else {
    MLIRContext *ctx = op->getContext();
    auto generic = dyn_cast<linalg::GenericOp>(op);
    if (!generic ||
        generic.getIndexingMapsArray() !=
            SmallVector<AffineMap>{
                AffineMap::getMultiDimIdentityMap(2, ctx),
                AffineMap::get(2, 0, {getAffineDimExpr(1, ctx)}, ctx)} ||
        generic.getIteratorTypesArray() !=
            SmallVector<utils::IteratorType>{utils::IteratorType::reduction,
                                             utils::IteratorType::parallel})
      return false;
  }
  Block &body = op->getRegion(0).front();
  auto add = dyn_cast_or_null<arith::AddFOp>(
      body.getTerminator()->getOperand(0).getDefiningOp());
  return add && body.getOperations().size() == 2 &&
         llvm::is_contained(add->getOperands(), body.getArgument(0)) &&
         llvm::is_contained(add->getOperands(), body.getArgument(1));
}

/// Sorts `g`'s users into the gradients of a linear layer.
BackwardUses classifyUses(Value g) {
  BackwardUses uses;
  for (OpOperand &use : g.getUses()) {
    Operation *user = use.getOwner();
    auto linalgOp = dyn_cast<linalg::LinalgOp>(user);
    std::optional<GemmLayout> layout =
        linalgOp ? getMatrixProductLayout(linalgOp) : std::nullopt;
    bool zeroInit = linalgOp && linalgOp.getNumDpsInits() == 1 &&
                    getZeroFillDestination(linalgOp.getDpsInits()[0]);
    std::optional<LinearGradient> gradient =
        layout ? getLinearGradient(*layout, use.getOperandNumber())
               : std::nullopt;
    if (gradient && zeroInit && linalgOp.hasPureTensorSemantics() &&
        isLinearMatrix(user->getResult(0))) {
      Value other = linalgOp.getDpsInputs()[1 - use.getOperandNumber()];
      if (other != g && gradient->ofInput && !uses.gradInput) {
        uses.gradInput = linalgOp;
        uses.weight = other;
        uses.transposeWeight = gradient->transposed;
        continue;
      }
      if (other != g && !gradient->ofInput && !uses.gradWeight) {
        uses.gradWeight = linalgOp;
        uses.transposeGradWeight = gradient->transposed;
        uses.input = other;
        continue;
      }
    }
    if (!uses.gradBias && isColumnSum(user)) {
      uses.gradBias = linalgOp;
      continue;
    }
    ++uses.others;
  }
  return uses;
}

/// The gradients of a linear layer computed from one `g`: `g = dy *
/// act'(z)` (fused when `g` has no other use), `g * op(W)`, `op(g, x)` and
/// the column sum of `g`. Fused when that saves a pass over `g`: an
/// activation backward, or two gradients or more.
struct FuseLinearBackward : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::LinalgOp product,
                                PatternRewriter &rewriter) const override {
    std::optional<GemmLayout> layout = getMatrixProductLayout(product);
    if (!layout || !product.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(product, "not a product");
    // Which operand may be `g`: the left one of g * op(W), either one of
    // a product over rows.
    SmallVector<Value, 2> candidates;
    if (!layout->transA)
      candidates.push_back(product.getDpsInputs()[0]);
    else if (!layout->transB)
      llvm::append_range(candidates, product.getDpsInputs());
    for (Value g : candidates)
      if (isLinearMatrix(g) && succeeded(fuse(g, rewriter)))
        return success();
    return rewriter.notifyMatchFailure(product, "no linear backward here");
  }

private:
  LogicalResult fuse(Value g, PatternRewriter &rewriter) const {
    BackwardUses uses = classifyUses(g);
    unsigned gradients =
        bool(uses.gradInput) + bool(uses.gradWeight) + bool(uses.gradBias);
    // Fold the activation backward when `g` exists only for these.
    Value dy = g, pre;
    Activation activation = Activation::None;
    auto actBackward = g.getDefiningOp<linalg::GenericOp>();
    // One storage type per layer: a mixed-type one stays apart.
    if (actBackward && uses.others == 0 && isElementwise2D(actBackward, 2) &&
        haveOneElementType(actBackward->getOperands())) {
      Block &body = actBackward.getRegion().front();
      for (unsigned gradIndex : {0u, 1u})
        if (std::optional<Activation> matched =
                matchActivationBackward(body, gradIndex)) {
          activation = *matched;
          dy = actBackward.getDpsInputs()[gradIndex];
          pre = actBackward.getDpsInputs()[1 - gradIndex];
          break;
        }
    }
    if (gradients == 0 || (gradients == 1 && activation == Activation::None))
      return failure();
    // A `g` two layers read (Pythia's parallel residual) can pair one
    // layer's input gradient with the other's weight gradient: one op then
    // computes both products correctly only if the layers have one shape.
    if (uses.gradInput && uses.gradWeight &&
        cast<ShapedType>(uses.input.getType()).getShape() !=
            cast<ShapedType>(uses.gradInput->getResult(0).getType()).getShape())
      return failure();

    // The fused op goes where the first gradient was computed.
    SmallVector<Operation *> replaced;
    for (linalg::LinalgOp op : {uses.gradInput, uses.gradWeight, uses.gradBias})
      if (op)
        replaced.push_back(op);
    Operation *anchor = replaced.front();
    for (Operation *op : replaced) {
      if (op->getBlock() != anchor->getBlock())
        return failure();
      if (op->isBeforeInBlock(anchor))
        anchor = op;
    }
    for (Value operand : {dy, pre, uses.input, uses.weight})
      if (operand && !isAvailableAt(operand, anchor))
        return failure();
    SmallVector<Value> stored = {dy, pre, uses.input, uses.weight};
    for (Operation *op : replaced)
      stored.push_back(op->getResult(0));
    if (!haveOneElementType(stored))
      return failure();
    // Where each gradient was written, checked before anything is created.
    SmallVector<Value> inits;
    for (Operation *op : replaced) {
      inits.push_back(
          getZeroFillDestination(cast<linalg::LinalgOp>(op).getDpsInits()[0]));
      if (failed(getDestinationAt(inits.back(), anchor, /*rewriter=*/nullptr)))
        return failure();
    }

    rewriter.setInsertionPoint(anchor);
    DenseMap<Operation *, Value> destinations;
    for (auto [op, init] : llvm::zip(replaced, inits))
      destinations[op] = *getDestinationAt(init, anchor, &rewriter);
    auto destination = [&](linalg::LinalgOp op) {
      return op ? destinations.lookup(op) : Value();
    };
    Value gradInput = destination(uses.gradInput),
          gradWeight = destination(uses.gradWeight),
          gradBias = destination(uses.gradBias);
    SmallVector<Type> results;
    for (Operation *op : replaced)
      results.push_back(op->getResult(0).getType());
    auto fused = LinearBackwardOp::create(
        rewriter, anchor->getLoc(), results, activation, uses.transposeWeight,
        uses.transposeGradWeight, dy, pre, uses.input, uses.weight, gradInput,
        gradWeight, gradBias);
    for (auto [op, result] : llvm::zip(replaced, fused.getResults()))
      rewriter.replaceOp(op, result);
    return success();
  }
};

struct FuseLinearPass : public zest::impl::FuseLinearPassBase<FuseLinearPass> {
  void runOnOperation() override {
    // Layers over N-D activations become matrix code first, so that the
    // linear patterns below see every layer in one form; products of
    // widened 16-bit matrices read them narrow before an f32 layer could
    // take them.
    RewritePatternSet flatten(&getContext());
    populateFlattenRowsPatterns(flatten);
    flatten.add<NarrowWidenedProduct>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(flatten),
                                     getStraightLineRewriteConfig())))
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseLinearForward, FuseLinearBackward, FuseRoundedProduct>(
        &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     getStraightLineRewriteConfig())))
      signalPassFailure();
  }
};

} // namespace
