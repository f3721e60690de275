//===- RewriteConfig.cpp - The greedy driver's configuration --------------===//

#include "zest/Dialect/Zest/Transforms/Transforms.h"

using namespace mlir;

GreedyRewriteConfig mlir::zest::getStraightLineRewriteConfig() {
  GreedyRewriteConfig config;
  config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  return config;
}
