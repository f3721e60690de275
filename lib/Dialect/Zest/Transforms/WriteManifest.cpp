//===- WriteManifest.cpp - Write the flat-layout manifest -----------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest_layout_hash.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mlir::zest {
#define GEN_PASS_DEF_WRITEMANIFESTPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {
struct WriteManifestPass
    : public mlir::zest::impl::WriteManifestPassBase<WriteManifestPass> {
  using Base::Base;

  /// `--zest-manifest=out.json` names the file directly.
  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (!options.empty() && !options.contains('=')) {
      path = options.trim().str();
      return success();
    }
    return Base::initializeOptions(options, errorHandler);
  }

  void runOnOperation() override {
    markAllAnalysesPreserved();
    ModuleOp module = getOperation();
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(path, &error);
    if (!file) {
      emitError(module.getLoc())
          << "cannot write manifest '" << path << "': " << error;
      return signalPassFailure();
    }
    llvm::json::OStream json(file->os(), /*IndentSize=*/2);
    writeManifest(module, json);
    file->os() << "\n";
    file->keep();
  }

  static void writeManifest(ModuleOp module, llvm::json::OStream &json) {
    SmallVector<UnitOp> units(module.getOps<UnitOp>());
    json.object([&] {
      json.attribute("format", "zest-manifest");
      json.attribute("version", 1);
      json.attribute("world_size",
                     units.empty() ? 1 : units.front().getWorldSize());
      // What the executable's checkpoints record, so that `zest-ckpt split`
      // makes checkpoints it loads.
      json.attribute("model_hash", getLayoutHash(units));
      json.attributeArray("units", [&] {
        for (UnitOp unit : units)
          writeUnit(unit, json);
      });
    });
  }

  /// The layout hash the executable computes from its model descriptor
  /// (zest_layout_hash.h): the same fields in the same order.
  static std::string getLayoutHash(ArrayRef<UnitOp> units) {
    ::zest::LayoutHash hash;
    for (UnitOp unit : units) {
      hash.mix(std::string_view(unit.getSymName()));
      hash.mix(getDTypeName(unit.getElementType()));
      for (auto param : unit.getParams().getAsRange<ParamAttr>()) {
        hash.mix(std::string_view(param.getName()));
        hash.mix(param.getOffset());
        for (int64_t dim : param.getValueType().getShape())
          hash.mix(dim);
      }
    }
    return hash.hex();
  }

  static void writeUnit(UnitOp unit, llvm::json::OStream &json) {
    json.object([&] {
      json.attribute("name", unit.getSymName());
      json.attribute("kind", stringifyUnitKind(unit.getKind()));
      json.attribute("dtype", getDTypeName(unit.getElementType()));
      json.attribute("world_size", unit.getWorldSize());
      json.attribute("numel", unit.getNumElements());
      json.attribute("padded_size", unit.getPaddedSize());
      json.attribute("shard_size", unit.getShardSize());
      // Expert parallelism: sharded over an expert group, whole experts
      // per shard (zest-ckpt keeps them whole when it reshards).
      if (unit.getExperts())
        json.attribute("expert_group", unit.getWorldSize());
      json.attributeArray("params", [&] {
        for (auto param : unit.getParams().getAsRange<ParamAttr>()) {
          json.object([&] {
            json.attribute("fqn", param.getName());
            json.attributeArray("shape", [&] {
              for (int64_t dim : param.getValueType().getShape())
                json.value(dim);
            });
            json.attribute("dtype", getDTypeName(unit.getElementType()));
            json.attribute("offset", param.getOffset());
            json.attribute("numel", param.getNumElements());
          });
        }
      });
    });
  }
};
} // namespace
