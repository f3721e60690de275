// RUN: zest-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(zest-approximate-math))" | FileCheck %s
// RUN: zest-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(zest-approximate-math{functions=tanh}))" | FileCheck %s --check-prefix=ONLY

// Every f32 function in the default list becomes arithmetic; f64 and
// functions not listed are left to libm.
// CHECK-LABEL: func.func @defaults(
// CHECK-NOT:     math.tanh
// CHECK-NOT:     math.erf {{.*}} : f32
// CHECK-NOT:     math.exp {{.*}} : f32
// CHECK:         math.log %{{.*}} : f64
// CHECK:         math.sin
// ONLY-LABEL:  func.func @defaults(
// ONLY-NOT:      math.tanh
// ONLY:          math.erf
func.func @defaults(%x: f32, %d: f64) -> (f32, f32, f32, f64, f32) {
  %t = math.tanh %x : f32
  %e = math.erf %x : f32
  %x2 = math.exp %x : f32
  %l = math.log %d : f64
  %s = math.sin %x : f32
  return %t, %e, %x2, %l, %s : f32, f32, f32, f64, f32
}

// -----

// log and log2 of subnormal inputs: the input is scaled by 2^24 into the
// normal range first and 24 log(2) subtracted after (upstream's
// approximation alone maps every subnormal to log(2^-126)).
// CHECK-LABEL: func.func @log_subnormal(
// CHECK-SAME:    %[[X:.*]]: f32
// CHECK-DAG:     %[[MIN:.*]] = arith.constant 1.17549435E-38 : f32
// CHECK-DAG:     %[[SCALE:.*]] = arith.constant 0x4B800000 : f32
// CHECK-DAG:     %[[SHIFT:.*]] = arith.constant 16.6355324 : f32
// CHECK:         %[[SUB:.*]] = arith.cmpf olt, %[[X]], %[[MIN]] : f32
// CHECK:         %[[XS:.*]] = arith.mulf %[[X]], %[[SCALE]] : f32
// CHECK:         %[[Y:.*]] = arith.select %[[SUB]], %[[XS]], %[[X]] : f32
// CHECK-NOT:     math.log
// CHECK:         %[[L:.*]] = arith.subf %[[R:.*]], %[[SHIFT]] : f32
// CHECK:         arith.select %[[SUB]], %[[L]], %[[R]] : f32
func.func @log_subnormal(%x: f32) -> f32 {
  %l = math.log %x : f32
  return %l : f32
}
