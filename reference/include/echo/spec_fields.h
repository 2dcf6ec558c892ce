// The fields of AllReduceSpec that a user sets, each described once (reference/src/spec_fields.cpp):
// its name, type, allowed values, parser and help text; its default is its value in a
// default-constructed AllReduceSpec. Every front end is generated from this table: echotk's
// options (cli/spec_options.cpp), the Python binding's keyword fields and echotk.Spec
// (python/src/spec_binding.cpp, python/echotk/_spec.py), and spec files (JSON, keys = names).
// Per-call information (direction, a site's kind or gain) travels as call arguments, not here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "echo/allreduce.h"
#include "echo/status.h"

namespace echo {

enum class SpecFieldType : std::uint8_t { kInteger, kReal, kChoice };

// A field's value as a front end holds it: an integer, an fp32 value (a Python float or a decimal
// text is rounded to fp32 once, as the spec stores it), or a choice's name.
using SpecValue = std::variant<std::int64_t, float, std::string>;

struct SpecField {
  std::string name;  // "overflow_groups": echotk.Spec's field and the spec file's key
  // The command-line option "--" + name with '_' as '-' ("--overflow-groups"); false where each
  // command has its own option for it (dtype).
  bool has_flag = true;
  SpecFieldType type = SpecFieldType::kInteger;
  std::string help;
  SpecValue default_value;
  // Numbers: the closed range [min, max], or [min, max) when max_open; group sizes are also
  // powers of two.
  double min = 0.0;
  double max = 0.0;
  bool max_open = false;
  bool power_of_two = false;
  // Choices: the names (canonical first per value), and other accepted spellings with the
  // canonical name each stands for ("bfloat16" -> "bf16").
  std::vector<std::string> choices;
  std::vector<std::pair<std::string, std::string>> aliases;

  std::string flag() const;      // "--overflow-groups"
  // "in [0, 1)", "a power of two in [16, 1024]", ">= 0", "one of wide, poison"
  std::string allowed() const;
};

// Every field, in echotk.Spec's order.
const std::vector<SpecField>& spec_fields();
// The field of that name, or nullptr.
const SpecField* find_spec_field(std::string_view name);

// Sets one field. kInvalidArgument naming the field for an unknown name, a value of the wrong type
// or one outside the allowed values. Whole-spec rules (ring with the local residual) are
// AllReduceSpec::validate's.
Status set_spec_field(AllReduceSpec* spec, std::string_view name, const SpecValue& value);
// Parses text as the field's type (decimal integers; reals as strtold rounded to fp32, as CLI11
// reads a float option) and sets it.
Status set_spec_field_text(AllReduceSpec* spec, std::string_view name, std::string_view text);
SpecValue get_spec_field(const AllReduceSpec& spec, std::string_view name);

// The canonical text of a value: integers in decimal, reals as the shortest decimal that reads back
// as the same fp32 value ("0.35"), choices by name.
std::string spec_value_text(const SpecValue& value);
// The shortest "%g" text of v that strtof reads back as v.
std::string float_text(float v);

}  // namespace echo
