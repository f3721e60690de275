//===- Pipelines.cpp - Zest pass pipelines and registration ---------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::zest;

GroupUnitsPassOptions ShardPipelineOptions::getGroupUnitsOptions() const {
  GroupUnitsPassOptions options;
  options.worldSize = worldSize;
  options.leafModules.assign(leafModules.begin(), leafModules.end());
  options.leafClasses.assign(leafClasses.begin(), leafClasses.end());
  options.minUnitNumel = minUnitNumel;
  options.ignore.assign(ignore.begin(), ignore.end());
  options.strategy = strategy;
  options.replicas = replicas;
  options.paramDtype = paramDtype;
  options.reduceDtype = reduceDtype;
  return options;
}

void mlir::zest::buildShardPipeline(OpPassManager &pm,
                                    const ShardPipelineOptions &options) {
  pm.addPass(createVerifyContractPass());
  pm.addPass(createGroupUnitsPass(options.getGroupUnitsOptions()));
  pm.addPass(createShardParamsPass());
  if (!options.manifest.empty()) {
    WriteManifestPassOptions manifest;
    manifest.path = options.manifest;
    pm.addPass(createWriteManifestPass(manifest));
  }
}

void mlir::zest::registerZestPipelines() {
  PassPipelineRegistration<ShardPipelineOptions>(
      "zest-shard-pipeline",
      "Checks the contract, groups parameters into units and shards them "
      "(verify-contract, group-units, shard-params, optional manifest)",
      buildShardPipeline);
}
