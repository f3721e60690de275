// RUN: zest-opt %s -split-input-file -zest-shard-params | FileCheck %s
// RUN: zest-opt %s -split-input-file -zest-shard-params -cse | FileCheck %s --check-prefix=CSE

// Forward + backward of two layers (FULL_SHARD): layers.0 is gathered in
// forward and re-gathered in backward; layers.1's forward and backward uses
// are adjacent, so one gather serves both. Gradients are flattened and
// reduce-scattered right after the unit's last gradient.

zest.unit @layers.0 sharded : f32, world_size = 2, padded_size = 6, shard_size = 3 [
  "layers.0.w" : tensor<4xf32> at 0,
  "layers.0.b" : tensor<1xf32> at 4
]
zest.unit @layers.1 sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 [
  "layers.1.w" : tensor<4xf32> at 0
]

// CHECK-LABEL: func.func @step(
// CHECK-SAME:    %[[S0:.*]]: tensor<3xf32> {zest.unit = @layers.0}, %[[S1:.*]]: tensor<2xf32> {zest.unit = @layers.1}, %[[X:.*]]: tensor<4xf32>)
// CHECK-SAME:    -> (f32 {zest.loss}, tensor<3xf32> {zest.unit_grad = @layers.0}, tensor<2xf32> {zest.unit_grad = @layers.1})
func.func @step(%w0: tensor<4xf32> {zest.param = "layers.0.w"},
                %b0: tensor<1xf32> {zest.param = "layers.0.b"},
                %w1: tensor<4xf32> {zest.param = "layers.1.w"},
                %x: tensor<4xf32>)
    -> (f32 {zest.loss}, tensor<4xf32> {zest.grad = "layers.0.w"},
        tensor<1xf32> {zest.grad = "layers.0.b"}, tensor<4xf32> {zest.grad = "layers.1.w"}) {
  // CHECK:      %[[F0:.*]] = zest.all_gather %[[S0]] for @layers.0 : tensor<3xf32> -> tensor<6xf32>
  // CHECK-NEXT: %[[W0:.*]] = zest.unflatten %[[F0]], @layers.0, "layers.0.w" : tensor<6xf32> -> tensor<4xf32>
  // CHECK-NEXT: %[[H:.*]] = arith.mulf %[[X]], %[[W0]]
  %h = arith.mulf %x, %w0 : tensor<4xf32>
  // CHECK-NEXT: %[[F1:.*]] = zest.all_gather %[[S1]] for @layers.1 : tensor<2xf32> -> tensor<4xf32>
  // CHECK-NEXT: %[[W1:.*]] = zest.unflatten %[[F1]], @layers.1, "layers.1.w"
  // CHECK-NEXT: %[[Y:.*]] = arith.mulf %[[H]], %[[W1]]
  %y = arith.mulf %h, %w1 : tensor<4xf32>
  // CHECK:      %[[L:.*]] = tensor.extract %[[Y]]
  %c0 = arith.constant 0 : index
  %l = tensor.extract %y[%c0] : tensor<4xf32>
  // backward of layers.1: same interval, no new gather
  // CHECK-NEXT: %[[DH:.*]] = arith.mulf %[[Y]], %[[W1]]
  %dh = arith.mulf %y, %w1 : tensor<4xf32>
  // CHECK-NEXT: %[[DW1:.*]] = arith.mulf %[[Y]], %[[H]]
  %dw1 = arith.mulf %y, %h : tensor<4xf32>
  // CHECK-NEXT: %[[G1:.*]] = zest.flatten @layers.1 ["layers.1.w"] (%[[DW1]]) : tensor<4xf32> -> tensor<4xf32>
  // CHECK-NEXT: %[[R1:.*]] = zest.reduce_scatter avg %[[G1]] for @layers.1 : tensor<4xf32> -> tensor<2xf32>
  // backward of layers.0: re-gather, both views
  // CHECK-NEXT: %[[F0B:.*]] = zest.all_gather %[[S0]] for @layers.0
  // CHECK-NEXT: %[[W0B:.*]] = zest.unflatten %[[F0B]], @layers.0, "layers.0.w"
  // CHECK-NEXT: %[[B0B:.*]] = zest.unflatten %[[F0B]], @layers.0, "layers.0.b"
  // CHECK-NEXT: %[[DX:.*]] = arith.mulf %[[DH]], %[[W0B]]
  %dx = arith.mulf %dh, %w0 : tensor<4xf32>
  // CHECK-NEXT: %[[DB0:.*]] = tensor.insert_slice %[[B0B]]
  %db0 = tensor.insert_slice %b0 into %dx[0] [1] [1] : tensor<1xf32> into tensor<4xf32>
  %db = tensor.extract_slice %db0[0] [1] [1] : tensor<4xf32> to tensor<1xf32>
  // CHECK:      %[[G0:.*]] = zest.flatten @layers.0 ["layers.0.w", "layers.0.b"]
  // CHECK-NEXT: %[[R0:.*]] = zest.reduce_scatter avg %[[G0]] for @layers.0 : tensor<6xf32> -> tensor<3xf32>
  // CHECK-NEXT: return %[[L]], %[[R0]], %[[R1]]
  return %l, %dx, %db, %dw1 : f32, tensor<4xf32>, tensor<1xf32>, tensor<4xf32>
}

