//===- ZestDialect.cpp - Zest dialect registration ------------------------===//

#include "zest/Dialect/Zest/IR/ZestDialect.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::zest;

#include "zest/Dialect/Zest/IR/ZestDialect.cpp.inc"
#include "zest/Dialect/Zest/IR/ZestEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "zest/Dialect/Zest/IR/ZestAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "zest/Dialect/Zest/IR/ZestTypes.cpp.inc"

void ZestDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "zest/Dialect/Zest/IR/ZestOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "zest/Dialect/Zest/IR/ZestAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "zest/Dialect/Zest/IR/ZestTypes.cpp.inc"
      >();
}

LogicalResult ParamAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                StringRef name, RankedTensorType valueType,
                                int64_t offset) {
  if (name.empty())
    return emitError() << "parameter name must not be empty";
  if (!valueType.hasStaticShape())
    return emitError() << "parameter '" << name
                       << "' must have a static shape, got " << valueType;
  if (offset < 0)
    return emitError() << "parameter '" << name << "' has negative offset "
                       << offset;
  return success();
}
