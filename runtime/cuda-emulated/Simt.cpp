//===- Simt.cpp - Cooperative blocks of threads on the emulated GPU -------===//
//
// A block's threads are fibers on the host thread that runs the launch; a
// scheduler resumes, in thread order, every fiber whose wait is over, and a
// fiber gives way when it waits at a barrier or a warp-wide operation. On
// x86-64 a switch saves what the System V ABI has a callee keep (a tenth of
// swapcontext's cost, which also saves the signal mask with a system
// call); elsewhere fibers are ucontexts. When no fiber can go on and some have
// not finished, the block hangs on a GPU: here it is a device error that says
// who waits where. See Simt.h.
//
//===----------------------------------------------------------------------===//

#include "Simt.h"

#include "DeviceMemory.h"
#include "Launch.h"
#include "Streams.h"

#include <sys/mman.h>
#ifndef __x86_64__
#include <ucontext.h>
#endif

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

using namespace zest::emulated;
using namespace zest::emulated::simt;

namespace {

/// A fiber's stack: the kernels keep their register tiles there (a few KiB).
constexpr size_t kStackBytes = 256 << 10;
constexpr size_t kGuardBytes = 4096;
/// The dynamic shared memory a block may have by default, and at most
/// (an H100's, with cudaFuncSetAttribute).
constexpr size_t kDefaultSharedBytes = 48 << 10;
constexpr size_t kMaxSharedBytes = 227 << 10;

#ifdef __x86_64__
/// Saves the callee-saved registers, MXCSR and the x87 control word on the
/// current stack, stores its pointer in *save and continues on `resume`.
extern "C" void zestSimtSwitch(void **save, void *resume);
asm(R"(
  .text
  .globl zestSimtSwitch
  .hidden zestSimtSwitch
  .type zestSimtSwitch,@function
zestSimtSwitch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size zestSimtSwitch, .-zestSimtSwitch
)");

/// A suspended flow of control: its stack pointer.
struct Context {
  void *sp = nullptr;
};

/// A context that starts `entry` (which must never return) on the stack
/// [stack, stack + bytes): the frame zestSimtSwitch pops, then entry as
/// the return address, with the stack aligned as after a call.
void startContext(Context &context, char *stack, size_t bytes,
                  void (*entry)()) {
  auto *top = reinterpret_cast<uint64_t *>(
      (reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t(15));
  uint32_t mxcsr;
  uint16_t control;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(control));
  uint64_t *sp = top - 9;
  sp[0] = mxcsr | uint64_t(control) << 32;
  for (int r = 1; r <= 6; ++r)
    sp[r] = 0; // r15, r14, r13, r12, rbx, rbp
  sp[7] = reinterpret_cast<uint64_t>(entry);
  sp[8] = 0; // entry's return address: it never returns
  context.sp = sp;
}

void switchContext(Context &from, Context &to) {
  zestSimtSwitch(&from.sp, to.sp);
}
#else
struct Context {
  ucontext_t context;
};

void startContext(Context &context, char *stack, size_t bytes,
                  void (*entry)()) {
  getcontext(&context.context);
  context.context.uc_stack.ss_sp = stack;
  context.context.uc_stack.ss_size = bytes;
  context.context.uc_link = nullptr;
  makecontext(&context.context, entry, 0);
}

void switchContext(Context &from, Context &to) {
  swapcontext(&from.context, &to.context);
}
#endif

struct Copy {
  void *dst;
  const void *src;
  size_t bytes;
  bool valid;
};

enum class State { Ready, AtBarrier, AtWarp, Done };

struct Fiber {
  Context context;
  dim3 thread;
  unsigned linear = 0;
  State state = State::Ready;
  uint64_t waitFor = 0;          // the generation whose end it waits for
  std::vector<Copy> copies;      // issued, not landed
  std::vector<size_t> groupEnds; // committed groups' ends in `copies`
};

struct Warp {
  unsigned lanes = 0;
  unsigned arrived = 0;
  uint64_t generation = 0;
  const char *what = nullptr;
  size_t bytes = 0;
  // Two generations: a lane reads the last operation's values while one
  // that went on already gives its next.
  unsigned char slots[2][32 * kSlotBytes];
};

/// A running block.
struct Block {
  const char *kernel = nullptr;
  dim3 index;
  const std::function<void()> *body = nullptr;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  Context scheduler;
  Fiber *running = nullptr;
  unsigned live = 0, arrived = 0;
  uint64_t generation = 0;
  unsigned char *shared = nullptr;
  size_t sharedBytes = 0;
};

thread_local Block *block = nullptr;

std::string describe(dim3 d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " +
         std::to_string(d.z) + ")";
}

/// The running thread, for errors.
std::string where() {
  return std::string("kernel ") + block->kernel + ", block " +
         describe(block->index) + ", thread " +
         describe(block->running->thread);
}

Fiber &self() {
  if (!block || !block->running)
    deviceError("a barrier, warp-wide operation or asynchronous copy outside "
                "a launch of a kernel that may use them");
  return *block->running;
}

/// Gives way to the scheduler until `fiber`'s wait is over.
void giveWay(Fiber &fiber, State state, uint64_t generation) {
  fiber.state = state;
  fiber.waitFor = generation;
  switchContext(fiber.context, block->scheduler);
  fiber.state = State::Ready;
}

/// Ends the barrier's generation once every live thread has arrived.
void releaseBarrier() {
  if (block->arrived > 0 && block->arrived == block->live) {
    block->arrived = 0;
    ++block->generation;
  }
}

/// A fiber's entry: the kernel's thread, then back to the scheduler for
/// good.
void runFiber() {
  Fiber &fiber = *block->running;
  (*block->body)();
  fiber.state = State::Done;
  --block->live;
  releaseBarrier(); // an exited thread no longer holds a barrier up
  switchContext(fiber.context, block->scheduler);
  __builtin_unreachable();
}

bool canRun(const Fiber &fiber) {
  switch (fiber.state) {
  case State::Ready:
    return true;
  case State::AtBarrier:
    return block->generation != fiber.waitFor;
  case State::AtWarp:
    return block->warps[fiber.linear / 32].generation != fiber.waitFor;
  case State::Done:
    return false;
  }
  return false;
}

[[noreturn]] void reportHang() {
  unsigned atBarrier = 0;
  std::string detail;
  for (const Fiber &fiber : block->fibers)
    atBarrier += fiber.state == State::AtBarrier;
  for (size_t w = 0; w < block->warps.size(); ++w) {
    const Warp &warp = block->warps[w];
    if (warp.arrived)
      detail += "; warp " + std::to_string(w) + ": " +
                std::to_string(warp.arrived) + " of " +
                std::to_string(warp.lanes) + " lanes at " + warp.what;
  }
  deviceError(std::string("kernel ") + block->kernel + ", block " +
              describe(block->index) + " hangs: " + std::to_string(atBarrier) +
              " of " + std::to_string(block->live) +
              " live threads wait at __syncthreads" + detail +
              " (threads wait for others that never arrive)");
}

/// Fiber stacks, kept across launches, each above a guard page.
class Stacks {
public:
  ~Stacks() {
    for (void *stack : stacks)
      munmap(stack, kGuardBytes + kStackBytes);
  }
  char *get(size_t i) {
    while (stacks.size() <= i) {
      void *p = mmap(nullptr, kGuardBytes + kStackBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED)
        deviceError("cannot map the stacks of an emulated block's threads");
      mprotect(p, kGuardBytes, PROT_NONE);
      stacks.push_back(p);
    }
    return static_cast<char *>(stacks[i]) + kGuardBytes;
  }

private:
  std::vector<void *> stacks;
};

/// Runs one block of `size` threads to its end.
void runBlock(Block &b, dim3 size, Stacks &stacks) {
  unsigned count = size.x * size.y * size.z;
  b.fibers.assign(count, Fiber());
  b.warps.assign((count + 31) / 32, Warp());
  for (unsigned w = 0; w < b.warps.size(); ++w)
    b.warps[w].lanes = std::min(32u, count - 32 * w);
  b.live = count, b.arrived = 0, b.generation = 0;
  std::memset(b.shared, 0xff, b.sharedBytes); // NaNs until written
  for (unsigned i = 0; i < count; ++i) {
    Fiber &fiber = b.fibers[i];
    fiber.linear = i;
    fiber.thread = dim3(i % size.x, i / size.x % size.y, i / (size.x * size.y));
    startContext(fiber.context, stacks.get(i), kStackBytes, runFiber);
  }
  for (;;) {
    bool ran = false, unfinished = false;
    for (Fiber &fiber : b.fibers) {
      unfinished |= fiber.state != State::Done;
      if (!canRun(fiber))
        continue;
      b.running = &fiber;
      current.thread = fiber.thread;
      switchContext(b.scheduler, fiber.context);
      ran = true;
    }
    b.running = nullptr;
    if (!unfinished)
      return;
    if (!ran)
      reportHang();
  }
}

std::mutex limitsMutex;
std::map<const void *, size_t> &sharedLimits() {
  static auto *limits = new std::map<const void *, size_t>;
  return *limits;
}

size_t sharedLimit(const void *function) {
  std::lock_guard<std::mutex> lock(limitsMutex);
  auto it = sharedLimits().find(function);
  return it == sharedLimits().end() ? kDefaultSharedBytes : it->second;
}

void checkLaunch(const char *kernel, const void *function, dim3 grid, dim3 size,
                 size_t sharedBytes) {
  uint64_t threads = uint64_t(size.x) * size.y * size.z,
           blocks = uint64_t(grid.x) * grid.y * grid.z;
  if (threads == 0 || threads > 1024 || blocks == 0)
    deviceError(std::string("a launch of kernel ") + kernel + " has " +
                std::to_string(blocks) + " blocks of " +
                std::to_string(threads) +
                " threads (a block has 1 to 1024 threads)");
  size_t limit = sharedLimit(function);
  if (sharedBytes > limit)
    deviceError(std::string("a launch of kernel ") + kernel + " asks for " +
                std::to_string(sharedBytes) +
                " bytes of dynamic shared memory, more than the " +
                std::to_string(limit) +
                " it may have (cudaFuncSetAttribute with "
                "cudaFuncAttributeMaxDynamicSharedMemorySize raises it)");
}

} // namespace

