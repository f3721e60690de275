// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(zest-schedule-collectives{prefetch=1})' | FileCheck %s
// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(zest-schedule-collectives{prefetch=2})' | FileCheck %s --check-prefix=DEPTH2
// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(zest-schedule-collectives)' | FileCheck %s --check-prefix=SYNC
// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(zest-schedule-collectives{strategy=shard-grad-op})' | FileCheck %s --check-prefix=KEEP
// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(zest-schedule-collectives{prefetch=1 keep-units=b})' | FileCheck %s --check-prefix=KEEPB
// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(zest-schedule-collectives{prefetch=2 unit-prefetch=b:0})' | FileCheck %s --check-prefix=UNITDEPTH
// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(zest-schedule-collectives{unit-prefetch=b:1})' | FileCheck %s --check-prefix=ONLYB
// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(zest-schedule-collectives{bucket-bytes=32})' | FileCheck %s --check-prefix=BUCKET
// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(zest-schedule-collectives{bucket-bytes=32 prefetch=1})' | FileCheck %s --check-prefix=BUCKETP

// Three units a, b, c: forward gathers a, b, c; backward reduces c, re-gathers
// b, reduces b, re-gathers a, reduces a; each reduce-scatter is followed by
// its unit's update.
//
// Prefetch 1: each gather starts when the previous one has arrived (the
// first at the top), so one gather is in flight while a unit computes. Each
// reduce-scatter is waited for, with its update, right after the next one
// starts: c's overlaps b's backward, b's overlaps a's; a's, the last, is
// waited for at once.
// CHECK-LABEL: func.func @step(
// CHECK-SAME:      %[[SA:[^:]*]]: tensor<2xf32> {zest.unit = @a}, %[[SB:[^:]*]]: tensor<2xf32> {zest.unit = @b}, %[[SC:[^:]*]]: tensor<2xf32> {zest.unit = @c},
// CHECK-NEXT:    %[[GA:.*]] = zest.all_gather_start %[[SA]] for @a
// CHECK-NEXT:    %[[FA:.*]] = zest.wait %[[GA]]
// CHECK-NEXT:    %[[GB:.*]] = zest.all_gather_start %[[SB]] for @b
// CHECK-NEXT:    arith.addf %[[FA]], %[[FA]]
// CHECK-NEXT:    %[[FB:.*]] = zest.wait %[[GB]]
// CHECK-NEXT:    %[[GC:.*]] = zest.all_gather_start %[[SC]] for @c
// CHECK-NEXT:    arith.mulf %[[FB]]
// CHECK-NEXT:    %[[FC:.*]] = zest.wait %[[GC]]
// CHECK-NEXT:    %[[GB2:.*]] = zest.all_gather_start %[[SB]] for @b
// CHECK-NEXT:    %[[YC:.*]] = arith.mulf %[[FC]]
// CHECK-NEXT:    %[[RC:.*]] = zest.reduce_scatter_start avg %[[YC]] for @c
// CHECK-NEXT:    %[[FB2:.*]] = zest.wait %[[GB2]]
// CHECK-NEXT:    %[[GA2:.*]] = zest.all_gather_start %[[SA]] for @a
// CHECK-NEXT:    %[[DB:.*]] = arith.mulf %[[FB2]], %[[YC]]
// CHECK-NEXT:    %[[RB:.*]] = zest.reduce_scatter_start avg %[[DB]] for @b
// CHECK-NEXT:    %[[C:.*]] = zest.wait %[[RC]]
// CHECK-NEXT:    zest.update sgd @c %[[SC]], %[[C]]
// CHECK-NEXT:    %[[FA2:.*]] = zest.wait %[[GA2]]
// CHECK-NEXT:    %[[DA:.*]] = arith.mulf %[[FA2]], %[[DB]]
// CHECK-NEXT:    %[[RA:.*]] = zest.reduce_scatter_start avg %[[DA]] for @a
// CHECK-NEXT:    %[[B:.*]] = zest.wait %[[RB]]
// CHECK-NEXT:    zest.update sgd @b %[[SB]], %[[B]]
// CHECK-NEXT:    %[[A:.*]] = zest.wait %[[RA]]
// CHECK-NEXT:    zest.update sgd @a %[[SA]], %[[A]]
// CHECK-NEXT:    return

