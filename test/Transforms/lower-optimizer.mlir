// RUN: zest-opt %s -split-input-file --zest-lower-optimizer | FileCheck %s

zest.unit @a sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a.w" : tensor<2x3xf32> at 0,
  "a.b" : tensor<2xf32> at 6
]

// SGD: scf.if on the apply flag (hyper[9]), then on the accumulate flag
// (hyper[8]). Applying: one elementwise pass, in place on the shard
// (outs), p -= lr * (g * scale + wd * p), with the accumulator added first
// when accumulating. Storing: accum += grad, or accum = grad.
// CHECK-LABEL: func.func @sgd(
// CHECK-SAME:    %[[P:[^:]*]]: tensor<4xf32>, %[[G:[^:]*]]: tensor<4xf32>, %[[ACC:[^:]*]]: tensor<4xf32>, %[[H:[^:]*]]: tensor<10xf32>)
// CHECK-DAG:     %[[LR:.*]] = tensor.extract %[[H]][%c0]
// CHECK-DAG:     %[[WD:.*]] = tensor.extract %[[H]][%c1]
// CHECK-DAG:     %[[SCALE:.*]] = tensor.extract %[[H]][%c7]
// CHECK-DAG:     %[[ACCUMULATE:.*]] = arith.cmpf une, %{{.*}}, %cst
// CHECK:         %[[APPLY:.*]] = arith.cmpf une
// CHECK:         %[[R:.*]]:2 = scf.if %[[APPLY]] -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK:           scf.if %[[ACCUMULATE]] -> (tensor<4xf32>) {
// CHECK:             linalg.generic {{.*}} ins(%[[G]], %[[ACC]] : tensor<4xf32>, tensor<4xf32>) outs(%[[P]] : tensor<4xf32>)
// CHECK-NEXT:        ^bb0(%[[IG:.*]]: f32, %[[IA:.*]]: f32, %[[OP:.*]]: f32):
// CHECK-NEXT:          %[[SUM:.*]] = arith.addf %[[IA]], %[[IG]]
// CHECK-NEXT:          %[[GS:.*]] = arith.mulf %[[SUM]], %[[SCALE]]
// CHECK-NEXT:          %[[DECAY:.*]] = arith.mulf %[[WD]], %[[OP]]
// CHECK-NEXT:          %[[D:.*]] = arith.addf %[[GS]], %[[DECAY]]
// CHECK-NEXT:          %[[STEP:.*]] = arith.mulf %[[LR]], %[[D]]
// CHECK-NEXT:          %[[NEW:.*]] = arith.subf %[[OP]], %[[STEP]]
// CHECK-NEXT:          linalg.yield %[[NEW]]
// CHECK:           } else {
// CHECK:             linalg.generic {{.*}} ins(%[[G]] : tensor<4xf32>) outs(%[[P]] : tensor<4xf32>)
// CHECK:           scf.yield %{{.*}}, %[[ACC]] : tensor<4xf32>, tensor<4xf32>
// CHECK:         } else {
// CHECK:           scf.if %[[ACCUMULATE]] -> (tensor<4xf32>) {
// CHECK:             linalg.generic {{.*}} ins(%[[G]] : tensor<4xf32>) outs(%[[ACC]] : tensor<4xf32>)
// CHECK:               arith.addf
// CHECK:           } else {
// CHECK:             linalg.generic {{.*}} ins(%[[G]] : tensor<4xf32>) outs(%[[ACC]] : tensor<4xf32>)
// CHECK-NEXT:        ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:          linalg.yield %[[IN]] : f32
// CHECK:           scf.yield %[[P]], %{{.*}} : tensor<4xf32>, tensor<4xf32>
// CHECK:         return %[[R]]#0, %[[R]]#1
func.func @sgd(%p: tensor<4xf32>, %g: tensor<4xf32>, %acc: tensor<4xf32>, %h: tensor<10xf32>)
    -> (tensor<4xf32>, tensor<4xf32>) {
  %np, %na = zest.update sgd @a %p, %g accum(%acc) hyper(%h)
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %np, %na : tensor<4xf32>, tensor<4xf32>
}

// -----

zest.unit @a sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a.w" : tensor<2x3xf32> at 0,
  "a.b" : tensor<2xf32> at 6
]

