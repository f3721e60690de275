//===- Diagnostics.h - Diagnostics of the Zest tools -------------*- C++
//-*-===//
//
// zestc reports errors as file:line:col with the source line under them,
// as mlir-opt does; but an imported model puts a function's whole signature
// on one line (tens of kilobytes for a production-size model), which
// buries the message. Lines longer than a screen are not echoed.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_DRIVER_DIAGNOSTICS_H
#define ZEST_DRIVER_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"

namespace mlir::zest {

/// A SourceMgrDiagnosticHandler that shows the source line of a diagnostic
/// (or note) only when it is at most `maxLineColumns` long.
class CompactDiagnosticHandler : public SourceMgrDiagnosticHandler {
public:
  CompactDiagnosticHandler(llvm::SourceMgr &mgr, MLIRContext *ctx,
                           unsigned maxLineColumns = 200);

private:
  /// Whether the line `loc` points into is short enough to show.
  bool showsLine(Location loc);
  void emit(Diagnostic &diag);

  unsigned maxLineColumns;
};

} // namespace mlir::zest

#endif // ZEST_DRIVER_DIAGNOSTICS_H