// Prefetch 2: two gathers ahead.
// DEPTH2-LABEL: func.func @step(
// DEPTH2-NEXT:    %[[GA:.*]] = zest.all_gather_start %{{.*}} for @a
// DEPTH2-NEXT:    %[[GB:.*]] = zest.all_gather_start %{{.*}} for @b
// DEPTH2-NEXT:    %[[FA:.*]] = zest.wait %[[GA]]
// DEPTH2-NEXT:    zest.all_gather_start %{{.*}} for @c
// DEPTH2-NEXT:    arith.addf %[[FA]], %[[FA]]
// DEPTH2-NEXT:    %[[FB:.*]] = zest.wait %[[GB]]
// DEPTH2-NEXT:    zest.all_gather_start %{{.*}} for @b
// DEPTH2:         zest.wait
// DEPTH2-NEXT:    zest.all_gather_start %{{.*}} for @a

// Prefetch 0 (the default): synchronous collectives, unchanged.
// SYNC-LABEL: func.func @step(
// SYNC-NOT:     _start
// SYNC-COUNT-5: zest.all_gather %
// SYNC-NOT:     _start

// shard-grad-op: every unit is gathered once; backward reads the forward's
// gathered buffers (b's and a's re-gathers are gone). The decisions are
// recorded on the units.
// KEEP-COUNT-3: ] {zest.keep, zest.prefetch = 0 : i64}
// KEEP-LABEL: func.func @step(
// KEEP-NEXT:    %[[FA:.*]] = zest.all_gather %{{.*}} for @a
// KEEP-NEXT:    arith.addf %[[FA]], %[[FA]]
// KEEP-NEXT:    %[[FB:.*]] = zest.all_gather %{{.*}} for @b
// KEEP-NEXT:    arith.mulf %[[FB]]
// KEEP-NEXT:    zest.all_gather %{{.*}} for @c
// KEEP-NOT:     zest.all_gather
// KEEP:         arith.mulf %[[FB]], %{{.*}}
// KEEP-NOT:     zest.all_gather
// KEEP:         arith.mulf %[[FA]], %{{.*}}

// Only b kept, with prefetch 1: a is still re-gathered, and the prefetch
// chain runs over the gathers that remain (a, b, c, a again).
// KEEPB:      "a.w"
// KEEPB-NEXT: ] {zest.prefetch = 1 : i64}
// KEEPB:      "b.w"
// KEEPB-NEXT: ] {zest.keep, zest.prefetch = 1 : i64}
// KEEPB-LABEL: func.func @step(
// KEEPB:         zest.all_gather_start %{{.*}} for @a
// KEEPB:         %[[GB:.*]] = zest.all_gather_start %{{.*}} for @b
// KEEPB:         %[[FB:.*]] = zest.wait %[[GB]]
// KEEPB-NEXT:    zest.all_gather_start %{{.*}} for @c
// KEEPB:         zest.all_gather_start %{{.*}} for @a
// KEEPB-NOT:     zest.all_gather_start
// KEEPB:         arith.mulf %[[FB]], %{{.*}}

// Per-unit depths (b 0, the others 2): b's gathers start where they are
// waited for, a's and c's two gathers ahead; starts stay in program order,
// so c's start follows b's, and a's backward re-gather follows b's. The
// report attributes carry each unit's depth. (@b is the only unit every
// chunk has.)
// UNITDEPTH:      "a.w"
// UNITDEPTH-NEXT: ] {zest.prefetch = 2 : i64}
// UNITDEPTH:      "b.w"
// UNITDEPTH-NEXT: ] {zest.prefetch = 0 : i64}
// UNITDEPTH:      "c.w"
// UNITDEPTH-NEXT: ] {zest.keep, zest.prefetch = 2 : i64}
// UNITDEPTH-LABEL: func.func @step(
// UNITDEPTH-NEXT:    %[[GA:.*]] = zest.all_gather_start %{{.*}} for @a
// UNITDEPTH-NEXT:    %[[FA:.*]] = zest.wait %[[GA]]
// UNITDEPTH-NEXT:    arith.addf %[[FA]], %[[FA]]
// UNITDEPTH-NEXT:    %[[GB:.*]] = zest.all_gather_start %{{.*}} for @b
// UNITDEPTH-NEXT:    %[[GC:.*]] = zest.all_gather_start %{{.*}} for @c
// UNITDEPTH-NEXT:    zest.wait %[[GB]]
// UNITDEPTH-NEXT:    arith.mulf
// UNITDEPTH-NEXT:    zest.wait %[[GC]]
// UNITDEPTH-NEXT:    arith.mulf
// UNITDEPTH-NEXT:    zest.reduce_scatter_start avg %{{.*}} for @c
// UNITDEPTH-NEXT:    %[[GB2:.*]] = zest.all_gather_start %{{.*}} for @b
// UNITDEPTH-NEXT:    zest.all_gather_start %{{.*}} for @a
// UNITDEPTH-NEXT:    zest.wait %[[GB2]]

