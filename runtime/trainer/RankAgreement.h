//===- RankAgreement.h - All ranks run the same program -------------------===//
//
// Ranks launched from different executables or with different arguments
// (mpirun's MPMD syntax, a stale binary on one node) would otherwise meet in
// collectives of different sizes and hang or compute garbage. One
// all-gather at start-up, before anything else that communicates, finds
// them and ends every rank with an error that says which ranks differ.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_TRAINER_RANKAGREEMENT_H
#define ZEST_RUNTIME_TRAINER_RANKAGREEMENT_H

#include <string_view>

namespace zest {

/// Checks that every rank runs the same executable (its bytes; `model`, the
/// embedded model, where the file cannot be read) with the same arguments;
/// otherwise exits every rank with status 2, each naming the groups of
/// ranks that agree and its own arguments.
void checkRanksAgree(int argc, char **argv, std::string_view model);

} // namespace zest

#endif // ZEST_RUNTIME_TRAINER_RANKAGREEMENT_H
