//===- Json.cpp - Minimal JSON parser -------------------------------------===//

#include "Json.h"

#include <cstdlib>

using namespace zest::json;

const Value *Value::find(const std::string &key) const {
  for (const auto &[name, value] : object)
    if (name == key)
      return &value;
  return nullptr;
}

namespace {
class Parser {
public:
  explicit Parser(const std::string &text) : text(text) {}

  bool parseDocument(Value &out, std::string &error) {
    if (!parseValue(out, 0) || (skipSpace(), pos != text.size())) {
      error = message.empty() ? "trailing characters" : message;
      error += " at offset " + std::to_string(pos);
      return false;
    }
    return true;
  }

private:
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n' ||
                                 text[pos] == '\r' || text[pos] == '\t'))
      ++pos;
  }

  bool fail(const char *what) {
    if (message.empty())
      message = what;
    return false;
  }

  bool literal(const char *word) {
    size_t n = std::char_traits<char>::length(word);
    if (text.compare(pos, n, word) != 0)
      return fail("invalid literal");
    pos += n;
    return true;
  }

  bool parseString(std::string &out) {
    if (pos >= text.size() || text[pos] != '"')
      return fail("expected a string");
    ++pos;
    while (pos < text.size() && text[pos] != '"') {
      char c = text[pos++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= text.size())
        return fail("unterminated escape");
      char e = text[pos++];
      switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'u': {
        if (pos + 4 > text.size())
          return fail("bad \\u escape");
        unsigned code = std::strtoul(text.substr(pos, 4).c_str(), nullptr, 16);
        pos += 4;
        if (code < 0x80) {
          out += char(code);
        } else if (code < 0x800) {
          out += char(0xc0 | (code >> 6));
          out += char(0x80 | (code & 0x3f));
        } else {
          out += char(0xe0 | (code >> 12));
          out += char(0x80 | ((code >> 6) & 0x3f));
          out += char(0x80 | (code & 0x3f));
        }
        break;
      }
      default:
        out += e;
      }
    }
    if (pos >= text.size())
      return fail("unterminated string");
    ++pos;
    return true;
  }

  bool parseValue(Value &out, int depth) {
    if (depth > 64)
      return fail("nesting too deep");
    skipSpace();
    if (pos >= text.size())
      return fail("unexpected end of input");
    char c = text[pos];
    if (c == '{') {
      out.kind = Value::Object;
      ++pos;
      skipSpace();
      if (pos < text.size() && text[pos] == '}')
        return ++pos, true;
      while (true) {
        skipSpace();
        std::string key;
        Value member;
        if (!parseString(key))
          return false;
        skipSpace();
        if (pos >= text.size() || text[pos++] != ':')
          return fail("expected ':'");
        if (!parseValue(member, depth + 1))
          return false;
        out.object.emplace_back(std::move(key), std::move(member));
        skipSpace();
        if (pos < text.size() && text[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < text.size() && text[pos] == '}')
          return ++pos, true;
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      out.kind = Value::Array;
      ++pos;
      skipSpace();
      if (pos < text.size() && text[pos] == ']')
        return ++pos, true;
      while (true) {
        Value element;
        if (!parseValue(element, depth + 1))
          return false;
        out.array.push_back(std::move(element));
        skipSpace();
        if (pos < text.size() && text[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < text.size() && text[pos] == ']')
          return ++pos, true;
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      out.kind = Value::String;
      return parseString(out.string);
    }
    if (c == 't' || c == 'f') {
      out.kind = Value::Bool;
      out.boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n')
      return literal("null");
    const char *begin = text.c_str() + pos;
    char *end = nullptr;
    out.number = std::strtod(begin, &end);
    if (end == begin)
      return fail("unexpected character");
    out.kind = Value::Number;
    pos += end - begin;
    return true;
  }

  const std::string &text;
  size_t pos = 0;
  std::string message;
};
} // namespace

bool zest::json::parse(const std::string &text, Value &out,
                       std::string &error) {
  return Parser(text).parseDocument(out, error);
}

std::string zest::json::quote(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}