// Only b prefetched (depth 1, the default 0): a and c start where they are
// waited for, b's gathers right after the previous wait; the gradient
// reductions overlap as with any prefetch.
// ONLYB-LABEL: func.func @step(
// ONLYB-NEXT:    %[[GA:.*]] = zest.all_gather_start %{{.*}} for @a
// ONLYB-NEXT:    %[[FA:.*]] = zest.wait %[[GA]]
// ONLYB-NEXT:    zest.all_gather_start %{{.*}} for @b
// ONLYB-NEXT:    arith.addf %[[FA]], %[[FA]]
// ONLYB-NEXT:    zest.wait
// ONLYB-NEXT:    arith.mulf
// ONLYB-NEXT:    %[[GC:.*]] = zest.all_gather_start %{{.*}} for @c
// ONLYB-NEXT:    %[[FC:.*]] = zest.wait %[[GC]]
// ONLYB-NEXT:    zest.all_gather_start %{{.*}} for @b
// ONLYB-NEXT:    arith.mulf %[[FC]]
// ONLYB:         zest.reduce_scatter_start avg %{{.*}} for @c

// Buckets of at most 32 bytes: two of these 16-byte units per collective.
// The forward gathers a and b together where a's gather was, then c with
// the backward re-gather of b (b's shard exists from the start); a's
// re-gather has no partner. c's and b's gradients are reduce-scattered
// together where b's was, the rank-r piece of both next to each other
// (pieces 2), and c's update moves down after it. The bucket of [@c, @b]
// serves the gather and the reduce-scatter.
// BUCKET:      zest.bucket @bucket0 [@a, @b]
// BUCKET-NEXT: zest.bucket @bucket1 [@c, @b]
// BUCKET-LABEL: func.func @step(
// BUCKET-SAME:      %[[SA:[^:]*]]: tensor<2xf32> {zest.unit = @a}, %[[SB:[^:]*]]: tensor<2xf32> {zest.unit = @b}, %[[SC:[^:]*]]: tensor<2xf32> {zest.unit = @c},
// BUCKET-NEXT:    %[[P0:.*]] = zest.pack %[[SA]], %[[SB]] pieces 1 : tensor<2xf32>, tensor<2xf32> -> tensor<4xf32>
// BUCKET-NEXT:    %[[G0:.*]] = zest.all_gather %[[P0]] for @bucket0 : tensor<4xf32> -> tensor<8xf32>
// BUCKET-NEXT:    %[[U0:.*]]:2 = zest.unpack %[[G0]] pieces 2 : tensor<8xf32> -> tensor<4xf32>, tensor<4xf32>
// BUCKET-NEXT:    %[[YA:.*]] = arith.addf %[[U0]]#0, %[[U0]]#0
// BUCKET-NEXT:    %[[YB:.*]] = arith.mulf %[[U0]]#1, %[[YA]]
// BUCKET-NEXT:    %[[P1:.*]] = zest.pack %[[SC]], %[[SB]] pieces 1
// BUCKET-NEXT:    %[[G1:.*]] = zest.all_gather %[[P1]] for @bucket1
// BUCKET-NEXT:    %[[U1:.*]]:2 = zest.unpack %[[G1]] pieces 2
// BUCKET-NEXT:    %[[YC:.*]] = arith.mulf %[[U1]]#0, %[[YB]]
// BUCKET-NEXT:    %[[DB:.*]] = arith.mulf %[[U1]]#1, %[[YC]]
// BUCKET-NEXT:    %[[P2:.*]] = zest.pack %[[YC]], %[[DB]] pieces 2 : tensor<4xf32>, tensor<4xf32> -> tensor<8xf32>
// BUCKET-NEXT:    %[[R:.*]] = zest.reduce_scatter avg %[[P2]] for @bucket1 : tensor<8xf32> -> tensor<4xf32>
// BUCKET-NEXT:    %[[S:.*]]:2 = zest.unpack %[[R]] pieces 1 : tensor<4xf32> -> tensor<2xf32>, tensor<2xf32>
// BUCKET-NEXT:    zest.update sgd @c %[[SC]], %[[S]]#0
// BUCKET-NEXT:    zest.update sgd @b %[[SB]], %[[S]]#1
// BUCKET-NEXT:    %[[FA2:.*]] = zest.all_gather %[[SA]] for @a
// BUCKET-NEXT:    %[[DA:.*]] = arith.mulf %[[FA2]], %[[DB]]
// BUCKET-NEXT:    zest.reduce_scatter avg %[[DA]] for @a
// BUCKET-NEXT:    zest.update sgd @a

