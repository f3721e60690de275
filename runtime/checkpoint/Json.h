//===- Json.h - Minimal JSON values for manifests and checkpoints -*- C++
//-*-===//
//
// Just enough JSON to read safetensors headers and Zest manifests without a
// dependency: objects, arrays, strings, numbers, booleans, null.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CHECKPOINT_JSON_H
#define ZEST_RUNTIME_CHECKPOINT_JSON_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace zest::json {

struct Value {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object; // insertion order

  /// Member `key` of an object, or null.
  const Value *find(const std::string &key) const;
  int64_t asInt() const { return static_cast<int64_t>(number); }
};

/// Parses `text`; on failure returns false and sets `error` (with offset).
bool parse(const std::string &text, Value &out, std::string &error);

/// `text` as a JSON string literal.
std::string quote(const std::string &text);

} // namespace zest::json

#endif // ZEST_RUNTIME_CHECKPOINT_JSON_H
