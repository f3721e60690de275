//===- ExpertExchange.cpp - Rows to their experts' ranks and back ---------===//
//
// Expert parallelism's all-to-all with run-time sizes within an expert group
// (ZEST_GROUP_EXPERT): each rank's rows,
// grouped by expert, go to the ranks of its expert group that hold those
// experts (zest_expert_dispatch) and come back (zest_expert_combine). The
// sizes are exchanged first (zest_expert_routing). Every (rank, expert)
// block is one transfer, so what a rank receives lands grouped by its own
// experts without a copy, ready for the grouped products.
//
//===----------------------------------------------------------------------===//

#include "RuntimeState.h"

using namespace zest::rt;

namespace {

/// The layout of one exchange, read on the host: this rank's row ends by
/// expert and (after routing) what each group rank sends it.
class ExpertLayout {
public:
  ExpertLayout(const void *ends, int64_t bits, int64_t experts)
      : experts(experts), ranks(get().backend->groupSize(ZEST_GROUP_EXPERT)),
        me(get().backend->groupRank(ZEST_GROUP_EXPERT)),
        ends(readInts(ends, experts, bits)) {
    if (experts % ranks != 0)
      fatal(std::to_string(experts) + " experts cannot be split over the " +
            std::to_string(ranks) + " ranks of an expert group");
    local = experts / ranks;
    for (int64_t e = 0; e < experts; ++e)
      if (sent(e) < 0)
        fatal("expert row ends are not increasing at expert " +
              std::to_string(e));
  }

  /// Reads the routing zest_expert_routing wrote.
  void readRouting(const int64_t *routing) {
    setRouting(readInts(routing, experts, 64));
  }
  /// Takes what each group rank sends this rank's experts, and where each
  /// block lands: prefix sums in expert-major, then rank, order.
  void setRouting(std::vector<int64_t> counts) {
    routing = std::move(counts);
    landings.assign(1, 0);
    for (int64_t l = 0; l < local; ++l)
      for (int q = 0; q < ranks; ++q)
        landings.push_back(landings.back() + received(q, l));
  }

  /// Rows this rank sends to expert `e`, and where they start.
  int64_t sent(int64_t e) const { return ends[e] - begin(e); }
  int64_t begin(int64_t e) const { return e ? ends[e - 1] : 0; }
  /// Rows group rank `peer` sends this rank for its local expert `l`, and
  /// where they land (expert-major, then by rank).
  int64_t received(int peer, int64_t l) const {
    return routing[peer * local + l];
  }
  int64_t landing(int peer, int64_t l) const {
    return landings[l * ranks + peer];
  }
  /// The end of the rows received for local expert `l`.
  int64_t localEnd(int64_t l) const { return landings[(l + 1) * ranks]; }
  /// Stops the job when `rows` rows (moved this way: `what`) exceed the
  /// `capacity` of the buffer the plan gave them.
  void checkRows(int64_t capacity, int64_t rows, const char *what) const {
    if (rows > capacity)
      fatal(std::string("this rank's experts ") + what + " " +
            std::to_string(rows) + " rows, more than the " +
            std::to_string(capacity) +
            " its buffer holds (the plan's worst case: every token of the "
            "expert group routed to this rank's experts, each at most once)");
  }
  int64_t totalReceived() const { return landings.back(); }

  /// The blocks this rank sends (its rows, by expert) and receives (its
  /// experts' rows, by rank) in a dispatch; a combine swaps the two.
  void blocks(char *rows, char *landed, int64_t rowBytes,
              std::vector<Backend::Transfer> &own,
              std::vector<Backend::Transfer> &theirs) const {
    for (int peer = 0; peer < ranks; ++peer)
      for (int64_t l = 0; l < local; ++l) {
        int64_t e = peer * local + l;
        own.push_back({peer, rows + begin(e) * rowBytes, sent(e) * rowBytes});
        theirs.push_back({peer, landed + landing(peer, l) * rowBytes,
                          received(peer, l) * rowBytes});
      }
  }