// With prefetch 1 a bucket is one collective: its shards are packed where
// its gather starts, right after the previous wait.
// BUCKETP-LABEL: func.func @step(
// BUCKETP-NEXT:    %[[P0:.*]] = zest.pack
// BUCKETP-NEXT:    %[[G0:.*]] = zest.all_gather_start %[[P0]] for @bucket0
// BUCKETP-NEXT:    %[[W0:.*]] = zest.wait %[[G0]]
// BUCKETP-NEXT:    %[[P1:.*]] = zest.pack
// BUCKETP-NEXT:    %[[G1:.*]] = zest.all_gather_start %[[P1]] for @bucket1
// BUCKETP-NEXT:    zest.unpack %[[W0]] pieces 2
// BUCKETP:         %[[W1:.*]] = zest.wait %[[G1]]
// BUCKETP-NEXT:    %[[GA:.*]] = zest.all_gather_start %{{.*}} for @a
// BUCKETP-NEXT:    zest.unpack %[[W1]] pieces 2
// BUCKETP:         %[[R:.*]] = zest.reduce_scatter_start avg %{{.*}} for @bucket1
// BUCKETP-NEXT:    zest.wait %[[GA]]
// BUCKETP-NEXT:    arith.mulf
// BUCKETP-NEXT:    %[[RA:.*]] = zest.reduce_scatter_start avg %{{.*}} for @a
// BUCKETP-NEXT:    %[[WR:.*]] = zest.wait %[[R]]
// BUCKETP-NEXT:    zest.unpack %[[WR]] pieces 1
// BUCKETP-NEXT:    zest.update sgd @c
// BUCKETP-NEXT:    zest.update sgd @b
// BUCKETP-NEXT:    zest.wait %[[RA]]
// BUCKETP-NEXT:    zest.update sgd @a