// AdamW: scalars (1 - lr*wd, 1 - beta1, ...) computed once outside the loop,
// one pass writing parameter, exp_avg and exp_avg_sq; no pow per element.
// Frozen a.b (flat elements [6, 8)) keeps its values: the mask compares the
// global index zest.rank * 4 + i with the parameter's range.
// CHECK-LABEL: func.func @adamw_frozen(
// CHECK:         %[[RANK:.*]] = zest.rank : index
// CHECK:         %[[BASE:.*]] = arith.muli %[[RANK]], %c4 : index
// CHECK:         scf.if
// CHECK:           scf.if
// CHECK:             %[[LRWD:.*]] = arith.mulf
// CHECK-NEXT:        %[[DECAY:.*]] = arith.subf %cst{{.*}}, %[[LRWD]]
// CHECK:             linalg.generic {{.*}} outs(%arg0, %arg2, %arg3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NOT:           math.powf
// CHECK:               arith.mulf %{{.*}}, %[[DECAY]]
// CHECK:               math.sqrt
// CHECK:               %[[I:.*]] = linalg.index 0 : index
// CHECK-NEXT:          %[[GI:.*]] = arith.addi %[[I]], %[[BASE]] : index
// CHECK-DAG:           arith.cmpi sge, %[[GI]], %c6
// CHECK-DAG:           arith.cmpi slt, %[[GI]], %c8
// CHECK:               %[[FROZEN:.*]] = arith.andi
// CHECK-NEXT:          %[[NP:.*]] = arith.select %[[FROZEN]], %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:          %[[NM:.*]] = arith.select %[[FROZEN]], %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:          %[[NV:.*]] = arith.select %[[FROZEN]], %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:          linalg.yield %[[NP]], %[[NM]], %[[NV]]
func.func @adamw_frozen(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %acc: tensor<4xf32>, %h: tensor<10xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %np, %ns:2, %na = zest.update adamw @a %p, %g state(%m, %v) accum(%acc) hyper(%h) {frozen = ["a.b"]}
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %np, %ns#0, %ns#1, %na : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

zest.unit @a sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a.w" : tensor<2x3xf32> at 0,
  "a.b" : tensor<2xf32> at 6
]

// SGD with Nesterov momentum: buf = momentum * buf + d; d += momentum * buf.
// CHECK-LABEL: func.func @nesterov(
// CHECK:         linalg.generic {{.*}} outs(%arg0, %arg2 : tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT:    ^bb0(%{{.*}}: f32, %[[OP:.*]]: f32, %[[OB:.*]]: f32):
// CHECK:           arith.mulf %{{.*}}, %[[OP]]
// CHECK-NEXT:      %[[D:.*]] = arith.addf
// CHECK-NEXT:      %[[MB:.*]] = arith.mulf %[[MOM:.*]], %[[OB]]
// CHECK-NEXT:      %[[BUF:.*]] = arith.addf %[[MB]], %[[D]]
// CHECK-NEXT:      %[[MBUF:.*]] = arith.mulf %[[MOM]], %[[BUF]]
// CHECK-NEXT:      %[[ND:.*]] = arith.addf %[[D]], %[[MBUF]]
// CHECK-NEXT:      %[[STEP:.*]] = arith.mulf %{{.*}}, %[[ND]]
// CHECK-NEXT:      %[[NP:.*]] = arith.subf %[[OP]], %[[STEP]]
// CHECK-NEXT:      linalg.yield %[[NP]], %[[BUF]]
func.func @nesterov(%p: tensor<4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>, %acc: tensor<4xf32>, %h: tensor<10xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %np, %nb, %na = zest.update sgd @a %p, %g state(%b) accum(%acc) hyper(%h) {nesterov}
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %np, %nb, %na : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Without an accumulator (no-sync: the gradient already sums the step's
// micro-batches) the update always steps: one generic, no branch on the
// accumulate or apply flags.
zest.unit @n sharded : f32, world_size = 1, padded_size = 4, shard_size = 4 [
  "n.w" : tensor<4xf32> at 0
]
// CHECK-LABEL: func.func @no_accumulator(
// CHECK-NOT:     scf.if
// CHECK:         %[[P:.*]] = linalg.generic
// CHECK-NOT:     scf.if
// CHECK:         return %[[P]]
func.func @no_accumulator(%p: tensor<4xf32>, %g: tensor<4xf32>, %h: tensor<10xf32>) -> tensor<4xf32> {
  %p1 = zest.update sgd @n %p, %g hyper(%h) : (tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> tensor<4xf32>
  return %p1 : tensor<4xf32>
}
