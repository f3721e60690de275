//===- Options.cpp - Command-line options of the training driver ----------===//

#include "Options.h"

#include "zest_runtime.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace zest;

static const char *kHelp =
    "usage: mpirun -np W <model> [options]\n"
    "  --steps N            training (or forward) steps (10)\n"
    "  --seed S             parameter, synthetic data and random-stream\n"
    "                       (dropout) seed (0; on --load, the checkpoint's\n"
    "                       random-stream seed unless given)\n"
    "  --lr F               peak learning rate (0.01)\n"
    "  --lr-schedule constant|cosine  after warm-up: constant, or cosine\n"
    "                       decay to --min-lr at --schedule-steps (constant)\n"
    "  --warmup-steps N     linear warm-up from 0 over N steps (0)\n"
    "  --schedule-steps N   steps the schedule spans (0: to the end of the\n"
    "                       run)\n"
    "  --min-lr F           cosine floor (0)\n"
    "  --weight-decay F     sgd: L2; adamw: decoupled (0)\n"
    "  --momentum F         sgd momentum (0.9; needs zestc --momentum)\n"
    "  --beta1 F --beta2 F --eps F   AdamW constants (0.9, 0.999, 1e-8)\n"
    "  --optimizer sgd|adamw  checks that the executable was compiled with\n"
    "                       this optimizer (zestc --optimizer)\n"
    "  --accum A            micro-batches per rank and step (1); the global\n"
    "                       batch is W * A * micro-batch\n"
    "  --data synthetic|FILE  data source (synthetic); FILE: raw samples\n"
    "                       back to back, A.npy[,B.npy...] (one per data\n"
    "                       argument) or X.safetensors (tensors \"0\", \"1\",\n"
    "                       ...); each rank reads only its samples\n"
    "  --tokens FILE        train on windows of a token stream: raw uint16\n"
    "                       (nanoGPT's .bin) or a 1-D .npy of uint16,\n"
    "                       uint32, int32 or int64 ids, memory-mapped; ids\n"
    "                       = w[0:T], targets = w[1:T+1], windows at seeded\n"
    "                       offsets, the ranks' disjoint\n"
    "  --token-bound N      with --tokens: every id must be below N (the\n"
    "                       vocabulary); checked before the first step\n"
    "  --eval-tokens FILE   evaluate on windows of this token stream: the\n"
    "                       loss of the entry point NAME_forward (zest-import\n"
    "                       --forward) on fixed batches, averaged over the\n"
    "                       ranks, printed as 'eval step N loss X'\n"
    "  --eval-every N       with --eval-tokens: every N steps (0: after the\n"
    "                       last)\n"
    "  --eval-batches K     with --eval-tokens: global batches (4)\n"
    "  --dataset-size N     synthetic samples before repeating (0: never)\n"
    "  --int-bound N        integer data is drawn from [0, N) (16), or from\n"
    "                       the table an argument indexes if smaller\n"
    "  --function NAME      entry point to run (first with a loss)\n"
    "  --save DIR           write a sharded checkpoint after the last step\n"
    "  --save-every N       with --save: every N steps (and after the last)\n"
    "                       into DIR/step-NNNNNN, then point DIR/latest at it\n"
    "  --keep K             with --save-every: keep the newest K (0: all)\n"
    "  --load DIR           resume from a sharded checkpoint (DIR/latest if\n"
    "                       DIR holds one)\n"
    "  --trace FILE         write a Chrome trace (FILE.rankR.json per rank)\n"
    "  --timeout S          abort all ranks if a collective waits longer\n"
    "                       than S seconds (ZEST_TIMEOUT_S)\n"
    "  --progress           after each step's loss, a progress line on rank\n"
    "                       0: step/last, tokens/s (or samples/s), step and\n"
    "                       wait time, the pool's peak, ETA\n";

/// Rank 0 prints `error: <message>` and `after`; every rank exits with
/// `status`.
[[noreturn]] static void stopRanks(const std::string &message,
                                   const char *after, int status) {
  if (zest_rank() == 0)
    std::fprintf(stderr, "error: %s\n%s", message.c_str(), after);
  zest_finalize();
  std::exit(status);
}