zest.unit @a sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 ["a.w" : tensor<4xf32> at 0]
zest.unit @b sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 ["b.w" : tensor<4xf32> at 0]
zest.unit @c sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 ["c.w" : tensor<4xf32> at 0]
func.func @step(%sa: tensor<2xf32> {zest.unit = @a}, %sb: tensor<2xf32> {zest.unit = @b}, %sc: tensor<2xf32> {zest.unit = @c},
                %h: tensor<10xf32>, %acca: tensor<2xf32>, %accb: tensor<2xf32>, %accc: tensor<2xf32>)
    -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %fa = zest.all_gather %sa for @a : tensor<2xf32> -> tensor<4xf32>
  %ya = arith.addf %fa, %fa : tensor<4xf32>
  %fb = zest.all_gather %sb for @b : tensor<2xf32> -> tensor<4xf32>
  %yb = arith.mulf %fb, %ya : tensor<4xf32>
  %fc = zest.all_gather %sc for @c : tensor<2xf32> -> tensor<4xf32>
  %yc = arith.mulf %fc, %yb : tensor<4xf32>
  %rc = zest.reduce_scatter avg %yc for @c : tensor<4xf32> -> tensor<2xf32>
  %pc, %ac = zest.update sgd @c %sc, %rc accum(%accc) hyper(%h) : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<10xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  %fb2 = zest.all_gather %sb for @b : tensor<2xf32> -> tensor<4xf32>
  %db = arith.mulf %fb2, %yc : tensor<4xf32>
  %rb = zest.reduce_scatter avg %db for @b : tensor<4xf32> -> tensor<2xf32>
  %pb, %ab = zest.update sgd @b %sb, %rb accum(%accb) hyper(%h) : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<10xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  %fa2 = zest.all_gather %sa for @a : tensor<2xf32> -> tensor<4xf32>
  %da = arith.mulf %fa2, %db : tensor<4xf32>
  %ra = zest.reduce_scatter avg %da for @a : tensor<4xf32> -> tensor<2xf32>
  %pa, %aa = zest.update sgd @a %sa, %ra accum(%acca) hyper(%h) : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<10xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  return %pa, %aa, %pb, %ab, %pc, %ac : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// A reduced shard read before the next reduce-scatter starts, by a value the
// backward needs (here the updated parameter feeds b's gradient): the wait
// cannot move down and stays before its first reader.
// CHECK-LABEL: func.func @pinned(
// CHECK:         %[[RC:.*]] = zest.reduce_scatter_start avg %{{.*}} for @c
// CHECK-NEXT:    %[[C:.*]] = zest.wait %[[RC]]
// CHECK-NEXT:    %[[P:.*]], %{{.*}} = zest.update sgd @c %{{.*}}, %[[C]]
// CHECK:         zest.reduce_scatter_start avg %{{.*}} for @b
// Nor can c's and b's reduce-scatters share a bucket: b's gradient needs
// c's update, which would have to wait for b's reduction.
// BUCKET-LABEL: func.func @pinned(
// BUCKET-NOT:     zest.pack
// BUCKET:         zest.reduce_scatter avg %{{.*}} for @c
// BUCKET:         zest.reduce_scatter avg %{{.*}} for @b
zest.unit @b sharded : f32, world_size = 2, padded_size = 2, shard_size = 1 ["b.w" : tensor<2xf32> at 0]
zest.unit @c sharded : f32, world_size = 2, padded_size = 2, shard_size = 1 ["c.w" : tensor<2xf32> at 0]
func.func @pinned(%sb: tensor<1xf32> {zest.unit = @b}, %sc: tensor<1xf32> {zest.unit = @c}, %g: tensor<2xf32>,
                  %h: tensor<10xf32>, %accc: tensor<1xf32>) -> (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) {
  %rc = zest.reduce_scatter avg %g for @c : tensor<2xf32> -> tensor<1xf32>
  %pc, %ac = zest.update sgd @c %sc, %rc accum(%accc) hyper(%h) : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<10xf32>) -> (tensor<1xf32>, tensor<1xf32>)
  %e = tensor.empty() : tensor<1x2xf32>
  %wide = linalg.broadcast ins(%pc : tensor<1xf32>) outs(%e : tensor<1x2xf32>) dimensions = [1]
  %p2 = tensor.collapse_shape %wide [[0, 1]] : tensor<1x2xf32> into tensor<2xf32>
  %gb = arith.mulf %g, %p2 : tensor<2xf32>
  %rb = zest.reduce_scatter avg %gb for @b : tensor<2xf32> -> tensor<1xf32>
  return %pc, %ac, %rb : tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
}

// -----

