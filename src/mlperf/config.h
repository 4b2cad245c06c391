// Run configuration: typed defaults, a config file over them, --set overrides over that.
//
// The defaults YAML (its TEXT, not a path: the caller reads or embeds it) is a flat map whose keys
// are the only keys allowed and whose values fix each key's type:
//   integer (42), float (0.1, 1e-4), bool (true/false), string (anything else, or quoted),
//   list of numbers ([30, 60]: of integers if every default element is one, else of floats).
// A value given later must have that type: an integer key takes 42 (or 42.0), not 4.2 or "abc";
// a float key takes 4.2 or 42 (kept as 42.0); a bool key takes true/false; a string key takes any
// scalar as text; a list key takes a list ([30,60] in YAML, or "30,60"/"[30,60]" in --set).
// Unknown keys and type mismatches are UserError with exit code 2, naming the key (and, for an
// unknown key, the valid keys closest to it).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mlpd {

// defaults_yaml: YAML text. config_file: path of a YAML file, "" for none.
// sets: "key=value" strings, applied in order.
nlohmann::json resolve_config(const std::string& defaults_yaml, const std::string& config_file,
                              const std::vector<std::string>& sets);

// "key: value" lines, sorted by key, keys padded to one column; strings unquoted.
std::string format_config(const nlohmann::json& config);

// Up to `max` valid keys closest to `key` (edit distance, shared words), best first.
std::vector<std::string> close_keys(const std::string& key, const std::vector<std::string>& valid,
                                    size_t max = 5);

}  // namespace mlpd
