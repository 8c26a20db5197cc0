// The table of every CHORUS_* environment variable: name, HOROVOD_* alias, type, default,
// what is allowed and what it means. The reader (reader.hpp) parses by this table and nothing
// else; README.md's configuration table is held to it by tests/runtime/config_docs_test.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace chorus::cfg {

/// How a variable's text is read.
enum class kind {
  whole,    ///< a whole number in [min, max] (decimal digits only)
  decimal,  ///< a decimal number in [min, max] ("0.5", "2")
  choice,   ///< one of the '|'-separated words in `choices`
  text,     ///< any text (an empty value counts as unset, as for every variable)
};

/// Which code reads the variable. Only `config` variables are in config (config.hpp); the
/// others are read by the module named, through the same table and reader where they are C++.
enum class owner {
  config,    ///< runtime/config/config.cpp: read_config()
  launcher,  ///< runtime/env/process_env.cpp: rank/size discovery, rendezvous, job identity
  python,    ///< bindings/python (chorus.torch), read in Python
};

struct variable {
  std::string_view name;        ///< CHORUS_...
  std::string_view alias;       ///< HOROVOD_... with the same meaning, or empty
  kind type;
  std::string_view fallback;    ///< the default, as text the reader accepts ("" = unset)
  double min = 0;               ///< whole/decimal: the least value allowed
  double max = 0;               ///< whole/decimal: the largest value allowed
  std::string_view choices;     ///< choice: "gossip|central"; text: what is allowed, in words
  std::string_view meaning;     ///< one line, as in README.md
  owner read_by = owner::config;
  std::string_view unit;        ///< "bytes", "seconds", ... (informational)
  std::string_view synonyms;    ///< choice: "1=on|0=off": words read as another of the choices
};

/// Every variable, in README order.
std::span<const variable> variables();

/// A variable Chorus once read and no longer does (what it chose was measured without gain and
/// removed): set, it has no effect, and read_config() says so once per process.
struct retired_variable {
  std::string_view name;
  std::string_view why;  ///< what it did and what stands in its place
};
std::span<const retired_variable> retired_variables();
/// The entry for `name` (a CHORUS_ name or its HOROVOD_ alias); nullptr when there is none.
const variable* find(std::string_view name);
/// A number as the messages show it: whole numbers without exponent ("1000000000"), else %g.
std::string number_text(double x);
/// The word `text` stands for: its synonym's target (variable::synonyms), else itself.
std::string_view canonical_choice(const variable& v, std::string_view text);
/// What `v` allows, in words: "a whole number in [1, 64]", "one of gossip, central".
std::string allowed(const variable& v);

}  // namespace chorus::cfg
