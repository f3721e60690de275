// RUN: zest-opt %s --zest-manifest=%t.json -o /dev/null
// RUN: FileCheck %s --input-file=%t.json
// RUN: zest-opt %s --zest-manifest="path=-" -o /dev/null | FileCheck %s
// RUN: not zest-opt %s --zest-manifest=%t.missing-dir/out.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=ERR

// CHECK:      "format": "zest-manifest",
// CHECK-NEXT: "version": 1,
// CHECK-NEXT: "world_size": 3,
// CHECK-NEXT: "model_hash": "{{[0-9a-f]+}}",
// CHECK-NEXT: "units": [
// CHECK-NEXT:   {
// CHECK-NEXT:     "name": "layers.0",
// CHECK-NEXT:     "kind": "sharded",
// CHECK-NEXT:     "dtype": "F32",
// CHECK-NEXT:     "world_size": 3,
// CHECK-NEXT:     "numel": 544,
// CHECK-NEXT:     "padded_size": 546,
// CHECK-NEXT:     "shard_size": 182,
// CHECK-NEXT:     "params": [
// CHECK-NEXT:       {
// CHECK-NEXT:         "fqn": "layers.0.weight",
// CHECK-NEXT:         "shape": [
// CHECK-NEXT:           32,
// CHECK-NEXT:           16
// CHECK-NEXT:         ],
// CHECK-NEXT:         "dtype": "F32",
// CHECK-NEXT:         "offset": 0,
// CHECK-NEXT:         "numel": 512
// CHECK-NEXT:       },
// CHECK-NEXT:       {
// CHECK-NEXT:         "fqn": "layers.0.bias",
// CHECK:              "offset": 512,
// CHECK:        "name": "ignored",
// CHECK-NEXT:   "kind": "replicated",
// CHECK-NEXT:   "dtype": "BF16",
// CHECK:        "name": "tokens",
// CHECK-NEXT:   "kind": "sharded",
// CHECK-NEXT:   "dtype": "I64",

// ERR: error: cannot write manifest '{{.*}}missing-dir/out.json'

zest.unit @layers.0 sharded : f32, world_size = 3, padded_size = 546, shard_size = 182 [
  "layers.0.weight" : tensor<32x16xf32> at 0,
  "layers.0.bias" : tensor<32xf32> at 512
]
zest.unit @ignored replicated : bf16, world_size = 3, padded_size = 3, shard_size = 3 [
  "norm.scale" : tensor<3xbf16> at 0
]
zest.unit @tokens sharded : i64, world_size = 3, padded_size = 3, shard_size = 1 [
  "tokens.table" : tensor<2xi64> at 0
]
