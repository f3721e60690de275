// RUN: zest-opt %s -split-input-file --zest-insert-optimizer | FileCheck %s
// RUN: zest-opt %s -split-input-file --zest-insert-optimizer="optimizer=adamw" | FileCheck %s --check-prefix=ADAMW
// RUN: zest-opt %s -split-input-file --zest-insert-optimizer="optimizer=sgd momentum nesterov" | FileCheck %s --check-prefix=NESTEROV
// RUN: zest-opt %s -split-input-file --zest-insert-optimizer="max-grad-norm=1.5" | FileCheck %s --check-prefix=CLIP
// RUN: zest-opt %s -split-input-file --zest-insert-optimizer="no-sync" | FileCheck %s --check-prefix=NOSYNC

// no-sync: @step gets the companion @step_accumulate, which sums each
// unit's flat gradient (the flatten's result, or the replicated unit's) into
// its zest.grad_sum argument (stored on the first micro-batch, added after)
// and neither reduces nor updates; @step adds its gradient to the sum,
// reduces the sum once and updates without a shard accumulator.
// NOSYNC-LABEL: func.func @step_accumulate(
// NOSYNC-SAME:    %{{[^:]*}}: tensor<10xf32> {zest.hyper}, %[[SA:[^:]*]]: tensor<8xf32> {zest.grad_sum = @a}, %[[SR:[^:]*]]: tensor<2xf32> {zest.grad_sum = @r})
// NOSYNC-SAME:    -> (tensor<f32> {zest.loss}, tensor<8xf32> {zest.updated = 4 : i64}, tensor<2xf32> {zest.updated = 5 : i64}) attributes {zest.accumulate_for = @step}
// NOSYNC:         %[[ACCUMULATE:.*]] = arith.cmpf une
// NOSYNC:         %[[F:.*]] = zest.flatten @a
// NOSYNC-NEXT:    %[[A:.*]] = linalg.generic {{.*}} ins(%[[F]] : tensor<8xf32>) outs(%[[SA]] : tensor<8xf32>)
// NOSYNC:           arith.select %[[ACCUMULATE]]
// NOSYNC-NOT:     zest.reduce_scatter
// NOSYNC-NOT:     zest.all_reduce
// NOSYNC-NOT:     zest.update
// NOSYNC:         return %{{.*}}, %[[A]], %{{.*}} : tensor<f32>, tensor<8xf32>, tensor<2xf32>
// NOSYNC-LABEL: func.func @step(
// NOSYNC-SAME:    %{{[^:]*}}: tensor<10xf32> {zest.hyper}, %[[GA:[^:]*]]: tensor<8xf32> {zest.grad_sum = @a}, %{{[^:]*}}: tensor<2xf32> {zest.grad_sum = @r})
// NOSYNC:         %[[SUM:.*]] = linalg.generic {{.*}} outs(%[[GA]] : tensor<8xf32>)
// NOSYNC:         %[[RED:.*]] = zest.reduce_scatter avg %[[SUM]] for @a
// NOSYNC:         zest.update sgd @a %{{.*}}, %[[RED]] hyper(%{{.*}}) {frozen = ["a.b"]} : (tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> tensor<4xf32>

// Each unit's update comes right after its gradient is reduced AND after the
// last read of its shard or of a view of its gathered buffer (%late reads
// a.w after the reduce-scatter): at W=1 the gather is the shard itself, and
// updating it earlier would force a copy. a.b has no gradient: it is frozen.
// The replicated unit is updated from its all-reduced gradient. The new
// arguments (hyperparameters, state, accumulator) come last; gradient results
// become the updated values, each naming the argument it overwrites.