  int64_t experts, local = 1;
  int ranks, me;
  std::vector<int64_t> ends, routing, landings;

private:
  /// `count` integers of `bits` bits from compiled-code memory.
  static std::vector<int64_t> readInts(const void *data, int64_t count,
                                       int64_t bits) {
    int64_t bytes = count * (bits / 8);
    std::vector<char> host(bytes);
    get().backend->copyToHost(host.data(), data, bytes);
    std::vector<int64_t> values(count);
    for (int64_t i = 0; i < count; ++i)
      values[i] = bits == 32 ? reinterpret_cast<int32_t *>(host.data())[i]
                             : reinterpret_cast<int64_t *>(host.data())[i];
    return values;
  }
};

/// Writes `values` as `bits`-bit integers to compiled-code memory.
void writeInts(void *data, const std::vector<int64_t> &values, int64_t bits) {
  std::vector<char> host(values.size() * (bits / 8));
  for (size_t i = 0; i < values.size(); ++i) {
    if (bits == 32)
      reinterpret_cast<int32_t *>(host.data())[i] = int32_t(values[i]);
    else
      reinterpret_cast<int64_t *>(host.data())[i] = values[i];
  }
  get().backend->copyToDevice(data, host.data(), host.size());
}

/// Zeroes `bytes` of compiled-code memory.
void zero(void *data, int64_t bytes) {
  if (bytes > 0)
    get().backend->zeroMemory(data, size_t(bytes));
}

void checkBits(int64_t bits) {
  if (bits != 32 && bits != 64)
    fatal("expert row ends must be 32- or 64-bit integers, not " +
          std::to_string(bits) + "-bit");
}

/// The layout a dispatch or combine moves rows by: the ends, and the
/// routing zest_expert_routing wrote.
ExpertLayout readLayout(const void *ends, int64_t bits, int64_t experts,
                        const int64_t *routing) {
  checkBits(bits);
  ExpertLayout layout(ends, bits, experts);
  layout.readRouting(routing);
  return layout;
}

void runExchange(const std::vector<Backend::Transfer> &sends,
                 const std::vector<Backend::Transfer> &recvs,
                 const char *kind) {
  zest_wait(startExchange(sends, recvs, ZEST_GROUP_EXPERT, kind,
                          /*onHost=*/false));
}

} // namespace

extern "C" {

void zest_expert_routing(const void *ends, int64_t ends_bits, int64_t experts,
                         int64_t *routing, void *local_ends) {
  checkBits(ends_bits);
  ExpertLayout layout(ends, ends_bits, experts);
  // Each rank tells each group rank how many rows it sends its experts.
  std::vector<int64_t> counts(experts), received(experts);
  for (int64_t e = 0; e < experts; ++e)
    counts[e] = layout.sent(e);
  std::vector<Backend::Transfer> sends, recvs;
  int64_t blockBytes = layout.local * int64_t(sizeof(int64_t));
  for (int peer = 0; peer < layout.ranks; ++peer) {
    sends.push_back({peer, &counts[peer * layout.local], blockBytes});
    recvs.push_back({peer, &received[peer * layout.local], blockBytes});
  }
  zest_wait(startExchange(sends, recvs, ZEST_GROUP_EXPERT, "expert_counts",
                          /*onHost=*/true));
  layout.setRouting(received);
  std::vector<int64_t> localEnds(layout.local);
  for (int64_t l = 0; l < layout.local; ++l)
    localEnds[l] = layout.localEnd(l);
  writeInts(routing, received, 64);
  writeInts(local_ends, localEnds, ends_bits);
}

void zest_expert_dispatch(const void *rows, int64_t in_rows, int64_t cols,
                          zest_dtype_t dtype, const void *ends,
                          int64_t ends_bits, int64_t experts,
                          const int64_t *routing, void *out, int64_t out_rows) {
  ExpertLayout layout = readLayout(ends, ends_bits, experts, routing);
  layout.checkRows(in_rows, layout.ends[experts - 1], "sends");
  layout.checkRows(out_rows, layout.totalReceived(), "receive");
  int64_t rowBytes = cols * zest_dtype_size(dtype);
  std::vector<Backend::Transfer> sends, recvs;
  layout.blocks(const_cast<char *>(static_cast<const char *>(rows)),
                static_cast<char *>(out), rowBytes, sends, recvs);
  runExchange(sends, recvs, "expert_dispatch");
  int64_t filled = layout.totalReceived();
  zero(static_cast<char *>(out) + filled * rowBytes,
       (out_rows - filled) * rowBytes);
}

void zest_expert_combine(const void *rows, int64_t in_rows, int64_t cols,
                         zest_dtype_t dtype, const void *ends,
                         int64_t ends_bits, int64_t experts,
                         const int64_t *routing, void *out, int64_t out_rows) {
  ExpertLayout layout = readLayout(ends, ends_bits, experts, routing);
  layout.checkRows(in_rows, layout.totalReceived(), "send back");
  layout.checkRows(out_rows, layout.ends[experts - 1], "receive back");
  int64_t rowBytes = cols * zest_dtype_size(dtype);
  std::vector<Backend::Transfer> sends, recvs;
  layout.blocks(static_cast<char *>(out),
                const_cast<char *>(static_cast<const char *>(rows)), rowBytes,
                recvs, sends);
  runExchange(sends, recvs, "expert_combine");
  int64_t filled = layout.ends[experts - 1];
  zero(static_cast<char *>(out) + filled * rowBytes,
       (out_rows - filled) * rowBytes);
}

} // extern "C"
