// RUN: zest-opt %s -split-input-file -zest-group-units="world-size=2 block-units" | FileCheck %s
// RUN: zest-opt %s -split-input-file -zest-group-units="world-size=2 block-units min-unit-numel=50" | FileCheck %s --check-prefix=EXPLICIT
// RUN: zest-opt %s -split-input-file -zest-group-units="world-size=2 block-units=false" | FileCheck %s --check-prefix=OFF

// Default units for imported models (block-units): each repeated block class
// of zest.module_classes is a unit, the rest is the root unit.

// A decoder: two Blocks, indexed children of `layers`, each with submodules.
// CHECK-LABEL: module attributes
// CHECK-SAME:  zest.unit_policy = "repeated block class Block (2 modules); the rest in root"
// CHECK:       zest.unit @root sharded : f32, world_size = 2, padded_size = 110, shard_size = 55 [
// CHECK:       zest.unit @layers.0 sharded : f32, world_size = 2, padded_size = 60, shard_size = 30 [
// CHECK:       zest.unit @layers.1 sharded
// CHECK-NOT:   zest.unit
// An explicit option wins; the policy says which.
// EXPLICIT-LABEL: module attributes
// EXPLICIT-SAME:  zest.unit_policy = "min-unit-numel=50; the rest in root"
// EXPLICIT:       zest.unit @embed
// EXPLICIT:       zest.unit @layers.0
// EXPLICIT:       zest.unit @layers.1
// EXPLICIT:       zest.unit @root
// Without block-units (zestc --block-units=false): one root unit.
// OFF-LABEL: module attributes
// OFF-SAME:  zest.unit_policy = "one root unit: no leaf option"
// OFF:       zest.unit @root
// OFF-NOT:   zest.unit @layers
module attributes {zest.module_classes = {"embed" = "Embedding", "layers" = "ModuleList", "layers.0" = "Block", "layers.1" = "Block", "layers.0.attn" = "Linear", "layers.0.mlp" = "MLP", "layers.1.attn" = "Linear", "layers.1.mlp" = "MLP", "layers.0.mlp.fc" = "Linear", "layers.1.mlp.fc" = "Linear", "head" = "Linear"}} {
  func.func @step(%e: tensor<10x10xf32> {zest.param = "embed.weight"},
                  %a0: tensor<30xf32> {zest.param = "layers.0.attn.weight"},
                  %m0: tensor<3x10xf32> {zest.param = "layers.0.mlp.fc.weight"},
                  %a1: tensor<30xf32> {zest.param = "layers.1.attn.weight"},
                  %m1: tensor<3x10xf32> {zest.param = "layers.1.mlp.fc.weight"},
                  %h: tensor<10xf32> {zest.param = "head.weight"}) {
    return
  }
}

// -----

// A Sequential of Linears: indexed, repeated, but no submodules: no block,
// one root unit as before.
// CHECK-LABEL: module attributes
// CHECK-SAME:  zest.unit_policy = "one root unit: no leaf option and no repeated block class"
// CHECK:       zest.unit @root
// CHECK-NOT:   zest.unit
module attributes {zest.module_classes = {"0" = "Linear", "1" = "ReLU", "2" = "Linear"}} {
  func.func @step(%w0: tensor<4x4xf32> {zest.param = "0.weight"},
                  %w2: tensor<4x4xf32> {zest.param = "2.weight"}) {
    return
  }
}

// -----

// Blocks inside blocks (experts in a layer) belong to the outermost; the same
// class in two containers (encoder and decoder) counts as one class; a
// single indexed composite module (`pool.0`) is no repeated block.
// CHECK-LABEL: module attributes
// CHECK-SAME:  zest.unit_policy = "repeated block class Layer (4 modules); the rest in root"
// CHECK:       zest.unit @root sharded : f32, world_size = 2, padded_size = 2, shard_size = 1 [
// CHECK-NEXT:    "pool.0.proj.weight"
// CHECK-NEXT:  ]
// CHECK-NEXT:  zest.unit @encoder.layers.0 sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 [
// CHECK-NEXT:    "encoder.layers.0.experts.0.fc.weight"
// CHECK-NEXT:    "encoder.layers.0.experts.1.fc.weight"
// CHECK-NEXT:  ]
// CHECK-NEXT:  zest.unit @encoder.layers.1
// CHECK-NEXT:    "encoder.layers.1.experts.0.fc.weight"
// CHECK-NEXT:    "encoder.layers.1.experts.1.fc.weight"
// CHECK-NEXT:  ]
// CHECK-NEXT:  zest.unit @decoder.layers.0
// CHECK-NEXT:    "decoder.layers.0.norm.weight"
// CHECK-NEXT:  ]
// CHECK-NEXT:  zest.unit @decoder.layers.1
// CHECK-NOT:   zest.unit
module attributes {zest.module_classes = {"encoder.layers.0" = "Layer", "encoder.layers.1" = "Layer", "decoder.layers.0" = "Layer", "decoder.layers.1" = "Layer", "encoder.layers.0.experts.0" = "Expert", "encoder.layers.0.experts.1" = "Expert", "encoder.layers.1.experts.0" = "Expert", "encoder.layers.1.experts.1" = "Expert", "encoder.layers.0.experts.0.fc" = "Linear", "encoder.layers.0.experts.1.fc" = "Linear", "encoder.layers.1.experts.0.fc" = "Linear", "encoder.layers.1.experts.1.fc" = "Linear", "decoder.layers.0.norm" = "LayerNorm", "decoder.layers.1.norm" = "LayerNorm", "pool.0" = "Pool", "pool.0.proj" = "Linear"}} {
  func.func @step(%p: tensor<2xf32> {zest.param = "pool.0.proj.weight"},
                  %a: tensor<2xf32> {zest.param = "encoder.layers.0.experts.0.fc.weight"},
                  %b: tensor<2xf32> {zest.param = "encoder.layers.0.experts.1.fc.weight"},
                  %c: tensor<2xf32> {zest.param = "encoder.layers.1.experts.0.fc.weight"},
                  %d: tensor<2xf32> {zest.param = "encoder.layers.1.experts.1.fc.weight"},
                  %e: tensor<2xf32> {zest.param = "decoder.layers.0.norm.weight"},
                  %f: tensor<2xf32> {zest.param = "decoder.layers.1.norm.weight"}) {
    return
  }
}

// -----

// No zest.module_classes (hand-written IR): one root unit.
// CHECK-LABEL: module attributes
// CHECK-SAME:  zest.unit_policy = "one root unit: no leaf option"
// CHECK:       zest.unit @root
// CHECK-NOT:   zest.unit
module {
  func.func @step(%w: tensor<4xf32> {zest.param = "fc.weight"}) {
    return
  }
}