// CHECK-LABEL: func.func @step(
// CHECK-SAME:    %[[S:[^:]*]]: tensor<4xf32> {zest.unit = @a}, %[[RS:[^:]*]]: tensor<2xf32> {zest.unit = @r}, %{{[^:]*}}: tensor<2x3xf32>,
// CHECK-SAME:    %[[H:[^:]*]]: tensor<10xf32> {zest.hyper}, %[[ACC:[^:]*]]: tensor<4xf32> {zest.grad_accum = @a}, %[[RACC:[^:]*]]: tensor<2xf32> {zest.grad_accum = @r})
// CHECK-SAME:    -> (tensor<f32> {zest.loss}, tensor<4xf32> {zest.updated = 0 : i64}, tensor<4xf32> {zest.updated = 4 : i64}, tensor<2xf32> {zest.updated = 1 : i64}, tensor<2xf32> {zest.updated = 5 : i64})
// CHECK-SAME:    attributes {zest.optimizer = "sgd"}
// CHECK:         %[[GS:.*]] = zest.reduce_scatter avg
// CHECK-NEXT:    %[[LATE:.*]] = linalg.add
// CHECK-NEXT:    %[[P:.*]], %[[A:.*]] = zest.update sgd @a %[[S]], %[[GS]] accum(%[[ACC]]) hyper(%[[H]]) {frozen = ["a.b"]}
// CHECK-NEXT:    %[[RG:.*]] = zest.all_reduce avg %[[RS]]
// CHECK-NEXT:    %[[RP:.*]], %[[RA:.*]] = zest.update sgd @r %[[RS]], %[[RG]] accum(%[[RACC]]) hyper(%[[H]]) :
// CHECK:         return %{{.*}}, %[[P]], %[[A]], %[[RP]], %[[RA]]
// Functions without gradients (forward only) are left alone.
// CHECK-LABEL: func.func @forward(%{{[^:]*}}: tensor<4xf32> {zest.unit = @a}) -> tensor<8xf32> {
// CHECK-NOT:     zest.update

// AdamW keeps exp_avg and exp_avg_sq per unit, in the shard's layout.
// ADAMW-LABEL: func.func @step(
// ADAMW-SAME:    %{{[^:]*}}: tensor<4xf32> {zest.optimizer_state = {name = "exp_avg", unit = @a}}, %{{[^:]*}}: tensor<4xf32> {zest.optimizer_state = {name = "exp_avg_sq", unit = @a}}, %{{[^:]*}}: tensor<4xf32> {zest.grad_accum = @a}
// ADAMW-SAME:    attributes {zest.optimizer = "adamw"}
// ADAMW:         zest.update adamw @a %{{.*}} state(%{{.*}}, %{{.*}}) accum(

// NESTEROV-LABEL: func.func @step(
// NESTEROV-SAME:    {zest.optimizer_state = {name = "momentum_buffer", unit = @a}}
// NESTEROV:         zest.update sgd @a %{{.*}} state(%{{.*}}) accum(%{{.*}}) hyper(%{{.*}}) {frozen = ["a.b"], nesterov}

// With clipping, the updates wait at the end for the global norm of both
// units' gradients and take the gradient scale times min(1, 1.5 / (norm +
// 1e-6)); the norm is the step's last result (for the metrics).
// CLIP-LABEL: func.func @step(
// CLIP-SAME:    %[[H:[^:]*]]: tensor<10xf32> {zest.hyper}, %[[ACC:[^:]*]]: tensor<4xf32> {zest.grad_accum = @a}, %[[RACC:[^:]*]]: tensor<2xf32> {zest.grad_accum = @r})
// CLIP-SAME:    tensor<2xf32> {zest.updated = 5 : i64}, tensor<f32> {zest.grad_norm})
// CLIP:         %[[GS:.*]] = zest.reduce_scatter avg
// CLIP:         %[[RG:.*]] = zest.all_reduce avg
// CLIP:         %[[N:.*]] = zest.global_grad_norm(%[[GS]], %[[RG]]) accum(%[[ACC]], %[[RACC]]) hyper(%[[H]]) units [@a, @r]
// CLIP-NEXT:    %[[NV:.*]] = tensor.extract %[[N]][]
// CLIP-NEXT:    %[[EPS:.*]] = arith.constant 9.99999997E-7 : f32
// CLIP-NEXT:    %[[D:.*]] = arith.addf %[[NV]], %[[EPS]]
// CLIP-NEXT:    %[[MAX:.*]] = arith.constant 1.500000e+00 : f32
// CLIP-NEXT:    %[[Q:.*]] = arith.divf %[[MAX]], %[[D]]
// CLIP-NEXT:    %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CLIP-NEXT:    %[[C:.*]] = arith.minimumf %[[Q]], %[[ONE]]
// CLIP:         %[[SCALE:.*]] = tensor.extract %[[H]][%{{.*}}]
// CLIP-NEXT:    %[[CS:.*]] = arith.mulf %[[SCALE]], %[[C]]
// CLIP-NEXT:    %[[H2:.*]] = tensor.insert %[[CS]] into %[[H]][%{{.*}}]
// CLIP-NEXT:    zest.update sgd @a %{{.*}}, %[[GS]] accum(%[[ACC]]) hyper(%[[H2]])
// CLIP-NEXT:    zest.update sgd @r %{{.*}}, %[[RG]] accum(%[[RACC]]) hyper(%[[H2]])
// CLIP-NEXT:    return {{.*}}, %[[N]] : {{.*}}, tensor<f32>