void simt::launchBlocks(const char *kernel, const void *function, dim3 grid,
                        dim3 size, size_t sharedBytes, cudaStream_t stream,
                        std::function<void()> thread) {
  checkLaunch(kernel, function, grid, size, sharedBytes);
  enqueueWork(
      stream,
      [=] {
        static thread_local Stacks stacks;
        Block b;
        b.kernel = kernel;
        b.body = &thread;
        std::unique_ptr<unsigned char, void (*)(void *)> shared(
            static_cast<unsigned char *>(
                std::aligned_alloc(128, (sharedBytes + 127) / 128 * 128 + 128)),
            std::free);
        b.shared = shared.get(), b.sharedBytes = sharedBytes;
        Block *outer = block;
        block = &b;
        current.grid = grid, current.blockSize = size;
        for (unsigned z = 0; z < grid.z; ++z)
          for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
              b.index = current.block = dim3(x, y, z);
              runBlock(b, size, stacks);
            }
        block = outer;
      },
      std::string("a launch of kernel ") + kernel);
}

void simt::syncThreads() {
  Fiber &fiber = self();
  ++block->arrived;
  uint64_t generation = block->generation;
  releaseBarrier();
  if (block->generation == generation)
    giveWay(fiber, State::AtBarrier, generation);
}

