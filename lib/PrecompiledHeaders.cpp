//===- PrecompiledHeaders.cpp - Owner of the precompiled MLIR headers -----===//
//
// Empty: the target it belongs to only builds the precompiled header of the
// upstream MLIR headers (lib/CMakeLists.txt) that the compiler libraries
// reuse.
//
//===----------------------------------------------------------------------===//
