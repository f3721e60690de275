//===- AttentionTest.cpp - Fused attention against a reference ------------===//
//
// zest_attention_forward / _backward (the CPU kernels) or, built with
// ZEST_ATTENTION_TEST_CUDA, zest_cuda_attention_* on device buffers, against
// a double-precision reference that forms every score: f32, bf16 and f16
// storage; no mask, causal, boolean and additive masks (f32 and the
// storage type) broadcast over batch, heads or query rows; rows that see
// no key (zero output, lse = +inf, zero gradients); grouped-query heads;
// fewer and more keys than queries; sizes across the kernels' blocks (64
// query rows, 256 keys; the GPU's tiles of 64 x 64) and head dimensions of
// their own for values, up to and past the GPU tiles' 128; every operand
// contiguous, or (every other case) laid out [batch, rows, heads, dim]
// with padded rows, as q, k and v split from one projection are, the
// padding checked untouched. On a GPU and
// the emulated device, the default kernels (flash for 16-bit storage and
// head dimensions multiples of 16, else the tiles),
// ZEST_CUDA_ATTENTION=tensor-cores the WMMA kernels, =tiled the tiles
// alone and =reference the reference kernels.
// Prints "attention: N cases, M failures" (test/Runtime/attention.test).
//
//===----------------------------------------------------------------------===//

#include "../common/HalfFloat.h"
#include "ReferenceCheck.h"
#include "zest_runtime.h"
#ifdef ZEST_ATTENTION_TEST_CUDA
#include "DeviceBuffers.h"
#include "zest_runtime_cuda.h"
#endif

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

ReferenceCheck checks;

struct Config {
  int64_t batch, heads, kvHeads, queries, keys, features, valueFeatures;
  bool causal;
  int32_t maskKind;
  int64_t maskSizes[4]; // 1 or the scores' own size
  int storage;          // 0 f32, 1 bf16, 2 f16
  bool sequenceMajor;   // operands [batch, rows, heads, dim + padding]
};

/// Where the rows of a [batch, heads, rows, dim] operand lie (strides in
/// elements, as the C API takes them) and the elements its buffer holds.
struct Layout {
  int64_t batch, head, row, elements;
};

/// Padding after each row of a sequence-major operand: 16 bytes for 16-bit
/// storage, 32 for f32, so that padded rows stay 16-byte aligned.
constexpr int64_t kRowPadding = 8;

Layout layoutOf(const Config &c, int64_t heads, int64_t rows, int64_t dim) {
  if (!c.sequenceMajor)
    return {heads * rows * dim, rows * dim, dim, c.batch * heads * rows * dim};
  int64_t padded = dim + kRowPadding;
  return {rows * heads * padded, padded, heads * padded,
          c.batch * rows * heads * padded};
}

/// A byte no kernel writes: what the padding of an operand holds.
constexpr char kPaddingByte = char(0x5a);

/// The contiguous [batch, heads, rows, dim] array at `src` (elements of
/// `bytes` bytes) laid out as `l`, the padding kPaddingByte.
std::vector<char> layOut(const void *src, const Layout &l, int64_t batch,
                         int64_t heads, int64_t rows, int64_t dim,
                         size_t bytes) {
  std::vector<char> out(l.elements * bytes, kPaddingByte);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < rows; ++i)
        std::memcpy(out.data() + (b * l.batch + h * l.head + i * l.row) * bytes,
                    static_cast<const char *>(src) +
                        (((b * heads + h) * rows + i) * dim) * bytes,
                    dim * bytes);
  return out;
}

/// The inverse of layOut; false if a byte of the padding changed.
bool gather(const std::vector<char> &src, const Layout &l, int64_t batch,
            int64_t heads, int64_t rows, int64_t dim, size_t bytes,
            std::vector<char> &out) {
  out.assign(batch * heads * rows * dim * bytes, 0);
  std::vector<bool> row(src.size(), false);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < rows; ++i) {
        int64_t at = (b * l.batch + h * l.head + i * l.row) * bytes;
        std::memcpy(out.data() + (((b * heads + h) * rows + i) * dim) * bytes,
                    src.data() + at, dim * bytes);
        std::fill(row.begin() + at, row.begin() + at + dim * bytes, true);
      }
  for (size_t x = 0; x < src.size(); ++x)
    if (!row[x] && src[x] != kPaddingByte)
      return false;
  return true;
}

/// Values rounded to the storage type, and their bit patterns.
struct Stored {
  std::vector<double> values;
  std::vector<uint16_t> bits;
  std::vector<float> floats;
};

