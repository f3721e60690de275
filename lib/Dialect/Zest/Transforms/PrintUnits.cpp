//===- PrintUnits.cpp - Print the unit table ------------------------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::zest {
#define GEN_PASS_DEF_PRINTUNITSPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

/// Bytes of one element of `type`, rounding sub-byte types up.
static int64_t elementBytes(Type type) {
  return llvm::divideCeil(type.getIntOrFloatBitWidth(), 8);
}

namespace {
struct PrintUnitsPass : public zest::impl::PrintUnitsPassBase<PrintUnitsPass> {
  void runOnOperation() override {
    markAllAnalysesPreserved();
    SmallVector<UnitOp> units(getOperation().getOps<UnitOp>());
    llvm::raw_ostream &os = llvm::outs();
    size_t nameWidth = 4;
    for (UnitOp unit : units)
      nameWidth = std::max(nameWidth, unit.getSymName().size());
    os << llvm::left_justify("unit", nameWidth)
       << "  kind        dtype  params       numel      padded       shard"
          "   bytes/rank\n";
    int64_t params = 0, numel = 0, fullBytes = 0, rankBytes = 0;
    int64_t worldSize = 1;
    for (UnitOp unit : units) {
      int64_t bytes = elementBytes(unit.getElementType());
      std::string dtype;
      llvm::raw_string_ostream(dtype) << unit.getElementType();
      os << llvm::left_justify(unit.getSymName(), nameWidth) << "  "
         << llvm::left_justify(stringifyUnitKind(unit.getKind()), 10) << "  "
         << llvm::left_justify(dtype, 5) << "  "
         << llvm::format_decimal(unit.getParams().size(), 6) << "  "
         << llvm::format_decimal(unit.getNumElements(), 10) << "  "
         << llvm::format_decimal(unit.getPaddedSize(), 10) << "  "
         << llvm::format_decimal(unit.getShardSize(), 10) << "  "
         << llvm::format_decimal(unit.getShardSize() * bytes, 11) << "\n";
      params += unit.getParams().size();
      numel += unit.getNumElements();
      fullBytes += unit.getNumElements() * bytes;
      rankBytes += unit.getShardSize() * bytes;
      worldSize = unit.getWorldSize();
    }
    os << "total: " << units.size() << " units, " << params << " parameters, "
       << numel << " elements, world size " << worldSize << "\n"
       << "parameter bytes per rank: " << rankBytes << " sharded vs "
       << fullBytes << " replicated";
    if (rankBytes > 0)
      os << " (" << llvm::format("%.2f", double(fullBytes) / rankBytes)
         << "x less)";
    os << "\n";
  }
};
} // namespace
