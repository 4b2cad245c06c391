#include "mlperf/config.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/check.h"
#include "core/read_file.h"

namespace mlpd {
namespace {

constexpr int kConfigExit = 2;
constexpr uintmax_t kMaxConfigBytes = 256 * 1024;

enum class Type { Int, Float, Bool, String, IntList, FloatList };

const char* type_name(Type t) {
  switch (t) {
    case Type::Int: return "an integer";
    case Type::Float: return "a number";
    case Type::Bool: return "a bool (true/false)";
    case Type::String: return "a string";
    case Type::IntList: return "a list of integers";
    case Type::FloatList: return "a list of numbers";
  }
  return "?";
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

bool parse_int(const std::string& s, int64_t& out) {
  std::string t = trim(s);
  const char* b = t.data();
  if (!t.empty() && t[0] == '+') ++b;
  auto r = std::from_chars(b, t.data() + t.size(), out);
  return r.ec == std::errc() && r.ptr == t.data() + t.size() && b != t.data() + t.size();
}

bool parse_float(const std::string& s, double& out) {
  std::string t = trim(s);
  if (t.empty()) return false;
  // Only decimal numbers: no "nan", "inf", hex.
  for (char c : t)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      return false;
  char* end = nullptr;
  out = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size() && std::isfinite(out);
}

bool parse_bool(const std::string& s, bool& out) {
  std::string t = trim(s);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "true" || t == "yes" || t == "on") return out = true, true;
  if (t == "false" || t == "no" || t == "off") return out = false, true;
  return false;
}

bool is_quoted(const YAML::Node& n) { return n.Tag() == "!"; }

// The type a default value gives its key.
Type infer_type(const std::string& key, const YAML::Node& n) {
  if (n.IsSequence()) {
    bool all_int = true;
    for (const auto& e : n) {
      int64_t i;
      double d;
      if (!e.IsScalar() || is_quoted(e) || !parse_float(e.Scalar(), d))
        throw UserError("defaults: key '" + key + "': lists may hold only numbers");
      all_int = all_int && parse_int(e.Scalar(), i);
    }
    return (all_int && n.size() > 0) ? Type::IntList : Type::FloatList;
  }
  if (!n.IsScalar() || n.IsNull())
    throw UserError("defaults: key '" + key + "' must have a scalar or list-of-numbers default");
  if (is_quoted(n)) return Type::String;
  const std::string& s = n.Scalar();
  std::string lower = s;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "true" || lower == "false") return Type::Bool;
  int64_t i;
  double d;
  if (parse_int(s, i)) return Type::Int;
  if (parse_float(s, d)) return Type::Float;
  return Type::String;
}

std::string node_text(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

[[noreturn]] void type_error(const std::string& key, const std::string& text, Type t, const std::string& where) {
  throw UserError("config key '" + key + "' = '" + text + "' (" + where + "): expected " + type_name(t),
                  kConfigExit);
}

// A number of the wanted kind, or null when `text` is not one.
nlohmann::json number_to_json(const std::string& text, bool want_int) {
  int64_t i;
  double d;
  if (parse_int(text, i)) return want_int ? nlohmann::json(i) : nlohmann::json(static_cast<double>(i));
  if (parse_float(text, d)) {
    if (!want_int) return d;
    if (std::nearbyint(d) == d && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  return nullptr;
}

// A YAML node converted to the key's type.
// `shown` is the value as the user wrote it, for messages ("" = the node's own text).
nlohmann::json convert(const std::string& key, const YAML::Node& n, Type t, const std::string& where,
                       const std::string& shown = "") {
  std::string text = shown.empty() ? node_text(n) : shown;
  switch (t) {
    case Type::String:
      if (!n.IsScalar()) type_error(key, text, t, where);
      return n.Scalar();
    case Type::Bool: {
      bool b;
      if (!n.IsScalar() || is_quoted(n) || !parse_bool(n.Scalar(), b)) type_error(key, text, t, where);
      return b;
    }
    case Type::Int:
    case Type::Float: {
      if (!n.IsScalar() || is_quoted(n)) type_error(key, text, t, where);
      nlohmann::json v = number_to_json(n.Scalar(), t == Type::Int);
      if (v.is_null()) type_error(key, text, t, where);
      return v;
    }
    case Type::IntList:
    case Type::FloatList: {
      if (!n.IsSequence()) type_error(key, text, t, where);
      nlohmann::json out = nlohmann::json::array();
      for (const auto& e : n) {
        if (!e.IsScalar() || is_quoted(e)) type_error(key, text, t, where);
        nlohmann::json v = number_to_json(e.Scalar(), t == Type::IntList);
        if (v.is_null()) type_error(key, text, t, where);
        out.push_back(std::move(v));
      }
      return out;
    }
  }
  type_error(key, text, t, where);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> w;
  std::stringstream ss(s);
  std::string t;
  while (std::getline(ss, t, '_'))
    if (t.size() > 1) w.push_back(t);
  return w;
}

struct Schema {
  std::map<std::string, Type> types;
  nlohmann::json values = nlohmann::json::object();
};

// Where each document of a YAML stream starts; nothing else.
struct DocumentStarts : YAML::EventHandler {
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// One YAML document, never several ("---" separated): a second one would be silently ignored.
// Documents are counted on yaml-cpp's parser rather than with YAML::LoadAll: at a ',' outside []
// or {} yaml-cpp 0.7's parser stops advancing and yields empty documents forever, so LoadAll never
// returns (and fills memory). A document starting where the previous one did is that case.
YAML::Node load_one_document(const std::string& text, const std::string& where, int code) {
  DocumentStarts docs;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(docs)) {
      const size_t n = docs.starts.size();
      if (n >= 2 && docs.starts[n - 1].pos == docs.starts[n - 2].pos)
        throw UserError(where + ": invalid YAML: cannot parse past line " + std::to_string(docs.starts[n - 1].line + 1) +
                            ", column " + std::to_string(docs.starts[n - 1].column + 1),
                        code);
    }
    if (docs.starts.size() > 1)
      throw UserError(where + ": " + std::to_string(docs.starts.size()) + " YAML documents; a config is one map", code);
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw UserError(where + ": invalid YAML: " + e.what(), code);
  }
}

// yaml-cpp keeps every entry of a map with a repeated key; which one wins would be an accident.
void reject_duplicate_keys(const YAML::Node& map, const std::string& where, int code) {
  std::set<std::string> seen;
  for (const auto& kv : map) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string("?");
    if (!seen.insert(key).second) throw UserError(where + ": key '" + key + "' appears more than once", code);
  }
}

void apply(Schema& schema, const std::string& key, const YAML::Node& n, const std::string& where,
           const std::string& shown = "") {
  auto it = schema.types.find(key);
  if (it == schema.types.end()) {
    std::vector<std::string> valid;
    for (const auto& [k, _] : schema.types) valid.push_back(k);
    std::vector<std::string> close = close_keys(key, valid);
    std::string msg = "unknown config key '" + key + "' (" + where + ")";
    const auto& list = close.empty() ? valid : close;
    msg += close.empty() ? "; valid keys: " : "; close valid keys: ";
    for (size_t i = 0; i < list.size(); ++i) msg += (i ? ", " : "") + list[i];
    throw UserError(msg, kConfigExit);
  }
  schema.values[key] = convert(key, n, it->second, where, shown);
}

}  // namespace

std::vector<std::string> close_keys(const std::string& key, const std::vector<std::string>& valid, size_t max) {
  std::vector<std::pair<size_t, std::string>> scored;
  std::vector<std::string> kw = words(key);
  for (const auto& v : valid) {
    size_t d = edit_distance(key, v);
    bool close = d <= std::max<size_t>(2, key.size() / 3);
    bool contains = key.size() >= 3 && (v.find(key) != std::string::npos || key.find(v) != std::string::npos);
    size_t shared = 0;
    for (const auto& w : words(v))
      if (std::find(kw.begin(), kw.end(), w) != kw.end()) ++shared;
    bool share = !kw.empty() && shared * 2 >= kw.size() && shared > 0;
    if (close || contains || share) scored.emplace_back(d, v);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < max; ++i) out.push_back(scored[i].second);
  return out;
}

nlohmann::json resolve_config(const std::string& defaults_yaml, const std::string& config_file,
                              const std::vector<std::string>& sets) {
  Schema schema;
  YAML::Node defaults = load_one_document(defaults_yaml, "defaults", 1);
  if (!defaults.IsMap()) throw UserError("defaults: expected a map of key: value");
  reject_duplicate_keys(defaults, "defaults", 1);
  for (const auto& kv : defaults) {
    std::string key = kv.first.Scalar();
    Type t = infer_type(key, kv.second);
    schema.types[key] = t;
    schema.values[key] = convert(key, kv.second, t, "defaults");
  }

  if (!config_file.empty()) {
    if (!std::filesystem::is_regular_file(config_file))
      throw UserError("config file not found: " + config_file, kConfigExit);
    std::error_code ec;
    const auto size = std::filesystem::file_size(config_file, ec);
    if (ec || size > kMaxConfigBytes)
      throw UserError("config file " + config_file + " is larger than " + std::to_string(kMaxConfigBytes / 1024) +
                          " KiB: a config is a short map of hyperparameters",
                      kConfigExit);
    const std::string text = read_whole_file(config_file, "config file", kConfigExit);
    const std::string where = "config file " + config_file;
    YAML::Node cfg = load_one_document(text, where, kConfigExit);
    if (!cfg.IsNull()) {
      if (!cfg.IsMap()) throw UserError(where + ": expected a map of key: value", kConfigExit);
      reject_duplicate_keys(cfg, where, kConfigExit);
      for (const auto& kv : cfg) {
        if (!kv.first.IsScalar()) throw UserError(where + ": a key must be a plain name", kConfigExit);
        apply(schema, kv.first.Scalar(), kv.second, "in " + config_file);
      }
    }
  }

  for (const auto& s : sets) {
    size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UserError("--set '" + s + "': expected key=value", kConfigExit);
    std::string key = trim(s.substr(0, eq)), text = s.substr(eq + 1);
    std::string where = "from --set " + s;
    auto it = schema.types.find(key);
    YAML::Node n;
    if (it != schema.types.end() && it->second == Type::String) {
      n = YAML::Node(text);  // any text is a string, even "a: b" or "123"
    } else if (it != schema.types.end() && (it->second == Type::IntList || it->second == Type::FloatList)) {
      std::string t = trim(text);
      if (t.empty() || t.front() != '[') t = "[" + t + "]";
      try {
        n = YAML::Load(t);
      } catch (const YAML::Exception&) {
        type_error(key, text, it->second, where);
      }
    } else {
      n = YAML::Node(trim(text));  // a plain scalar: typed by convert()
    }
    apply(schema, key, n, where, text);
  }
  return schema.values;
}

std::string format_config(const nlohmann::json& config) {
  size_t width = 0;
  for (const auto& [k, _] : config.items()) width = std::max(width, k.size());
  std::string out;
  for (const auto& [k, v] : config.items()) {  // nlohmann::json objects iterate sorted by key
    out += k + ":" + std::string(width - k.size() + 1, ' ');
    out += v.is_string() ? v.get<std::string>() : v.dump();
    out += '\n';
  }
  return out;
}

}  // namespace mlpd