Stored makeStored(size_t n, int storage, std::mt19937 &rng, double lo = -1,
                  double hi = 1) {
  std::uniform_real_distribution<double> dist(lo, hi);
  Stored s;
  for (size_t i = 0; i < n; ++i) {
    float x = float(dist(rng));
    if (storage == 0) {
      s.floats.push_back(x);
      s.values.push_back(x);
      continue;
    }
    uint16_t bits =
        storage == 1 ? zest::rt::floatToBf16(x) : zest::rt::floatToF16(x);
    s.bits.push_back(bits);
    s.values.push_back(storage == 1 ? zest::rt::bf16ToFloat(bits)
                                    : zest::rt::f16ToFloat(bits));
  }
  return s;
}

const void *data(const Stored &s, int storage) {
  return storage == 0 ? static_cast<const void *>(s.floats.data())
                      : static_cast<const void *>(s.bits.data());
}

std::vector<double> widen(const void *p, size_t n, int storage) {
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (storage == 0)
      out[i] = static_cast<const float *>(p)[i];
    else {
      uint16_t bits = static_cast<const uint16_t *>(p)[i];
      out[i] = storage == 1 ? zest::rt::bf16ToFloat(bits)
                            : zest::rt::f16ToFloat(bits);
    }
  }
  return out;
}

/// The mask: its double values (added; -inf where a boolean is false) and
/// its stored form.
struct MaskData {
  std::vector<double> added;
  std::vector<uint8_t> bools;
  Stored values;
  size_t size = 0;
};

MaskData makeMask(const Config &c, std::mt19937 &rng) {
  MaskData m;
  if (c.maskKind == ZEST_ATTENTION_MASK_NONE)
    return m;
  m.size = c.maskSizes[0] * c.maskSizes[1] * c.maskSizes[2] * c.maskSizes[3];
  if (c.maskKind == ZEST_ATTENTION_MASK_BOOL) {
    std::bernoulli_distribution keep(0.7);
    for (size_t i = 0; i < m.size; ++i) {
      // Query row 1 sees nothing where the mask has rows.
      bool rowOne =
          c.maskSizes[2] > 1 && (i / c.maskSizes[3]) % c.maskSizes[2] == 1;
      m.bools.push_back(!rowOne && keep(rng));
      m.added.push_back(
          m.bools.back() ? 0.0 : -std::numeric_limits<double>::infinity());
    }
    return m;
  }
  int storage = c.maskKind == ZEST_ATTENTION_MASK_F32 ? 0 : c.storage;
  m.values = makeStored(m.size, storage, rng, -2, 2);
  m.added = m.values.values;
  return m;
}

const void *maskPointer(const Config &c, const MaskData &m) {
  if (c.maskKind == ZEST_ATTENTION_MASK_NONE)
    return nullptr;
  if (c.maskKind == ZEST_ATTENTION_MASK_BOOL)
    return m.bools.data();
  return data(m.values, c.maskKind == ZEST_ATTENTION_MASK_F32 ? 0 : c.storage);
}

struct Results {
  std::vector<double> out, lse, dq, dk, dv;
  /// Whether the kernels left every byte between rows as it was.
  bool paddingKept = true;
};