// Replicated units (no-shard, DDP): their gradients' all-reduces are
// scheduled as reduce-scatters are: each waits, with its unit's update,
// after the next one starts.
// CHECK-LABEL: func.func @ddp(
// CHECK:         %[[RB:.*]] = zest.all_reduce_start avg %{{.*}} for @q
// CHECK-NEXT:    %[[DA:.*]] = arith.mulf
// CHECK-NEXT:    %[[RA:.*]] = zest.all_reduce_start avg %[[DA]] for @p
// CHECK-NEXT:    %[[B:.*]] = zest.wait %[[RB]]
// CHECK-NEXT:    zest.update sgd @q %{{.*}}, %[[B]]
// CHECK-NEXT:    %[[A:.*]] = zest.wait %[[RA]]
// CHECK-NEXT:    zest.update sgd @p %{{.*}}, %[[A]]
// SYNC-LABEL: func.func @ddp(
// SYNC-COUNT-2: zest.all_reduce avg
// (@b, unused, is for the KEEPB run over every chunk.)
// Buckets of replicated units' gradients (DDP's gradient buckets): one
// all-reduce of both, where the second one was; q's update follows it.
// BUCKET:      zest.bucket @bucket0 [@q, @p]
// BUCKET-LABEL: func.func @ddp(
// BUCKET:         %[[P:.*]] = zest.pack %{{.*}}, %{{.*}} pieces 1 : tensor<2xf32>, tensor<2xf32> -> tensor<4xf32>
// BUCKET-NEXT:    %[[R:.*]] = zest.all_reduce avg %[[P]] for @bucket0 : tensor<4xf32>
// BUCKET-NEXT:    %[[U:.*]]:2 = zest.unpack %[[R]] pieces 1
// BUCKET-NEXT:    zest.update sgd @q %{{.*}}, %[[U]]#0
// BUCKET-NEXT:    zest.update sgd @p %{{.*}}, %[[U]]#1
zest.unit @b sharded : f32, world_size = 2, padded_size = 2, shard_size = 1 ["b.w" : tensor<2xf32> at 0]
zest.unit @p replicated : f32, world_size = 2, padded_size = 2, shard_size = 2 ["p.w" : tensor<2xf32> at 0]
zest.unit @q replicated : f32, world_size = 2, padded_size = 2, shard_size = 2 ["q.w" : tensor<2xf32> at 0]
func.func @ddp(%pa: tensor<2xf32> {zest.unit = @p}, %pb: tensor<2xf32> {zest.unit = @q}, %x: tensor<2xf32>,
               %h: tensor<10xf32>, %acca: tensor<2xf32>, %accb: tensor<2xf32>)
    -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %db = arith.mulf %pb, %x : tensor<2xf32>
  %rb = zest.all_reduce avg %db for @q : tensor<2xf32>
  %nb, %ab = zest.update sgd @q %pb, %rb accum(%accb) hyper(%h) : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<10xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  %da = arith.mulf %pa, %db : tensor<2xf32>
  %ra = zest.all_reduce avg %da for @p : tensor<2xf32>
  %na, %aa = zest.update sgd @p %pa, %ra accum(%acca) hyper(%h) : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<10xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  return %na, %aa, %nb, %ab : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// Hybrid sharding: each reduce-scatter is followed by the all-reduce of its
