// The bundled examples satisfy the contract and shard with every policy.
//
// RUN: zest-opt %examples/mlp_train.mlir -zest-verify-contract -o /dev/null
// RUN: zest-opt %examples/transformer_block_train.mlir -zest-verify-contract -o /dev/null
// RUN: zest-opt %examples/mlp_inference.mlir -zest-verify-contract -o /dev/null
// RUN: zest-opt %examples/tied_embedding_train.mlir -zest-verify-contract -o /dev/null
//
// Tied embedding: gathered for each of its two use intervals, gradients
// reduce-scattered once.
// RUN: zest-opt %examples/tied_embedding_train.mlir -zest-shard-pipeline="world-size=2 leaf-classes=Embedding,Head" | FileCheck %s --check-prefix=TIED
// TIED: zest.all_gather %arg0 for @embed
// TIED: zest.all_gather %arg1 for @head
// TIED: zest.all_gather %arg0 for @embed
// TIED: zest.reduce_scatter avg %{{.*}} for @head
// TIED: zest.reduce_scatter avg %{{.*}} for @embed
// TIED-NOT: zest.reduce_scatter
//
// MLP, 2 layers as leaf modules on 4 ranks: each layer gathered once (its
// forward and backward uses are adjacent for layers.1; layers.0's weight is
// not needed in backward), two reduce-scatters, last layer's first.
// RUN: zest-opt %examples/mlp_train.mlir -zest-shard-pipeline="world-size=4 leaf-modules=layers.*" | FileCheck %s --check-prefix=MLP
// MLP-COUNT-2: zest.unit
// MLP: func.func @train_step(%{{.*}}: tensor<136xf32> {zest.unit = @layers.0}, %{{.*}}: tensor<33xf32> {zest.unit = @layers.1}, %{{.*}}: tensor<8x16xf32>, %{{.*}}: tensor<8x4xf32>)
// MLP: zest.all_gather %arg0 for @layers.0
// MLP: zest.all_gather %arg1 for @layers.1
// MLP: zest.reduce_scatter avg %{{.*}} for @layers.1
// MLP: zest.reduce_scatter avg %{{.*}} for @layers.0
// MLP-NOT: zest.all_gather
//
// Transformer block, FSDP-style wrapping of Attention and MLP on 4 ranks:
// forward gathers attn, root (ln2), mlp; backward re-gathers root and attn.
// RUN: zest-opt %examples/transformer_block_train.mlir -zest-shard-pipeline="world-size=4 leaf-classes=Attention,MLP" | FileCheck %s --check-prefix=TB
// TB: zest.all_gather %arg0 for @root
// TB: zest.all_gather %arg1 for @block.attn
// TB: zest.all_gather %arg0 for @root
// TB: zest.all_gather %arg2 for @block.mlp
// TB: zest.reduce_scatter avg %{{.*}} for @block.mlp
// TB: zest.all_gather %arg0 for @root
// TB: zest.all_gather %arg1 for @block.attn
// TB: zest.reduce_scatter avg %{{.*}} for @block.attn
// TB: zest.reduce_scatter avg %{{.*}} for @root
//
// Size-based wrapping and W=3 padding on the transformer.
// RUN: zest-opt %examples/transformer_block_train.mlir -zest-shard-pipeline="world-size=3 min-unit-numel=500" -zest-print-units -o /dev/null | FileCheck %s --check-prefix=SIZE
// Attention's qkv (816) and both MLP linears reach 500 and are wrapped; the
// projection (272) and the norms stay pending and end in the root (336).
// SIZE: root            sharded     f32         6         336         336         112          448
// SIZE: block.attn.qkv  sharded     f32         2         816         816         272         1088
// SIZE: block.mlp.fc1   sharded     f32         2         544         546         182          728
// SIZE: block.mlp.fc2   sharded     f32         2         528         528         176          704
//
// Inference: gathers, no gradients, signature keeps the output.
// RUN: zest-opt %examples/mlp_inference.mlir -zest-shard-pipeline="world-size=2 leaf-classes=Linear" | FileCheck %s --check-prefix=INF
// INF: func.func @forward(%{{.*}}: tensor<544xf32> {zest.unit = @fc1}, %{{.*}}: tensor<2080xf32> {zest.unit = @fc2}, %{{.*}}: tensor<325xf32> {zest.unit = @fc3}, %{{.*}}: tensor<4x16xf32>) -> tensor<4x10xf32>
// INF-COUNT-3: zest.all_gather
// INF-NOT: zest.reduce_scatter
//
// Sharded IR round-trips: printed, parsed and printed again, it is the same
// text (generic form included).
// RUN: zest-opt %examples/transformer_block_train.mlir -zest-shard-pipeline="world-size=3 leaf-classes=Attention,MLP ignore=block.ln1.*" > %t.sharded.mlir
// RUN: zest-opt %t.sharded.mlir > %t.again.mlir
// RUN: diff %t.sharded.mlir %t.again.mlir
// RUN: zest-opt %t.sharded.mlir -mlir-print-op-generic | zest-opt > %t.generic.mlir
// RUN: diff %t.sharded.mlir %t.generic.mlir