/// The reference: every score of a head in double.
Results reference(const Config &c, const std::vector<double> &q,
                  const std::vector<double> &k, const std::vector<double> &v,
                  const MaskData &mask, const std::vector<double> &dout) {
  int64_t d = c.features, e = c.valueFeatures, group = c.heads / c.kvHeads;
  Results r;
  r.out.assign(c.batch * c.heads * c.queries * e, 0);
  r.lse.assign(c.batch * c.heads * c.queries, 0);
  r.dq.assign(c.batch * c.heads * c.queries * d, 0);
  r.dk.assign(c.batch * c.kvHeads * c.keys * d, 0);
  r.dv.assign(c.batch * c.kvHeads * c.keys * e, 0);
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h) {
      int64_t head = b * c.heads + h, kv = b * c.kvHeads + h / group;
      for (int64_t i = 0; i < c.queries; ++i) {
        int64_t row = head * c.queries + i;
        std::vector<double> s(c.keys);
        double best = -inf;
        for (int64_t j = 0; j < c.keys; ++j) {
          double dot = 0;
          for (int64_t x = 0; x < d; ++x)
            dot += q[row * d + x] * k[(kv * c.keys + j) * d + x];
          s[j] = dot * double(float(1.0 / std::sqrt(double(d))));
          if (!mask.added.empty()) {
            const int64_t *n = c.maskSizes;
            int64_t at =
                (((n[0] == 1 ? 0 : b) * n[1] + (n[1] == 1 ? 0 : h)) * n[2] +
                 (n[2] == 1 ? 0 : i)) *
                    n[3] +
                (n[3] == 1 ? 0 : j);
            s[j] += mask.added[at];
          }
          if (c.causal && j > i)
            s[j] = -inf;
          best = std::max(best, s[j]);
        }
        if (best == -inf) {
          r.lse[row] = inf;
          continue;
        }
        double sum = 0;
        for (double x : s)
          sum += std::exp(x - best);
        r.lse[row] = best + std::log(sum);
        std::vector<double> p(c.keys);
        for (int64_t j = 0; j < c.keys; ++j)
          p[j] = std::exp(s[j] - r.lse[row]);
        for (int64_t j = 0; j < c.keys; ++j)
          for (int64_t x = 0; x < e; ++x)
            r.out[row * e + x] += p[j] * v[(kv * c.keys + j) * e + x];
        double delta = 0;
        for (int64_t x = 0; x < e; ++x)
          delta += dout[row * e + x] * r.out[row * e + x];
        for (int64_t j = 0; j < c.keys; ++j) {
          double dp = 0;
          for (int64_t x = 0; x < e; ++x) {
            dp += dout[row * e + x] * v[(kv * c.keys + j) * e + x];
            r.dv[(kv * c.keys + j) * e + x] += p[j] * dout[row * e + x];
          }
          double ds =
              p[j] * (dp - delta) * double(float(1.0 / std::sqrt(double(d))));
          for (int64_t x = 0; x < d; ++x) {
            r.dq[row * d + x] += ds * k[(kv * c.keys + j) * d + x];
            r.dk[(kv * c.keys + j) * d + x] += ds * q[row * d + x];
          }
        }
      }
    }
  return r;
}

size_t elementBytes(int storage) { return storage == 0 ? 4 : 2; }

