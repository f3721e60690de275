// RUN: zest-opt %s -split-input-file -zest-verify-lowering -verify-diagnostics | FileCheck %s

// Only LLVM dialect ops: accepted, unchanged.
// CHECK-LABEL: llvm.func @_mlir_ciface_step
module attributes {zest.entry_points = [{c_interface_args = 2 : i64, name = "step"}]} {
  llvm.func @_mlir_ciface_step(%a: !llvm.ptr, %b: !llvm.ptr) {
    llvm.return
  }
}

// -----

// An op the lowering does not handle is named where the model wrote it.
llvm.func @step(%x: f32) -> f32 {
  // expected-error @+1 {{zestc cannot lower 'math.erf' to machine code: the operation is not supported by the lowering pipeline (zestc --print-pipeline)}}
  %y = math.erf %x : f32
  llvm.return %y : f32
}

// -----

// A parameter that bufferization could not update in place comes back as an
// extra result: the C interface takes one more descriptor than recorded.
module attributes {zest.entry_points = [{c_interface_args = 2 : i64, name = "step"}]} {
  // expected-error @+1 {{entry point @step could not update its parameters and optimizer state in place (internal error: please report it with the model)}}
  llvm.func @_mlir_ciface_step(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr) {
    llvm.return
  }
}

// -----

// expected-error @+1 {{malformed 'zest.entry_points' record {name = "step"}: expected {name, c_interface_args}}}
module attributes {zest.entry_points = [{name = "step"}]} {
}