// CSE keeps both gathers of layers.0.
// CSE-LABEL: func.func @step(
// CSE-COUNT-2: zest.all_gather %arg0 for @layers.0
// CSE-NOT: zest.all_gather %arg0 for @layers.0

// -----

// World size 1 still works: the "gather" and "reduce-scatter" are over one
// rank. Frozen parameters (no zest.grad) get no gradient work: their
// elements of the flat gradient are zeros (not named in zest.flatten), and a
// unit with only frozen parameters returns no gradient.

zest.unit @enc sharded : f32, world_size = 1, padded_size = 8, shard_size = 8 [
  "enc.w" : tensor<4xf32> at 0,
  "enc.frozen" : tensor<4xf32> at 4
]
zest.unit @frozen sharded : f32, world_size = 1, padded_size = 2, shard_size = 2 [
  "frozen.w" : tensor<2xf32> at 0
]

// CHECK-LABEL: func.func @frozen_params(
// CHECK-SAME:    %[[E:.*]]: tensor<8xf32> {zest.unit = @enc}, %[[F:.*]]: tensor<2xf32> {zest.unit = @frozen})
// CHECK-SAME:    -> (f32 {zest.loss}, tensor<8xf32> {zest.unit_grad = @enc})
func.func @frozen_params(%w: tensor<4xf32> {zest.param = "enc.w"},
                  %fz: tensor<4xf32> {zest.param = "enc.frozen"},
                  %f: tensor<2xf32> {zest.param = "frozen.w"})
    -> (f32 {zest.loss}, tensor<4xf32> {zest.grad = "enc.w"}) {
  // CHECK: zest.all_gather %[[E]] for @enc : tensor<8xf32> -> tensor<8xf32>
  // CHECK: %[[S:.*]] = arith.addf
  %s = arith.addf %w, %fz : tensor<4xf32>
  // CHECK-NEXT: zest.flatten @enc ["enc.w"] (%[[S]]) : tensor<4xf32> -> tensor<8xf32>
  // CHECK-NEXT: zest.reduce_scatter avg %{{.*}} for @enc : tensor<8xf32> -> tensor<8xf32>
  // CHECK: zest.all_gather %[[F]] for @frozen : tensor<2xf32> -> tensor<2xf32>
  // CHECK-NOT: zest.flatten @frozen
  // CHECK: return
  %c0 = arith.constant 0 : index
  %l = tensor.extract %f[%c0] : tensor<2xf32>
  return %l, %s : f32, tensor<4xf32>
}

// -----