// shard across replicas, which reads it. With prefetch, c's reduce-scatter
// waits after b's starts, and c's all-reduce across replicas starts right
// there; it waits, with c's update, after the next reduction (a's
// reduce-scatter) starts, so each transfer overlaps one unit's backward.
// CHECK-LABEL: func.func @hybrid(
// CHECK:         %[[RC:.*]] = zest.reduce_scatter_start avg %{{.*}} for @c
// CHECK-NEXT:    %[[DB:.*]] = arith.mulf
// CHECK-NEXT:    %[[RB:.*]] = zest.reduce_scatter_start avg %[[DB]] for @b
// CHECK-NEXT:    %[[C:.*]] = zest.wait %[[RC]]
// CHECK-NEXT:    %[[XC:.*]] = zest.all_reduce_start avg %[[C]] for @c across_replicas
// CHECK-NEXT:    %[[DA:.*]] = arith.mulf
// CHECK-NEXT:    %[[RA:.*]] = zest.reduce_scatter_start avg %[[DA]] for @a
// CHECK-NEXT:    %[[C2:.*]] = zest.wait %[[XC]]
// CHECK-NEXT:    zest.update sgd @c %{{.*}}, %[[C2]]
// CHECK-NEXT:    %[[B:.*]] = zest.wait %[[RB]]
// CHECK-NEXT:    %[[XB:.*]] = zest.all_reduce_start avg %[[B]] for @b across_replicas
// CHECK-NEXT:    %[[B2:.*]] = zest.wait %[[XB]]
// CHECK-NEXT:    zest.update sgd @b %{{.*}}, %[[B2]]
// CHECK-NEXT:    %[[A:.*]] = zest.wait %[[RA]]
// CHECK-NEXT:    %[[XA:.*]] = zest.all_reduce_start avg %[[A]] for @a across_replicas
// CHECK-NEXT:    %[[A2:.*]] = zest.wait %[[XA]]
// CHECK-NEXT:    zest.update sgd @a %{{.*}}, %[[A2]]
// CHECK-NEXT:    return
// SYNC-LABEL: func.func @hybrid(
// SYNC-COUNT-3: zest.all_reduce avg %{{.*}} across_replicas
// Hybrid buckets: the three reduce-scatters become one where a's was (each
// member's rank-r piece together: pieces 2), then the all-reduces across
// replicas, which read its shards, follow one another and become one too;
// its operand is the reduce-scatter's result itself (packing what was just
// unpacked), and the updates read its unpacked shards.
// BUCKET:      zest.bucket @bucket0 [@c, @b, @a]
// BUCKET-LABEL: func.func @hybrid(
// BUCKET:         %[[P:.*]] = zest.pack %{{.*}}, %{{.*}}, %{{.*}} pieces 2 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32> -> tensor<6xf32>
// BUCKET-NEXT:    %[[RS:.*]] = zest.reduce_scatter avg %[[P]] for @bucket0 : tensor<6xf32> -> tensor<3xf32>
// BUCKET-NEXT:    %[[X:.*]] = zest.all_reduce avg %[[RS]] for @bucket0 across_replicas : tensor<3xf32>
// BUCKET-NEXT:    %[[U:.*]]:3 = zest.unpack %[[X]] pieces 1
// BUCKET-NEXT:    zest.update sgd @c %{{.*}}, %[[U]]#0
// BUCKET-NEXT:    zest.update sgd @b %{{.*}}, %[[U]]#1
// BUCKET-NEXT:    zest.update sgd @a %{{.*}}, %[[U]]#2
zest.unit @a sharded : f32, world_size = 2, replicas = 2, padded_size = 2, shard_size = 1 ["a.w" : tensor<2xf32> at 0]
zest.unit @b sharded : f32, world_size = 2, replicas = 2, padded_size = 2, shard_size = 1 ["b.w" : tensor<2xf32> at 0]
zest.unit @c sharded : f32, world_size = 2, replicas = 2, padded_size = 2, shard_size = 1 ["c.w" : tensor<2xf32> at 0]
func.func @hybrid(%sa: tensor<1xf32> {zest.unit = @a}, %sb: tensor<1xf32> {zest.unit = @b}, %sc: tensor<1xf32> {zest.unit = @c},
                  %g: tensor<2xf32>, %h: tensor<10xf32>, %acca: tensor<1xf32>, %accb: tensor<1xf32>, %accc: tensor<1xf32>)
    -> (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) {
  %rc = zest.reduce_scatter avg %g for @c : tensor<2xf32> -> tensor<1xf32>
  %xc = zest.all_reduce avg %rc for @c across_replicas : tensor<1xf32>
  %pc, %ac = zest.update sgd @c %sc, %xc accum(%accc) hyper(%h) : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<10xf32>) -> (tensor<1xf32>, tensor<1xf32>)
  %db = arith.mulf %g, %g : tensor<2xf32>
  %rb = zest.reduce_scatter avg %db for @b : tensor<2xf32> -> tensor<1xf32>
  %xb = zest.all_reduce avg %rb for @b across_replicas : tensor<1xf32>
  %pb, %ab = zest.update sgd @b %sb, %xb accum(%accb) hyper(%h) : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<10xf32>) -> (tensor<1xf32>, tensor<1xf32>)
  %da = arith.mulf %db, %g : tensor<2xf32>
  %ra = zest.reduce_scatter avg %da for @a : tensor<2xf32> -> tensor<1xf32>
  %xa = zest.all_reduce avg %ra for @a across_replicas : tensor<1xf32>
  %pa, %aa = zest.update sgd @a %sa, %xa accum(%acca) hyper(%h) : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<10xf32>) -> (tensor<1xf32>, tensor<1xf32>)
  return %pa, %aa, %pb, %ab, %pc, %ac : tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
}
