// RUN: zest-opt %s -split-input-file -zest-group-units | FileCheck %s --check-prefix=ROOT
// RUN: zest-opt %s -split-input-file -zest-group-units="world-size=4 leaf-modules=layers.*" | FileCheck %s --check-prefix=LEAF
// RUN: zest-opt %s -split-input-file -zest-group-units="world-size=4 leaf-modules=layers.*,layers.0.mlp" | FileCheck %s --check-prefix=LEAF
// RUN: zest-opt %s -split-input-file -zest-group-units="world-size=4 leaf-modules=layers.* strategy=no-shard" | FileCheck %s --check-prefix=NOSHARD
// RUN: zest-opt %s -split-input-file -zest-group-units="world-size=2 leaf-classes=Block" | FileCheck %s --check-prefix=CLASS
// RUN: zest-opt %s -split-input-file -zest-group-units="world-size=3 min-unit-numel=50" | FileCheck %s --check-prefix=SIZE
// RUN: zest-opt %s -split-input-file -zest-group-units="world-size=4 ignore=embed.* leaf-modules=layers.*" | FileCheck %s --check-prefix=IGNORE
// RUN: zest-opt %s -split-input-file -zest-group-units="world-size=6 replicas=2 strategy=hybrid-shard ignore=embed.* leaf-modules=layers.*" | FileCheck %s --check-prefix=HYBRID

// A small decoder: embed (100), two blocks of attn (30) + mlp (30), head (10).
module attributes {zest.module_classes = {"layers.0" = "Block", "layers.1" = "Block", "layers.0.mlp" = "MLP", "layers.1.mlp" = "MLP"}} {
  func.func @step(%e: tensor<10x10xf32> {zest.param = "embed.weight"},
                  %a0: tensor<30xf32> {zest.param = "layers.0.attn.w"},
                  %m0: tensor<3x10xf32> {zest.param = "layers.0.mlp.w"},
                  %a1: tensor<30xf32> {zest.param = "layers.1.attn.w"},
                  %m1: tensor<3x10xf32> {zest.param = "layers.1.mlp.w"},
                  %h: tensor<10xf32> {zest.param = "head.weight"},
                  %x: tensor<4xf32>) {
    return
  }
}

// No policy: one root unit with every parameter in argument order; world
// size 1 needs no padding.
// ROOT:      zest.unit @root sharded : f32, world_size = 1, padded_size = 230, shard_size = 230 [
// ROOT-NEXT:   "embed.weight" : tensor<10x10xf32> at 0,
// ROOT-NEXT:   "layers.0.attn.w" : tensor<30xf32> at 100,
// ROOT-NEXT:   "layers.0.mlp.w" : tensor<3x10xf32> at 130,
// ROOT-NEXT:   "layers.1.attn.w" : tensor<30xf32> at 160,
// ROOT-NEXT:   "layers.1.mlp.w" : tensor<3x10xf32> at 190,
// ROOT-NEXT:   "head.weight" : tensor<10xf32> at 220
// ROOT-NEXT: ]
// ROOT-NOT:  zest.unit

// Leaf globs: each block is a unit (a nested match, layers.0.mlp, is part of
// its outermost matching ancestor); the rest is the root unit, padded from
// 110 to 112 for 4 ranks. Units are ordered by their first parameter.
// no-shard (DDP): the same units, replicated (no padding, the whole buffer
// on every rank).
// NOSHARD:      zest.unit @root replicated : f32, world_size = 4, padded_size = 110, shard_size = 110 [
// NOSHARD:      zest.unit @layers.0 replicated : f32, world_size = 4, padded_size = 60, shard_size = 60 [
// NOSHARD:      zest.unit @layers.1 replicated
// LEAF:      zest.unit @root sharded : f32, world_size = 4, padded_size = 112, shard_size = 28 [
// LEAF-NEXT:   "embed.weight" : tensor<10x10xf32> at 0,
// LEAF-NEXT:   "head.weight" : tensor<10xf32> at 100
// LEAF-NEXT: ]
// LEAF-NEXT: zest.unit @layers.0 sharded : f32, world_size = 4, padded_size = 60, shard_size = 15 [
// LEAF-NEXT:   "layers.0.attn.w" : tensor<30xf32> at 0,
// LEAF-NEXT:   "layers.0.mlp.w" : tensor<3x10xf32> at 30
// LEAF-NEXT: ]
// LEAF-NEXT: zest.unit @layers.1 sharded : f32, world_size = 4, padded_size = 60, shard_size = 15 [
// LEAF-NOT:  zest.unit

// Leaf classes through zest.module_classes (Block contains MLP: outermost).
// CLASS:     zest.unit @root sharded : f32, world_size = 2, padded_size = 110, shard_size = 55 [
// CLASS:     zest.unit @layers.0 sharded : f32, world_size = 2, padded_size = 60, shard_size = 30 [
// CLASS:     zest.unit @layers.1 sharded : f32, world_size = 2, padded_size = 60, shard_size = 30 [
// CLASS-NOT: zest.unit

// Size-based auto-wrap at 50 elements, bottom-up: attn/mlp (30 each) stay
// pending, each block reaches 60 and is wrapped, embed (100) is wrapped,
// head (10) falls to the root. 10 elements pad to 12 for 3 ranks.
// SIZE:      zest.unit @embed sharded : f32, world_size = 3, padded_size = 102, shard_size = 34 [
// SIZE:      zest.unit @layers.0 sharded : f32, world_size = 3, padded_size = 60, shard_size = 20 [
// SIZE:      zest.unit @layers.1 sharded : f32, world_size = 3, padded_size = 60, shard_size = 20 [
// SIZE:      zest.unit @root sharded : f32, world_size = 3, padded_size = 12, shard_size = 4 [
// SIZE-NEXT:   "head.weight" : tensor<10xf32> at 0
// SIZE-NOT:  zest.unit

// Ignored parameters are replicated (no padding), blocks are units, the head
// is the root.
// IGNORE:      zest.unit @ignored replicated : f32, world_size = 4, padded_size = 100, shard_size = 100 [
// IGNORE-NEXT:   "embed.weight" : tensor<10x10xf32> at 0
// IGNORE-NEXT: ]
// IGNORE:      zest.unit @layers.0 sharded
// IGNORE:      zest.unit @layers.1 sharded
// IGNORE:      zest.unit @root sharded : f32, world_size = 4, padded_size = 12, shard_size = 3 [
// IGNORE-NEXT:   "head.weight" : tensor<10xf32> at 0
// IGNORE-NOT:  zest.unit

// hybrid-shard on 6 ranks as 2 replicas x 3 shards: units are laid out for
// the 3 ranks of a replica (110 -> 12 for the root here, 60 -> 20 shards per
// block) and carry the replicas; the ignored unit is replicated on all.
// HYBRID:      zest.unit @ignored replicated : f32, world_size = 3, replicas = 2, padded_size = 100, shard_size = 100 [
// HYBRID:      zest.unit @layers.0 sharded : f32, world_size = 3, replicas = 2, padded_size = 60, shard_size = 20 [
// HYBRID:      zest.unit @layers.1 sharded : f32, world_size = 3, replicas = 2, padded_size = 60, shard_size = 20 [
// HYBRID:      zest.unit @root sharded : f32, world_size = 3, replicas = 2, padded_size = 12, shard_size = 4 [
