//===- StagedBackend.cpp - Collectives on device buffers through MPI ------===//
//
// The collectives of the NCCL backend run through host memory and MPI:
// device -> host, MPI, host -> device. Several ranks may then share one GPU
// (NCCL refuses two ranks on one device): tests and development.
// ZEST_BACKEND=staged selects it.
//
//===----------------------------------------------------------------------===//

#include "Device.h"

#include <vector>

using namespace zest::rt;
using namespace zest::rt::cuda;

namespace {

/// A collective run by MPI on host copies; its result goes back to the
/// device when MPI completes.
class StagedOp : public PendingOp {
public:
  StagedOp(DeviceBackend &device, std::unique_ptr<PendingOp> hostOp,
           std::vector<char> send, std::vector<char> recv, void *deviceRecv)
      : device(device), hostOp(std::move(hostOp)), send(std::move(send)),
        recv(std::move(recv)), deviceRecv(deviceRecv) {}
  bool test() override {
    if (!hostOp->test())
      return false;
    device.copyToDevice(deviceRecv, recv.data(), recv.size());
    return true;
  }

private:
  DeviceBackend &device;
  std::unique_ptr<PendingOp> hostOp;
  std::vector<char> send, recv; // alive until MPI is done with them
  void *deviceRecv;
};

/// An exchange run by MPI on host copies of its blocks: the blocks it
/// receives go to the device when MPI completes.
class StagedExchange : public PendingOp {
public:
  explicit StagedExchange(DeviceBackend &device) : device(device) {}
  bool test() override {
    if (!hostOp->test())
      return false;
    for (size_t i = 0; i < received.size(); ++i)
      device.copyToDevice(targets[i], received[i].data(), received[i].size());
    return true;
  }

  DeviceBackend &device;
  std::unique_ptr<PendingOp> hostOp;
  /// Alive until MPI is done with them.
  std::vector<std::vector<char>> sent, received;
  std::vector<void *> targets;
};

class StagedBackend : public DeviceBackend {
public:
  using DeviceBackend::DeviceBackend;

  const char *name() const override { return "cuda-staged"; }
  std::optional<std::string> whyNoCapture() const override {
    return std::string("the staged backend's collectives go through host "
                       "memory");
  }
  void setMesh(int replicas, int shards) override {
    mpi->setMesh(replicas, shards);
  }
  int groupRank(zest_group_t group) const override {
    return mpi->groupRank(group);
  }
  int groupSize(zest_group_t group) const override {
    return mpi->groupSize(group);
  }

  std::unique_ptr<PendingOp> allGather(const void *send, void *recv,
                                       int64_t count, zest_dtype_t dtype,
                                       zest_group_t group) override {
    int64_t bytes = count * zest_dtype_bytes(dtype);
    return stage(send, bytes, recv, bytes * groupSize(group), false,
                 [&](const void *s, void *r) {
                   return mpi->allGather(s, r, count, dtype, group);
                 });
  }
  std::unique_ptr<PendingOp> reduceScatter(const void *send, void *recv,
                                           int64_t count, zest_dtype_t dtype,
                                           zest_reduction_t op,
                                           zest_group_t group) override {
    int64_t bytes = count * zest_dtype_bytes(dtype);
    return stage(send, bytes * groupSize(group), recv, bytes, false,
                 [&](const void *s, void *r) {
                   return mpi->reduceScatter(s, r, count, dtype, op, group);
                 });
  }
  std::unique_ptr<PendingOp> allReduce(const void *send, void *recv,
                                       int64_t count, zest_dtype_t dtype,
                                       zest_reduction_t op,
                                       zest_group_t group) override {
    int64_t bytes = count * zest_dtype_bytes(dtype);
    return stage(send, bytes, recv, bytes, false, [&](const void *s, void *r) {
      return mpi->allReduce(s, r, count, dtype, op, group);
    });
  }
  std::unique_ptr<PendingOp> broadcast(void *buffer, int64_t count,
                                       zest_dtype_t dtype, int root) override {
    int64_t bytes = count * zest_dtype_bytes(dtype);
    return stage(buffer, bytes, buffer, bytes, true,
                 [&](const void *, void *r) {
                   return mpi->broadcast(r, count, dtype, root);
                 });
  }

  std::unique_ptr<PendingOp> exchange(const std::vector<Transfer> &sends,
                                      const std::vector<Transfer> &recvs,
                                      zest_group_t group) override {
    auto op = std::make_unique<StagedExchange>(*this);
    std::vector<Transfer> hostSends, hostRecvs;
    for (const Transfer &send : sends) {
      op->sent.emplace_back(size_t(send.bytes));
      copyToHost(op->sent.back().data(), send.data, size_t(send.bytes));
      hostSends.push_back({send.peer, op->sent.back().data(), send.bytes});
    }
    for (const Transfer &recv : recvs) {
      op->received.emplace_back(size_t(recv.bytes));
      op->targets.push_back(recv.data);
      hostRecvs.push_back({recv.peer, op->received.back().data(), recv.bytes});
    }
    op->hostOp = mpi->exchange(hostSends, hostRecvs, group);
    return op;
  }
  void setExpertGroups(int size) override { mpi->setExpertGroups(size); }

private:
  /// Copies `sendBytes` from the device to a host buffer (the receive
  /// buffer for broadcast, which works in place), then runs `hostCall` on
  /// the host buffers; the result goes to `deviceRecv` when MPI is done.
  template <typename Call>
  std::unique_ptr<PendingOp> stage(const void *deviceSend, int64_t sendBytes,
                                   void *deviceRecv, int64_t recvBytes,
                                   bool inPlace, Call hostCall) {
    std::vector<char> send(inPlace ? 0 : static_cast<size_t>(sendBytes));
    std::vector<char> recv(static_cast<size_t>(recvBytes));
    copyToHost(inPlace ? recv.data() : send.data(), deviceSend,
               size_t(sendBytes));
    std::unique_ptr<PendingOp> hostOp = hostCall(send.data(), recv.data());
    return std::make_unique<StagedOp>(*this, std::move(hostOp), std::move(send),
                                      std::move(recv), deviceRecv);
  }
};

} // namespace

std::unique_ptr<Backend>
cuda::createStagedBackend(std::unique_ptr<Backend> mpi) {
  return std::make_unique<StagedBackend>(std::move(mpi));
}