// Tied weights: the embedding is used by the first and the last module, with
// another unit in between: two gathers of the embed unit. Its gradient sums
// both uses in the IR and is reduce-scattered once.

zest.unit @embed sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 [
  "embed.weight" : tensor<4xf32> at 0
]
zest.unit @block sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 [
  "block.w" : tensor<4xf32> at 0
]

// CHECK-LABEL: func.func @tied(
func.func @tied(%e: tensor<4xf32> {zest.param = "embed.weight"},
                %w: tensor<4xf32> {zest.param = "block.w"},
                %x: tensor<4xf32>)
    -> (f32 {zest.loss}, tensor<4xf32> {zest.grad = "embed.weight"}) {
  %c0 = arith.constant 0 : index
  // CHECK:      zest.all_gather %arg0 for @embed
  // CHECK-NEXT: zest.unflatten
  // CHECK-NEXT: arith.mulf
  %h = arith.mulf %x, %e : tensor<4xf32>
  // CHECK-NEXT: zest.all_gather %arg1 for @block
  // CHECK-NEXT: zest.unflatten
  // CHECK-NEXT: arith.mulf
  %h2 = arith.mulf %h, %w : tensor<4xf32>
  // CHECK-NEXT: zest.all_gather %arg0 for @embed
  // CHECK-NEXT: zest.unflatten
  // CHECK-NEXT: arith.mulf
  %out = arith.mulf %h2, %e : tensor<4xf32>
  // CHECK-NEXT: arith.addf
  // CHECK-NEXT: zest.flatten @embed
  // CHECK-NEXT: zest.reduce_scatter avg
  %g = arith.addf %h, %h2 : tensor<4xf32>
  %l = tensor.extract %out[%c0] : tensor<4xf32>
  return %l, %g : f32, tensor<4xf32>
}

// -----

// Replicated (ignored) units: every rank has the whole buffer, so views come
// straight from the argument and gradients are all-reduced (averaged).

zest.unit @ignored replicated : f32, world_size = 4, padded_size = 3, shard_size = 3 [
  "norm.scale" : tensor<3xf32> at 0
]

// CHECK-LABEL: func.func @replicated(
// CHECK-SAME:    %[[R:.*]]: tensor<3xf32> {zest.unit = @ignored}
// CHECK-SAME:    -> (tensor<1xf32> {zest.loss}, tensor<3xf32> {zest.unit_grad = @ignored})
func.func @replicated(%s: tensor<3xf32> {zest.param = "norm.scale"}, %x: tensor<3xf32>)
    -> (tensor<1xf32> {zest.loss}, tensor<3xf32> {zest.grad = "norm.scale"}) {
  // CHECK-NEXT: %[[V:.*]] = zest.unflatten %[[R]], @ignored, "norm.scale" : tensor<3xf32> -> tensor<3xf32>
  // CHECK-NOT:  zest.all_gather
  // CHECK:      %[[Y:.*]] = arith.mulf %{{.*}}, %[[V]]
  %y = arith.mulf %x, %s : tensor<3xf32>
  // CHECK-NEXT: %[[G:.*]] = zest.flatten @ignored ["norm.scale"] (%[[Y]])
  // CHECK-NEXT: zest.all_reduce avg %[[G]] for @ignored : tensor<3xf32>
  %l = tensor.extract_slice %y[0] [1] [1] : tensor<3xf32> to tensor<1xf32>
  return %l, %y : tensor<1xf32>, tensor<3xf32>
}

// -----

// Several functions share units: each takes the units it uses, in unit
// order, whatever its argument order. A use inside a nested region is fed by
// a gather before the enclosing top-level op.

zest.unit @a sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 [
  "a.w" : tensor<4xf32> at 0
]
zest.unit @b sharded : f32, world_size = 2, padded_size = 2, shard_size = 1 [
  "b.w" : tensor<2xf32> at 0
]
zest.unit @c sharded : f32, world_size = 2, padded_size = 2, shard_size = 1 [
  "c.w" : tensor<2xf32> at 0
]

