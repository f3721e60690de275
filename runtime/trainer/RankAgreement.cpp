//===- RankAgreement.cpp - All ranks run the same program -----------------===//

#include "RankAgreement.h"

#include "zest_layout_hash.h"
#include "zest_runtime.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

using namespace zest;

namespace {

/// A hash of this process's executable file; of `model` if the file cannot
/// be read.
uint64_t hashProgram(std::string_view model) {
  LayoutHash hash;
  if (std::FILE *file = std::fopen("/proc/self/exe", "rb")) {
    std::vector<char> chunk(1 << 20);
    while (size_t read = std::fread(chunk.data(), 1, chunk.size(), file))
      hash.mix(std::string_view(chunk.data(), read));
    std::fclose(file);
  } else {
    hash.mix(model);
  }
  return hash.value();
}

std::string joinArguments(int argc, char **argv) {
  std::string text;
  for (int i = 1; i < argc; ++i)
    text += (i > 1 ? " " : "") + std::string(argv[i]);
  return text;
}

/// "ranks 0, 2; ranks 1" for the ranks grouped by the value each holds,
/// the group of rank 0 first.
std::string describeGroups(const std::vector<int64_t> &values) {
  std::map<int64_t, size_t> groupOf;
  std::vector<std::vector<int>> groups;
  for (size_t rank = 0; rank < values.size(); ++rank) {
    auto [it, added] = groupOf.try_emplace(values[rank], groups.size());
    if (added)
      groups.emplace_back();
    groups[it->second].push_back(static_cast<int>(rank));
  }
  std::string text;
  for (const std::vector<int> &ranks : groups) {
    text += text.empty() ? "ranks " : "; ranks ";
    for (size_t i = 0; i < ranks.size(); ++i)
      text += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return text;
}

/// The i-th field of every rank's pair.
std::vector<int64_t> field(const std::vector<int64_t> &pairs, size_t i) {
  std::vector<int64_t> values;
  for (size_t at = i; at < pairs.size(); at += 2)
    values.push_back(pairs[at]);
  return values;
}

bool allEqual(const std::vector<int64_t> &values) {
  for (int64_t value : values)
    if (value != values.front())
      return false;
  return true;
}

} // namespace

void zest::checkRanksAgree(int argc, char **argv, std::string_view model) {
  std::string arguments = joinArguments(argc, argv);
  LayoutHash argumentHash;
  argumentHash.mix(arguments);
  int64_t mine[2] = {static_cast<int64_t>(hashProgram(model)),
                     static_cast<int64_t>(argumentHash.value())};
  std::vector<int64_t> all(2 * static_cast<size_t>(zest_world_size()));
  zest_host_all_gather(mine, all.data(), 2, ZEST_I64);
  std::vector<int64_t> programs = field(all, 0), argumentsOf = field(all, 1);
  std::string problem;
  if (!allEqual(programs))
    problem = "the ranks run different executables (" +
              describeGroups(programs) +
              "): start every rank from the same zestc output";
  else if (!allEqual(argumentsOf))
    problem = "the ranks were started with different arguments (" +
              describeGroups(argumentsOf) + "); this rank's: '" + arguments +
              "': give every rank the same options";
  if (problem.empty())
    return;
  std::fprintf(stderr, "zest: rank %d: error: %s\n", zest_rank(),
               problem.c_str());
  std::fflush(stderr);
  zest_finalize();
  std::exit(2);
}
