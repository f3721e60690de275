// RUN: not zest-opt %s -pass-pipeline='builtin.module(zest-schedule-collectives{strategy=no-such})' 2>&1 | FileCheck %s --check-prefix=STRATEGY
// RUN: not zest-opt %s -pass-pipeline='builtin.module(zest-schedule-collectives{keep-units=d})' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not zest-opt %s -pass-pipeline='builtin.module(zest-schedule-collectives{keep-units=a,r})' 2>&1 | FileCheck %s --check-prefix=REPLICATED
// RUN: not zest-opt %s -pass-pipeline='builtin.module(zest-schedule-collectives{unit-prefetch=a:two})' 2>&1 | FileCheck %s --check-prefix=DEPTHSYNTAX
// RUN: not zest-opt %s -pass-pipeline='builtin.module(zest-schedule-collectives{unit-prefetch=d:1})' 2>&1 | FileCheck %s --check-prefix=DEPTHUNKNOWN
// RUN: not zest-opt %s -pass-pipeline='builtin.module(zest-schedule-collectives{unit-prefetch=r:1})' 2>&1 | FileCheck %s --check-prefix=DEPTHREPLICATED

// Options of zest-schedule-collectives that name nothing it can do.
// STRATEGY: error: unknown strategy 'no-such' for zest-schedule-collectives: use full-shard, shard-grad-op, no-shard or hybrid-shard
// UNKNOWN: error: cannot keep 'd' gathered: the module has no unit of that name
// REPLICATED: error: cannot keep 'r' gathered: the unit is replicated (never gathered)
// DEPTHSYNTAX: error: unit-prefetch entry 'a:two' is not <unit>:<depth> (e.g. layers.0:2)
// DEPTHUNKNOWN: error: cannot prefetch 'd': the module has no unit of that name
// DEPTHREPLICATED: error: cannot prefetch 'r': the unit is replicated (never gathered)

zest.unit @a sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 ["a.w" : tensor<4xf32> at 0]
zest.unit @r replicated : f32, world_size = 2, padded_size = 2, shard_size = 2 ["r.w" : tensor<2xf32> at 0]