zest.unit @a sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a.w" : tensor<2x3xf32> at 0,
  "a.b" : tensor<2xf32> at 6
]
zest.unit @r replicated : f32, world_size = 2, padded_size = 2, shard_size = 2 [
  "r.v" : tensor<2xf32> at 0
]
func.func @step(%s: tensor<4xf32> {zest.unit = @a}, %rs: tensor<2xf32> {zest.unit = @r},
                %x: tensor<2x3xf32>)
    -> (tensor<f32> {zest.loss}, tensor<4xf32> {zest.unit_grad = @a},
        tensor<2xf32> {zest.unit_grad = @r}) {
  %full = zest.all_gather %s for @a : tensor<4xf32> -> tensor<8xf32>
  %w = zest.unflatten %full, @a, "a.w" : tensor<8xf32> -> tensor<2x3xf32>
  %e = tensor.empty() : tensor<2x3xf32>
  %g = linalg.mul ins(%w, %x : tensor<2x3xf32>, tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) -> tensor<2x3xf32>
  %flat = zest.flatten @a ["a.w"] (%g) : tensor<2x3xf32> -> tensor<8xf32>
  %gs = zest.reduce_scatter avg %flat for @a : tensor<8xf32> -> tensor<4xf32>
  %late = linalg.add ins(%w, %w : tensor<2x3xf32>, tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) -> tensor<2x3xf32>
  %rg = zest.all_reduce avg %rs for @r : tensor<2xf32>
  %c0 = arith.constant 0 : index
  %v = tensor.extract %late[%c0, %c0] : tensor<2x3xf32>
  %loss = tensor.from_elements %v : tensor<f32>
  return %loss, %gs, %rg : tensor<f32>, tensor<4xf32>, tensor<2xf32>
}
func.func @forward(%s: tensor<4xf32> {zest.unit = @a}) -> tensor<8xf32> {
  %full = zest.all_gather %s for @a : tensor<4xf32> -> tensor<8xf32>
  return %full : tensor<8xf32>
}

// -----

// Hybrid sharding: the gradient is the all-reduce across replicas of the
// reduce-scatter; parameters its flatten does not name are still frozen.
// CHECK-LABEL: func.func @hybrid_frozen(
// CHECK:         %[[X:.*]] = zest.all_reduce avg %{{.*}} for @h across_replicas
// CHECK:         zest.update sgd @h %{{.*}}, %[[X]] accum(%{{.*}}) hyper(%{{.*}}) {frozen = ["h.b"]}
// Clipping builds arith and tensor ops into a function that had none (the
// pass loads their dialects).
// CLIP-LABEL: func.func @hybrid_frozen(
// CLIP:         zest.global_grad_norm
// CLIP:         arith.minimumf
zest.unit @h sharded : f32, world_size = 2, replicas = 2, padded_size = 8, shard_size = 4 [
  "h.w" : tensor<6xf32> at 0,
  "h.b" : tensor<2xf32> at 6
]
func.func @hybrid_frozen(%s: tensor<4xf32> {zest.unit = @h}, %dw: tensor<6xf32>, %l: f32)
    -> (f32 {zest.loss}, tensor<4xf32> {zest.unit_grad = @h}) {
  %f = zest.flatten @h ["h.w"] (%dw) : tensor<6xf32> -> tensor<8xf32>
  %r = zest.reduce_scatter avg %f for @h : tensor<8xf32> -> tensor<4xf32>
  %x = zest.all_reduce avg %r for @h across_replicas : tensor<4xf32>
  return %l, %x : f32, tensor<4xf32>
}
