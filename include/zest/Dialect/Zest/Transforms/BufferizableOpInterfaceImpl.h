//===- BufferizableOpInterfaceImpl.h - Bufferizing Zest ops -----*- C++ -*-===//

#ifndef ZEST_DIALECT_ZEST_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
#define ZEST_DIALECT_ZEST_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H

namespace mlir {
class DialectRegistry;

namespace zest {
/// Lets One-Shot Bufferize bufferize the destination-style Zest ops (the
/// fused linear ops) in place of their destinations.
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);
} // namespace zest
} // namespace mlir

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