void zest::usageError(const std::string &message) {
  stopRanks(message, kHelp, 2);
}

void zest::dataError(const std::string &message) { stopRanks(message, "", 1); }

Options zest::parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      if (zest_rank() == 0)
        std::printf("%s", kHelp);
      zest_finalize();
      std::exit(0);
    }
    if (flag == "--progress") {
      o.progress = true;
      continue;
    }
    if (i + 1 >= argc)
      usageError("option '" + flag + "' needs a value");
    std::string value = argv[++i];
    auto integer = [&](int64_t min) {
      char *end = nullptr;
      long long v = std::strtoll(value.c_str(), &end, 10);
      if (*end || end == value.c_str() || v < min)
        usageError("option '" + flag + "' expects an integer >= " +
                   std::to_string(min) + ", got '" + value + "'");
      return int64_t(v);
    };
    auto real = [&]() {
      char *end = nullptr;
      double v = std::strtod(value.c_str(), &end);
      if (*end || end == value.c_str() || !std::isfinite(v))
        usageError("option '" + flag + "' expects a number, got '" + value +
                   "'");
      return v;
    };
    auto oneOf = [&](std::initializer_list<const char *> choices) {
      std::string list;
      for (const char *choice : choices) {
        if (value == choice)
          return value;
        list += (list.empty() ? "" : " or ") + std::string(choice);
      }
      usageError(flag + " expects " + list + ", got '" + value + "'");
    };
    if (flag == "--steps")
      o.steps = integer(0);
    else if (flag == "--seed")
      o.seed = uint64_t(integer(0)), o.seedGiven = true;
    else if (flag == "--lr")
      o.lr = real();
    else if (flag == "--lr-schedule")
      o.schedule = oneOf({"constant", "cosine"});
    else if (flag == "--warmup-steps")
      o.warmupSteps = integer(0);
    else if (flag == "--schedule-steps")
      o.scheduleSteps = integer(0);
    else if (flag == "--min-lr")
      o.minLr = real();
    else if (flag == "--optimizer")
      o.optimizer = oneOf({"sgd", "adamw"});
    else if (flag == "--weight-decay")
      o.weightDecay = real();
    else if (flag == "--momentum")
      o.momentum = real();
    else if (flag == "--beta1")
      o.beta1 = real();
    else if (flag == "--beta2")
      o.beta2 = real();
    else if (flag == "--eps")
      o.eps = real();
    else if (flag == "--accum")
      o.accum = integer(1);
    else if (flag == "--data")
      o.data = value;
    else if (flag == "--tokens")
      o.tokens = value;
    else if (flag == "--token-bound")
      o.tokenBound = integer(1);
    else if (flag == "--eval-tokens")
      o.evalTokens = value;
    else if (flag == "--eval-every")
      o.evalEvery = integer(0);
    else if (flag == "--eval-batches")
      o.evalBatches = integer(1);
    else if (flag == "--dataset-size")
      o.datasetSize = integer(0);
    else if (flag == "--int-bound")
      o.intBound = integer(1);
    else if (flag == "--function")
      o.function = value;
    else if (flag == "--save")
      o.save = value;
    else if (flag == "--save-every")
      o.saveEvery = integer(1);
    else if (flag == "--keep")
      o.keep = integer(0);
    else if (flag == "--load")
      o.load = value;
    else if (flag == "--trace")
      o.trace = value;
    else if (flag == "--timeout")
      o.timeout = real();
    else
      usageError("unknown option '" + flag + "'");
  }
  if (!o.tokens.empty() && o.data != "synthetic")
    usageError("--tokens and --data are two data sources; give one");
  if (o.tokenBound && o.tokens.empty() && o.evalTokens.empty())
    usageError("--token-bound needs --tokens FILE or --eval-tokens FILE");
  if (o.evalTokens.empty() && (o.evalEvery || o.evalBatches != 4))
    usageError("--eval-every and --eval-batches need --eval-tokens FILE");
  if (o.saveEvery && o.save.empty())
    usageError("--save-every needs --save DIR");
  if (o.keep && !o.saveEvery)
    usageError("--keep needs --save-every N");
  return o;
}
