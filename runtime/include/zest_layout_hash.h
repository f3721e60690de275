/*===- zest_layout_hash.h - The hash of a model's parameter layout -------===*
 *
 * Checkpoints record the hash of the parameter layout they were saved with,
 * so that loading one into another model is refused. The executable hashes
 * its model descriptor; zestc hashes the units when it writes a manifest
 * (so that `zest-ckpt split` makes checkpoints the executable accepts). Both
 * feed the same fields in the same order, here: per unit its name and dtype,
 * per parameter its FQN, offset and dimensions. The world size is left out
 * on purpose (checkpoints reshard).
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZEST_LAYOUT_HASH_H
#define ZEST_LAYOUT_HASH_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace zest {

/// FNV-1a over the fields mixed in, each followed by a separator.
class LayoutHash {
public:
  void mix(std::string_view text) {
    for (unsigned char c : text) {
      hash ^= c;
      hash *= 1099511628211ull;
    }
    hash ^= 0xff;
    hash *= 1099511628211ull;
  }
  void mix(int64_t value) { mix(std::to_string(value)); }
  uint64_t value() const { return hash; }
  /// 16 lowercase hex digits.
  std::string hex() const {
    char text[17];
    std::snprintf(text, sizeof(text), "%016llx",
                  static_cast<unsigned long long>(hash));
    return text;
  }

private:
  uint64_t hash = 1469598103934665603ull;
};

} // namespace zest

#endif // ZEST_LAYOUT_HASH_H