/// Runs the kernels under test on stored inputs; the results widened.
Results run(const Config &c, const Stored &q, const Stored &k, const Stored &v,
            const MaskData &mask, const Stored &dout) {
  int64_t nq = c.batch * c.heads * c.queries;
  size_t eb = elementBytes(c.storage);
  Layout ql = layoutOf(c, c.heads, c.queries, c.features),
         ol = layoutOf(c, c.heads, c.queries, c.valueFeatures),
         kl = layoutOf(c, c.kvHeads, c.keys, c.features),
         vl = layoutOf(c, c.kvHeads, c.keys, c.valueFeatures);
  auto layQueries = [&](const void *src, const Layout &l, int64_t dim) {
    return layOut(src, l, c.batch, c.heads, c.queries, dim, eb);
  };
  auto layKeys = [&](const void *src, const Layout &l, int64_t dim) {
    return layOut(src, l, c.batch, c.kvHeads, c.keys, dim, eb);
  };
  std::vector<char> qIn = layQueries(data(q, c.storage), ql, c.features),
                    kIn = layKeys(data(k, c.storage), kl, c.features),
                    vIn = layKeys(data(v, c.storage), vl, c.valueFeatures),
                    doIn =
                        layQueries(data(dout, c.storage), ol, c.valueFeatures);
  std::vector<char> out(ol.elements * eb, kPaddingByte),
      dq(ql.elements * eb, kPaddingByte), dk(kl.elements * eb, kPaddingByte),
      dv(vl.elements * eb, kPaddingByte);
  std::vector<float> lse(nq);
  float scale = float(1.0 / std::sqrt(double(c.features)));
  const void *qp = qIn.data(), *kp = kIn.data(), *vp = vIn.data(),
             *dop = doIn.data(), *mp = maskPointer(c, mask);
#ifdef ZEST_ATTENTION_TEST_CUDA
  auto upload = [](const void *host, size_t bytes) -> void * {
    if (!host)
      return nullptr;
    std::vector<char> copy(static_cast<const char *>(host),
                           static_cast<const char *>(host) + bytes);
    return toDevice(copy);
  };
  size_t maskBytes = c.maskKind == ZEST_ATTENTION_MASK_BOOL  ? 1
                     : c.maskKind == ZEST_ATTENTION_MASK_F32 ? 4
                                                             : eb;
  qp = upload(qp, qIn.size());
  kp = upload(kp, kIn.size());
  vp = upload(vp, vIn.size());
  dop = upload(dop, doIn.size());
  mp = upload(mp, mask.size * maskBytes);
  char *dOut = static_cast<char *>(upload(out.data(), out.size())),
       *dDq = static_cast<char *>(upload(dq.data(), dq.size())),
       *dDk = static_cast<char *>(upload(dk.data(), dk.size())),
       *dDv = static_cast<char *>(upload(dv.data(), dv.size()));
  float *dLse = toDevice(lse);
#define ZEST_TEST_ENTRY(NAME) zest_cuda_##NAME
#define ZEST_TEST_BUFFER(HOST, DEVICE) DEVICE
#else
#define ZEST_TEST_ENTRY(NAME) zest_##NAME
#define ZEST_TEST_BUFFER(HOST, DEVICE) HOST
#endif
  char *oBuf = ZEST_TEST_BUFFER(out.data(), dOut),
       *dqBuf = ZEST_TEST_BUFFER(dq.data(), dDq),
       *dkBuf = ZEST_TEST_BUFFER(dk.data(), dDk),
       *dvBuf = ZEST_TEST_BUFFER(dv.data(), dDv);
  float *lseBuf = ZEST_TEST_BUFFER(lse.data(), dLse);
#define ZEST_TEST_CALLS(SUFFIX, T)                                             \
  ZEST_TEST_ENTRY(attention_forward##SUFFIX)                                   \
  (c.batch, c.heads, c.kvHeads, c.queries, c.keys, c.features,                 \
   c.valueFeatures, scale, c.causal, static_cast<const T *>(qp),               \
   static_cast<const T *>(kp), static_cast<const T *>(vp), mp, c.maskKind,     \
   c.maskSizes[0], c.maskSizes[1], c.maskSizes[2], c.maskSizes[3],             \
   reinterpret_cast<T *>(oBuf), lseBuf, ql.batch, ql.head, ql.row, kl.batch,   \
   kl.head, kl.row, vl.batch, vl.head, vl.row, ol.batch, ol.head, ol.row);     \
  ZEST_TEST_ENTRY(attention_backward##SUFFIX)                                  \
  (c.batch, c.heads, c.kvHeads, c.queries, c.keys, c.features,                 \
   c.valueFeatures, scale, c.causal, static_cast<const T *>(qp),               \
   static_cast<const T *>(kp), static_cast<const T *>(vp), mp, c.maskKind,     \
   c.maskSizes[0], c.maskSizes[1], c.maskSizes[2], c.maskSizes[3],             \
   reinterpret_cast<const T *>(oBuf), lseBuf, static_cast<const T *>(dop),     \
   reinterpret_cast<T *>(dqBuf), reinterpret_cast<T *>(dkBuf),                 \
   reinterpret_cast<T *>(dvBuf), ql.batch, ql.head, ql.row, kl.batch, kl.head, \
   kl.row, vl.batch, vl.head, vl.row, ol.batch, ol.head, ol.row, ol.batch,     \
   ol.head, ol.row, ql.batch, ql.head, ql.row, kl.batch, kl.head, kl.row,      \
   vl.batch, vl.head, vl.row)
  if (c.storage == 0) {
    ZEST_TEST_CALLS(, float);
  } else if (c.storage == 1) {
    ZEST_TEST_CALLS(_bf16, uint16_t);
  } else {
    ZEST_TEST_CALLS(_f16, uint16_t);
  }
#ifdef ZEST_ATTENTION_TEST_CUDA
  out = toHost(dOut, out.size());
  dq = toHost(dDq, dq.size());
  dk = toHost(dDk, dk.size());
  dv = toHost(dDv, dv.size());
  lse = toHost(dLse, lse.size());
#endif
  Results r;
  std::vector<char> rows;
  auto result = [&](const std::vector<char> &buffer, const Layout &l,
                    bool queries, int64_t dim, std::vector<double> &into) {
    int64_t heads = queries ? c.heads : c.kvHeads,
            count = queries ? c.queries : c.keys;
    r.paddingKept &= gather(buffer, l, c.batch, heads, count, dim, eb, rows);
    into = widen(rows.data(), c.batch * heads * count * dim, c.storage);
  };
  result(out, ol, true, c.valueFeatures, r.out);
  result(dq, ql, true, c.features, r.dq);
  result(dk, kl, false, c.features, r.dk);
  result(dv, vl, false, c.valueFeatures, r.dv);
  r.lse = widen(lse.data(), nq, 0);
  return r;
}

void check(const Config &c, std::mt19937 &rng) {
  int64_t nq = c.batch * c.heads * c.queries, nk = c.batch * c.kvHeads * c.keys;
  Stored q = makeStored(nq * c.features, c.storage, rng),
         k = makeStored(nk * c.features, c.storage, rng),
         v = makeStored(nk * c.valueFeatures, c.storage, rng),
         dout = makeStored(nq * c.valueFeatures, c.storage, rng);
  MaskData mask = makeMask(c, rng);
  Results got = run(c, q, k, v, mask, dout);
  Results want = reference(c, q.values, k.values, v.values, mask, dout.values);
  double tolerance = c.storage == 0 ? 2e-5 : c.storage == 1 ? 3e-2 : 4e-3;
  char name[160];
  std::snprintf(name, sizeof name,
                "b%lld h%lld/%lld q%lld k%lld d%lld/%lld causal%d mask%d "
                "[%lld %lld %lld %lld] storage%d%s",
                (long long)c.batch, (long long)c.heads, (long long)c.kvHeads,
                (long long)c.queries, (long long)c.keys, (long long)c.features,
                (long long)c.valueFeatures, int(c.causal), int(c.maskKind),
                (long long)c.maskSizes[0], (long long)c.maskSizes[1],
                (long long)c.maskSizes[2], (long long)c.maskSizes[3], c.storage,
                c.sequenceMajor ? " sequence-major" : "");
  checks.compare("out", got.out, want.out, tolerance, name);
  checks.compare("lse", got.lse, want.lse, tolerance, name);
  checks.compare("dq", got.dq, want.dq, tolerance * 2, name);
  checks.compare("dk", got.dk, want.dk, tolerance * 2, name);
  checks.compare("dv", got.dv, want.dv, tolerance * 2, name);
  checks.expect(got.paddingKept, "padding between rows kept", name);
}

} // namespace

int main(int argc, char **argv) {
#ifdef ZEST_ATTENTION_TEST_CUDA
  // The backward's row deltas come from the runtime's pool.
  zest_init(&argc, &argv);
  if (!zest_cuda_compute_stream()) {
    std::printf("run with ZEST_BACKEND=nccl or staged\n");
    return 2;
  }
#endif
  std::mt19937 rng(7);
  struct Sizes {
    int64_t batch, heads, kvHeads, queries, keys, features, valueFeatures;
  };
  const Sizes sizes[] = {{2, 4, 4, 5, 7, 8, 8},
                         {1, 4, 2, 70, 300, 16, 8},
                         {2, 6, 3, 130, 40, 8, 12},
                         {1, 2, 1, 257, 257, 4, 4},
                         {1, 1, 1, 1, 1, 3, 5},
                         // The GPU's tiles for head dimensions up to 64
                         // and 128, and past them (the reference kernels).
                         {1, 2, 2, 100, 90, 64, 64},
                         {2, 4, 2, 70, 150, 32, 48},
                         {1, 2, 1, 140, 130, 128, 96},
                         {1, 1, 1, 33, 40, 160, 130},
                         // The flash kernels: 4 query heads on one key/value
                         // head over several tiles of 64 (a partial last
                         // one), heads of 16 and 80 padded to 64 and 128.
                         {1, 4, 1, 200, 260, 16, 16},
                         {2, 2, 2, 65, 129, 80, 80}};
  for (int storage = 0; storage < 3; ++storage)
    for (const Sizes &s : sizes)
      for (int variant = 0; variant < 6; ++variant) {
        Config c{s.batch,         s.heads, s.kvHeads,
                 s.queries,       s.keys,  s.features,
                 s.valueFeatures, false,   ZEST_ATTENTION_MASK_NONE,
                 {1, 1, 1, 1},    storage, variant % 2 == 1};
        int64_t full[4] = {s.batch, s.heads, s.queries, s.keys};
        switch (variant) {
        case 1:
          c.causal = true;
          break;
        case 2: // a padding mask per batch row, broadcast over heads/rows
          c.maskKind = ZEST_ATTENTION_MASK_BOOL;
          c.maskSizes[0] = full[0], c.maskSizes[3] = full[3];
          break;
        case 3: // a boolean mask per row, shared by batch and heads
          c.maskKind = ZEST_ATTENTION_MASK_BOOL;
          c.maskSizes[2] = full[2], c.maskSizes[3] = full[3];
          break;
        case 4: // an f32 bias per head
          c.maskKind = ZEST_ATTENTION_MASK_F32;
          for (int i = 0; i < 4; ++i)
            c.maskSizes[i] = full[i];
          c.maskSizes[0] = 1;
          break;
        case 5: // a bias in the storage type, per batch and row
          c.maskKind = ZEST_ATTENTION_MASK_SAME;
          c.maskSizes[0] = full[0], c.maskSizes[2] = full[2];
          c.maskSizes[3] = full[3];
          break;
        }
        check(c, rng);
      }
  int status = checks.report("attention");
#ifdef ZEST_ATTENTION_TEST_CUDA
  zest_finalize();
#endif
  return status;
}
