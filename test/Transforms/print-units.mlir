// RUN: zest-opt %s -zest-print-units -o /dev/null | FileCheck %s

// One row per unit, then totals: per-rank bytes against the unsharded model.
// CHECK:      unit      kind        dtype  params       numel      padded       shard   bytes/rank
// CHECK-NEXT: layers.0  sharded     f32         2         544         546         182          728
// CHECK-NEXT: ignored   replicated  bf16        1           3           3           3            6
// CHECK-NEXT: total: 2 units, 3 parameters, 547 elements, world size 3
// CHECK-NEXT: parameter bytes per rank: 734 sharded vs 2182 replicated (2.97x less)

zest.unit @layers.0 sharded : f32, world_size = 3, padded_size = 546, shard_size = 182 [
  "layers.0.weight" : tensor<32x16xf32> at 0,
  "layers.0.bias" : tensor<32xf32> at 512
]
zest.unit @ignored replicated : bf16, world_size = 3, padded_size = 3, shard_size = 3 [
  "norm.scale" : tensor<3xbf16> at 0
]
