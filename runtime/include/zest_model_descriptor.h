/*===- zest_model_descriptor.h - The model descriptor's schema --*- C -*-===*
 *
 * The text zestc embeds in every executable (`zest_model_descriptor`) and
 * the training program parses: what the host needs to know of a sharded
 * model. One record per line, fields separated by single spaces (names
 * never hold spaces: they are FQNs and symbols):
 *
 *   zest-model 1
 *   world_size <W>
 *   mesh <replicas> <shards>                         (hybrid sharding only)
 *   expert_groups <ranks>                        (expert parallelism only)
 *   unit <name> <sharded|replicated> <dtype> <numel> <padded> <shard> <n>
 *   param <fqn> <dtype> <offset> <rank> <dim>...           (n per unit)
 *   function <name> <num_args> <num_results>
 *   optimizer sgd|adamw                           (training steps only)
 *   accumulate_for <name>             (no-sync: accumulates for that step)
 *   arg unit <unit> | arg data <dtype> <rank> <dim>...
 *   arg state <unit> <name> | arg accum <unit> | arg hyper <count>
 *   arg grad_sum <unit> | arg rng | arg stage <dtype> <rank> <dim>...
 *   host                  (the argument before lives in pinned host memory)
 *   index_bound <N> <table|-> <ignore|->    (the data argument before holds
 *                          indices into a table of N rows: each in [0, N) or
 *                          equal to ignore; table names the parameter)
 *   result loss|output|grad_norm <dtype> <rank> <dim>... | result grad <unit>
 *   end
 *
 * Results an entry point updates in place (`zest.updated`) are not results
 * of the compiled entry point and are not listed. The writer is
 * lib/Conversion/ZestToRuntime/ModelDescriptor.cpp (zest-describe-model),
 * the reader runtime/trainer/ModelDescriptor.cpp; both spell the format with
 * these names.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZEST_MODEL_DESCRIPTOR_H
#define ZEST_MODEL_DESCRIPTOR_H

/* The first line: the format and its version. */
#define ZEST_DESCRIPTOR_HEADER "zest-model 1"

/* Records (the first field of a line). */
#define ZEST_RECORD_WORLD_SIZE "world_size"
#define ZEST_RECORD_MESH "mesh"
#define ZEST_RECORD_EXPERT_GROUPS "expert_groups"
#define ZEST_RECORD_UNIT "unit"
#define ZEST_RECORD_PARAM "param"
#define ZEST_RECORD_FUNCTION "function"
#define ZEST_RECORD_OPTIMIZER "optimizer"
#define ZEST_RECORD_ACCUMULATE_FOR "accumulate_for"
#define ZEST_RECORD_ARG "arg"
#define ZEST_RECORD_RESULT "result"
#define ZEST_RECORD_HOST "host"
#define ZEST_RECORD_INDEX_BOUND "index_bound"
#define ZEST_RECORD_END "end"

/* Unit kinds. */
#define ZEST_UNIT_SHARDED "sharded"
#define ZEST_UNIT_REPLICATED "replicated"
/* Sharded over an expert group (expert parallelism): whole experts per
 * shard, one shard per rank of the group. */
#define ZEST_UNIT_EXPERTS "experts"

/* Argument roles (`arg <role> ...`). */
#define ZEST_ARG_UNIT "unit"
#define ZEST_ARG_DATA "data"
#define ZEST_ARG_STATE "state"
#define ZEST_ARG_ACCUM "accum"
#define ZEST_ARG_HYPER "hyper"
#define ZEST_ARG_GRAD_SUM "grad_sum"
#define ZEST_ARG_RNG "rng"
/* Offload: a host buffer the step copies a gradient or the hyperparameters
 * into for the host's update; the host never reads it. */
#define ZEST_ARG_STAGE "stage"

/* Result roles (`result <role> ...`). */
#define ZEST_RESULT_LOSS "loss"
#define ZEST_RESULT_OUTPUT "output"
#define ZEST_RESULT_GRAD "grad"
/* The global gradient norm before clipping (a training step with
 * clipping), f32 0-d. */
#define ZEST_RESULT_GRAD_NORM "grad_norm"

#endif /* ZEST_MODEL_DESCRIPTOR_H */