const unsigned char *simt::exchange(unsigned mask, const void *value,
                                    size_t bytes, const char *what) {
  Fiber &fiber = self();
  Warp &warp = block->warps[fiber.linear / 32];
  if (mask != 0xffffffffu || warp.lanes != 32)
    deviceError(where() + ": " + what +
                " over part of a warp (the emulated device takes whole "
                "warps of 32 lanes only)");
  if (warp.arrived == 0) {
    warp.what = what, warp.bytes = bytes;
  } else if ((warp.what != what && std::strcmp(warp.what, what) != 0) ||
             warp.bytes != bytes) {
    deviceError(where() +
                ": lanes of one warp at different warp-wide "
                "operations: " +
                what + " and " + warp.what +
                " (the warp diverged where every lane must take part)");
  }
  uint64_t generation = warp.generation;
  unsigned char *slots = warp.slots[generation % 2];
  std::memcpy(slots + fiber.linear % 32 * kSlotBytes, value, bytes);
  if (++warp.arrived == warp.lanes) {
    warp.arrived = 0;
    ++warp.generation;
  } else {
    giveWay(fiber, State::AtWarp, generation);
  }
  return slots;
}

int simt::laneIndex() { return int(self().linear % 32); }

unsigned char *simt::dynamicShared() {
  self();
  return block->shared;
}

