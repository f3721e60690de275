//===- Diagnostics.cpp - Diagnostics of the Zest tools --------------------===//

#include "zest/Driver/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace mlir::zest;

CompactDiagnosticHandler::CompactDiagnosticHandler(llvm::SourceMgr &mgr,
                                                   MLIRContext *ctx,
                                                   unsigned maxLineColumns)
    : SourceMgrDiagnosticHandler(mgr, ctx), maxLineColumns(maxLineColumns) {
  setHandler([this](Diagnostic &diag) { emit(diag); });
}

bool CompactDiagnosticHandler::showsLine(Location loc) {
  auto fileLoc = dyn_cast<FileLineColLoc>(loc);
  if (!fileLoc)
    return true; // the base handler finds the line to show, if any
  const llvm::MemoryBuffer *buffer = getBufferForFile(fileLoc.getFilename());
  if (!buffer)
    return true;
  StringRef text = buffer->getBuffer();
  for (unsigned line = 1; line < fileLoc.getLine() && !text.empty(); ++line)
    text = text.split('\n').second;
  return text.split('\n').first.size() <= maxLineColumns;
}

void CompactDiagnosticHandler::emit(Diagnostic &diag) {
  auto emitOne = [&](Location loc, const Twine &message,
                     DiagnosticSeverity severity) {
    emitDiagnostic(loc, message, severity, showsLine(loc));
  };
  emitOne(diag.getLocation(), diag.str(), diag.getSeverity());
  for (Diagnostic &note : diag.getNotes())
    emitOne(note.getLocation(), note.str(), note.getSeverity());
}