// CHECK-LABEL: func.func @train(
// CHECK-SAME:    tensor<2xf32> {zest.unit = @a}, %{{.*}}: tensor<1xf32> {zest.unit = @b}, %{{.*}}: i1)
func.func @train(%b: tensor<2xf32> {zest.param = "b.w"}, %a: tensor<4xf32> {zest.param = "a.w"}, %p: i1)
    -> tensor<4xf32> {
  // CHECK:      zest.all_gather %arg0 for @a
  // CHECK-NEXT: zest.unflatten
  // CHECK-NEXT: scf.if
  %r = scf.if %p -> tensor<4xf32> {
    %d = arith.addf %a, %a : tensor<4xf32>
    scf.yield %d : tensor<4xf32>
  } else {
    scf.yield %a : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}
// CHECK-LABEL: func.func @eval(
// CHECK-SAME:    %{{.*}}: tensor<1xf32> {zest.unit = @b}, %{{.*}}: tensor<1xf32> {zest.unit = @c})
// CHECK-SAME:    -> tensor<2xf32>
func.func @eval(%c: tensor<2xf32> {zest.param = "c.w"}, %b: tensor<2xf32> {zest.param = "b.w"}) -> tensor<2xf32> {
  // One op using both units: both gathered before it, in unit order.
  // CHECK:      zest.all_gather %arg0 for @b
  // CHECK:      zest.all_gather %arg1 for @c
  // CHECK:      arith.addf
  %s = arith.addf %b, %c : tensor<2xf32>
  return %s : tensor<2xf32>
}

// -----

// Hybrid sharding (2 replicas of 2 shards): the gradient is reduce-scattered
// within the replica, then the shard is all-reduced across the replicas;
// the replicated unit's gradient is all-reduced once, over every rank.

zest.unit @h sharded : f32, world_size = 2, replicas = 2, padded_size = 4, shard_size = 2 [
  "h.w" : tensor<4xf32> at 0
]
zest.unit @rep replicated : f32, world_size = 2, replicas = 2, padded_size = 2, shard_size = 2 [
  "rep.b" : tensor<2xf32> at 0
]

// CHECK-LABEL: func.func @hybrid(
// CHECK-SAME:    -> (f32 {zest.loss}, tensor<2xf32> {zest.unit_grad = @h}, tensor<2xf32> {zest.unit_grad = @rep})
func.func @hybrid(%w: tensor<4xf32> {zest.param = "h.w"},
                  %b: tensor<2xf32> {zest.param = "rep.b"}, %l: f32)
    -> (f32 {zest.loss}, tensor<4xf32> {zest.grad = "h.w"}, tensor<2xf32> {zest.grad = "rep.b"}) {
  // CHECK:      zest.all_gather %{{.*}} for @h : tensor<2xf32> -> tensor<4xf32>
  // CHECK:      %[[GW:.*]] = arith.mulf
  %gw = arith.mulf %w, %w : tensor<4xf32>
  // CHECK-NEXT: %[[FW:.*]] = zest.flatten @h ["h.w"] (%[[GW]])
  // CHECK-NEXT: %[[RW:.*]] = zest.reduce_scatter avg %[[FW]] for @h : tensor<4xf32> -> tensor<2xf32>
  // CHECK-NEXT: %[[AW:.*]] = zest.all_reduce avg %[[RW]] for @h across_replicas : tensor<2xf32>
  // CHECK:      %[[GB:.*]] = arith.addf
  %gb = arith.addf %b, %b : tensor<2xf32>
  // CHECK-NEXT: %[[FB:.*]] = zest.flatten @rep ["rep.b"] (%[[GB]])
  // CHECK-NEXT: %[[AB:.*]] = zest.all_reduce avg %[[FB]] for @rep : tensor<2xf32>
  // CHECK-NOT:  across_replicas
  // CHECK:      return %{{.*}}, %[[AW]], %[[AB]]
  return %l, %gw, %gb : f32, tensor<4xf32>, tensor<2xf32>
}

// -----

// Autocast: layers.0's weight is transposed and rounded to bf16 in the
// forward, and the backward reads the rounded weight again. Kept, that copy
// would live from forward to backward (the weight's bytes per layer); it is
// derived again from the backward's re-gather instead, and the forward's
// copy dies in the forward. A derivation read only where it was made (the
// layers.1 cast) is left alone.

zest.unit @layers.0 sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "layers.0.w" : tensor<2x4xf32> at 0
]
zest.unit @layers.1 sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 [
  "layers.1.w" : tensor<4xf32> at 0
]