void simt::requireShared(const void *p, size_t bytes, size_t alignment,
                         const char *what) {
  self(); // inside a block
  auto *at = static_cast<const unsigned char *>(p);
  if (at < block->shared || at + bytes > block->shared + block->sharedBytes)
    deviceError(where() + ": " + what + " at " + describePointer(p) +
                ", outside the block's " + std::to_string(block->sharedBytes) +
                " bytes of shared memory");
  if (reinterpret_cast<uintptr_t>(p) % alignment != 0)
    deviceError(where() + ": " + what + " at shared memory offset " +
                std::to_string(at - block->shared) + ", not aligned to " +
                std::to_string(alignment) + " bytes");
}

void simt::copyAsync(void *dst, const void *src, size_t bytes, bool valid) {
  Fiber &fiber = self();
  requireShared(dst, bytes, bytes, "cp.async's destination");
  if (valid) {
    requireDevice(src, bytes, where() + ": cp.async's source");
    if (reinterpret_cast<uintptr_t>(src) % bytes != 0)
      deviceError(where() + ": cp.async's source " + describePointer(src) +
                  " is not aligned to " + std::to_string(bytes) + " bytes");
  }
  fiber.copies.push_back({dst, src, bytes, valid});
}

void simt::commitCopies() {
  Fiber &fiber = self();
  fiber.groupEnds.push_back(fiber.copies.size());
}

void simt::waitCopies(int pending) {
  Fiber &fiber = self();
  size_t groups = fiber.groupEnds.size();
  if (groups <= size_t(pending))
    return;
  size_t landed = fiber.groupEnds[groups - pending - 1];
  for (size_t i = 0; i < landed; ++i) {
    const Copy &copy = fiber.copies[i];
    if (copy.valid)
      std::memcpy(copy.dst, copy.src, copy.bytes);
    else
      std::memset(copy.dst, 0, copy.bytes);
  }
  fiber.copies.erase(fiber.copies.begin(), fiber.copies.begin() + landed);
  fiber.groupEnds.erase(fiber.groupEnds.begin(),
                        fiber.groupEnds.end() - pending);
  for (size_t &end : fiber.groupEnds)
    end -= landed;
}

extern "C" cudaError_t cudaFuncSetAttribute(const void *func,
                                            cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
    return cudaSuccess; // carveout preferences: nothing to emulate
  if (value < 0 || size_t(value) > kMaxSharedBytes)
    return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> lock(limitsMutex);
  sharedLimits()[func] = size_t(value);
  return cudaSuccess;
}
