//===- SelectUnits.cpp - Units named by an option's globs -----------------===//

#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "llvm/Support/GlobPattern.h"

using namespace mlir;
using namespace mlir::zest;

FailureOr<SmallVector<UnitOp>>
mlir::zest::selectUnits(ModuleOp module, ArrayRef<std::string> globs,
                        StringRef optionName, bool rootByDefault) {
  SmallVector<llvm::GlobPattern> patterns;
  for (const std::string &text : globs) {
    auto glob = llvm::GlobPattern::create(text);
    if (!glob)
      return emitError(getModelDiagnosticLoc(module))
             << "invalid " << optionName << " pattern '" << text
             << "': " << llvm::toString(glob.takeError());
    if (llvm::none_of(module.getOps<UnitOp>(), [&](UnitOp unit) {
          return glob->match(unit.getSymName());
        }))
      return emitError(getModelDiagnosticLoc(module))
             << optionName << " pattern '" << text << "' matches no unit";
    patterns.push_back(std::move(*glob));
  }
  SmallVector<UnitOp> chosen;
  for (UnitOp unit : module.getOps<UnitOp>()) {
    bool named = patterns.empty() ? rootByDefault || unit.getSymName() != "root"
                                  : llvm::any_of(patterns, [&](auto &glob) {
                                      return glob.match(unit.getSymName());
                                    });
    if (named)
      chosen.push_back(unit);
  }
  return chosen;
}

std::pair<StringRef, StringRef> mlir::zest::splitAcUnitsEntry(StringRef entry) {
  auto [glob, mode] = entry.rsplit(':');
  return glob.size() == entry.size() ? std::pair(entry, StringRef())
                                     : std::pair(glob, mode);
}