#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @rederived(
// CHECK:         %[[F0:.*]] = zest.all_gather %{{.*}} for @layers.0
// CHECK-NEXT:    %[[W0:.*]] = zest.unflatten %[[F0]], @layers.0, "layers.0.w"
// CHECK:         %[[T:.*]] = linalg.transpose ins(%[[W0]] : tensor<2x4xf32>)
// CHECK:         %[[R:.*]] = linalg.generic {{.*}} ins(%[[T]] : tensor<4x2xf32>)
// CHECK:         linalg.matmul ins(%{{.*}}, %[[R]] :
// CHECK:         zest.all_gather %{{.*}} for @layers.1
// CHECK:         %[[F0B:.*]] = zest.all_gather %{{.*}} for @layers.0
// CHECK-NEXT:    %[[W0B:.*]] = zest.unflatten %[[F0B]], @layers.0, "layers.0.w"
// CHECK:         %[[TB:.*]] = linalg.transpose ins(%[[W0B]] : tensor<2x4xf32>)
// CHECK:         %[[RB:.*]] = linalg.generic {{.*}} ins(%[[TB]] : tensor<4x2xf32>)
// CHECK:         linalg.matmul ins(%{{.*}}, %[[RB]] :
// CHECK-NOT:     zest.all_gather %{{.*}} for @layers.0
// CSE keeps the two derivations: they read different gathers.
// CSE-LABEL: func.func @rederived(
// CSE-COUNT-2: linalg.transpose
func.func @rederived(%w0: tensor<2x4xf32> {zest.param = "layers.0.w"},
                     %w1: tensor<4xf32> {zest.param = "layers.1.w"},
                     %x: tensor<3x4xbf16>, %dy: tensor<3x4xbf16>,
                     %v: tensor<4xbf16>)
    -> (tensor<3x2xf32>, tensor<4xbf16>, tensor<3x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x2xf32>
  %t = linalg.transpose ins(%w0 : tensor<2x4xf32>) outs(%e : tensor<4x2xf32>) permutation = [1, 0]
  %eb = tensor.empty() : tensor<4x2xbf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<4x2xf32>) outs(%eb : tensor<4x2xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %c = arith.truncf %in : f32 to bf16
    linalg.yield %c : bf16
  } -> tensor<4x2xbf16>
  %init = tensor.empty() : tensor<3x2xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<3x2xf32>) -> tensor<3x2xf32>
  %y = linalg.matmul ins(%x, %r : tensor<3x4xbf16>, tensor<4x2xbf16>) outs(%acc : tensor<3x2xf32>) -> tensor<3x2xf32>
  // layers.1 in between: its own cast, read only here.
  %e1 = tensor.empty() : tensor<4xbf16>
  %w1b = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%w1 : tensor<4xf32>) outs(%e1 : tensor<4xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %c = arith.truncf %in : f32 to bf16
    linalg.yield %c : bf16
  } -> tensor<4xbf16>
  %z = arith.mulf %w1b, %v : tensor<4xbf16>
  // The backward of layers.0 reads the rounded weight again.
  %y2 = linalg.matmul ins(%dy, %r : tensor<3x4xbf16>, tensor<4x2xbf16>) outs(%acc : tensor<3x2xf32>) -> tensor<3x2xf32>
  return %y, %z, %y2 : tensor<3x2xf32>, tensor<4xbf16>, tensor<3x2xf32>
}
