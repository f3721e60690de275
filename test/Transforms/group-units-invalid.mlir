// RUN: zest-opt %s -split-input-file -zest-group-units="leaf-modules=blocks.*" -verify-diagnostics=only-expected
// RUN: not zest-opt %s -split-input-file -zest-group-units="leaf-classes=Block" 2>&1 | FileCheck %s --check-prefix=CLASS
// RUN: not zest-opt %s -split-input-file -zest-group-units="world-size=0" 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not zest-opt %s -split-input-file -zest-group-units="strategy=ddp" 2>&1 | FileCheck %s --check-prefix=STRATEGY
// STRATEGY: error: unknown strategy 'ddp': use full-shard, shard-grad-op, no-shard or hybrid-shard
// RUN: not zest-opt %s -split-input-file -zest-group-units="min-unit-numel=-5" 2>&1 | FileCheck %s --check-prefix=NUMEL
// RUN: not zest-opt %s -split-input-file -zest-group-units="ignore=nothing.*" 2>&1 | FileCheck %s --check-prefix=IGNORE
// RUN: not zest-opt %s -split-input-file -zest-group-units="ignore=layers.0.* leaf-modules=layers.0" 2>&1 | FileCheck %s --check-prefix=CONFLICT
// RUN: not zest-opt %s -split-input-file -zest-group-units="leaf-modules=layers.[" 2>&1 | FileCheck %s --check-prefix=GLOB

// RUN: not zest-opt %s -split-input-file -zest-group-units="world-size=4 replicas=3 strategy=hybrid-shard" 2>&1 | FileCheck %s --check-prefix=REPLICAS
// RUN: not zest-opt %s -split-input-file -zest-group-units="world-size=4 replicas=2" 2>&1 | FileCheck %s --check-prefix=NOTHYBRID
// RUN: not zest-opt %s -split-input-file -zest-group-units="param-dtype=fp8" 2>&1 | FileCheck %s --check-prefix=DTYPE

// WORLD: error: world-size must be at least 1, got 0
// REPLICAS: error: replicas=3 must be a positive divisor of world-size=4
// NOTHYBRID: error: replicas=2 needs strategy=hybrid-shard (got full-shard)
// NUMEL: error: min-unit-numel must be non-negative, got -5
// IGNORE: error: no parameter matches 'nothing.*' (ignore)
// CONFLICT: error: conflicting options: leaf module 'layers.0' is chosen as a unit but all its parameters are ignored
// GLOB: error: invalid leaf-modules pattern 'layers.['
// CLASS: error: no module matches class 'Block' (leaf-classes) in 'zest.module_classes'
// CLASS: error: leaf-classes needs the module attribute 'zest.module_classes' mapping module paths to class names

// As DeepSpeed does when no leaf module is found, a pattern that matches no
// module is an error, located at the module.
// expected-error@+1 {{no module matches 'blocks.*' (leaf-modules): module paths are parameter names without their last component, e.g. 'layers.0'}}
module attributes {zest.module_classes = {"layers.0" = "Layer"}} {
  func.func @f(%w: tensor<4xf32> {zest.param = "layers.0.w"}) {
    return
  }
}

// -----

// Units are declared once: grouping an already grouped module is an error.
// expected-error@+1 {{module already declares zest.unit ops: grouping runs once, on the unsharded model}}
module {
  zest.unit @root sharded : f32, world_size = 1, padded_size = 4, shard_size = 4 [
    "w" : tensor<4xf32> at 0
  ]
}

// -----

// Without zest.module_classes, leaf-classes cannot work (checked by CLASS).
module {
  func.func @f(%w: tensor<4xf32> {zest.param = "layers.0.w"}) {
    return
  }
}
// DTYPE: param-dtype must be bf16, f16 or f32, got 'fp8'
