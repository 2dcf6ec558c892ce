// The spec table: one row per field of AllReduceSpec that a user sets (echo/spec_fields.h).
#include "echo/spec_fields.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <type_traits>

namespace echo {
namespace {

Status bad_value(const std::string& name, const std::string& allowed, const std::string& got) {
  return Status(StatusCode::kInvalidArgument, name + " must be " + allowed + ", got " + got);
}

std::string integer_text(double v) { return std::to_string(static_cast<std::int64_t>(v)); }

// A row of integers in [min, max] (int or std::size_t members).
struct Integer {
  const char* name;
  std::int64_t min;
  std::int64_t max;
  const char* help;
  bool power_of_two = false;

  void describe(SpecField* f) const {
    f->type = SpecFieldType::kInteger;
    f->min = static_cast<double>(min);
    f->max = static_cast<double>(max);
    f->power_of_two = power_of_two;
  }
  template <typename T>
  Status assign(const std::string& field, const SpecValue& value, T* member) const {
    const auto* v = std::get_if<std::int64_t>(&value);
    if (v == nullptr) return bad_value(field, "an integer", spec_value_text(value));
    const bool in_range = *v >= min && *v <= max && (!power_of_two || (*v & (*v - 1)) == 0);
    if (!in_range) return bad_value(field, describe_allowed(), std::to_string(*v));
    *member = static_cast<T>(*v);
    return Status::Ok();
  }
  template <typename T>
  SpecValue value(const T& member) const {
    return static_cast<std::int64_t>(member);
  }
  std::string describe_allowed() const {
    SpecField f;
    describe(&f);
    return f.allowed();
  }
};

// A row of fp32 values in [min, max] or [min, max).
struct Real {
  const char* name;
  float min;
  float max;
  bool max_open;
  const char* help;

  void describe(SpecField* f) const {
    f->type = SpecFieldType::kReal;
    f->min = min;
    f->max = max;
    f->max_open = max_open;
  }
  Status assign(const std::string& field, const SpecValue& value, float* member) const {
    const auto* v = std::get_if<float>(&value);
    if (v == nullptr) return bad_value(field, "a number", spec_value_text(value));
    const bool in_range = *v >= min && (max_open ? *v < max : *v <= max);  // false for NaN
    if (!in_range) return bad_value(field, describe_allowed(), float_text(*v));
    *member = *v;
    return Status::Ok();
  }
  SpecValue value(float member) const { return member; }
  std::string describe_allowed() const {
    SpecField f;
    describe(&f);
    return f.allowed();
  }
};

// A row of named values of an enum: the names are those of the enum's own name function; an alias
// function gives a second accepted spelling (dtypes: "bfloat16" for "bf16").
template <typename E>
struct Choice {
  const char* name;
  std::vector<E> values;
  const char* (*name_of)(E);
  const char* help;
  const char* (*alias_of)(E) = nullptr;

  void describe(SpecField* f) const {
    f->type = SpecFieldType::kChoice;
    for (E v : values) {
      f->choices.emplace_back(name_of(v));
      if (alias_of != nullptr && std::string_view(alias_of(v)) != name_of(v)) {
        f->aliases.emplace_back(alias_of(v), name_of(v));
      }
    }
  }
  Status assign(const std::string& field, const SpecValue& value, E* member) const {
    const auto* text = std::get_if<std::string>(&value);
    for (E v : values) {
      if (text != nullptr && (*text == name_of(v) || (alias_of != nullptr && *text == alias_of(v)))) {
        *member = v;
        return Status::Ok();
      }
    }
    SpecField f;
    describe(&f);
    const std::string got = text != nullptr ? "'" + *text + "'" : spec_value_text(value);
    return bad_value(field, f.allowed(), got);
  }
  SpecValue value(E member) const { return std::string(name_of(member)); }
};

// The table. A new field: one row here, beside its member in the spec (and its numerics). New rows
// go last: echotk.Spec takes its field order (its positional arguments) from here.
template <typename Spec, typename Visit>
void visit_fields(Spec& s, Visit&& visit) {
  using Q = QuantizerKind;
  using D = DType;
  visit(Integer{"bits", kMinBits, kMaxBits, "bit width of the codes (2..8; CUDA: 4 or 8)"}, s.quant.bits);
  visit(Integer{"group", kMinGroup, kMaxGroup, "group size, a power of two in [16, 1024]", true}, s.quant.group);
  visit(Choice<Q>{"quantizer", {Q::kZeroAware, Q::kNaive, Q::kSymmetric}, quantizer_name,
                  "zero-aware | naive | symmetric"},
        s.quant.kind);
  visit(Choice<CompensatorMode>{"compensator",
                                {CompensatorMode::kDual, CompensatorMode::kSingle, CompensatorMode::kDeficit,
                                 CompensatorMode::kOff},
                                compensator_mode_name,
                                "dual | single | deficit (a closed loop on the stream's deficit) | off"},
        s.compensator.mode);
  visit(Real{"eta", 0.0f, 1.0f, false, "compensator gain in [0, 1]"}, s.compensator.eta);
  visit(Real{"a", 0.0f, 1.0f, false, "blend weight of the slow average in [0, 1]"}, s.compensator.a);
  visit(Real{"beta1", 0.0f, 1.0f, true, "decay of the slow average in [0, 1)"}, s.compensator.beta1);
  visit(Real{"beta2", 0.0f, 1.0f, true, "decay of the fast average in [0, 1)"}, s.compensator.beta2);
  visit(Real{"beta", 0.0f, 1.0f, true, "decay of the single average (--compensator single)"}, s.compensator.beta);
  visit(Choice<ResidualMode>{"residual", {ResidualMode::kGlobal, ResidualMode::kLocal}, residual_mode_name,
                             "global (u = x' - y/P, the paper's) | local (each rank's own rounding errors)"},
        s.compensator.residual);
  visit(Choice<D>{"dtype", {D::kFloat32, D::kBFloat16, D::kFloat16}, dtype_short_name,
                  "element type of the all-reduce: fp32 | bf16 | fp16", dtype_name},
        s.dtype);
  visit(Choice<D>{"state_dtype", {D::kFloat32, D::kBFloat16}, dtype_short_name,
                  "type the compensator's averages are stored in: fp32 | bf16 (rounded after every update)",
                  dtype_name},
        s.compensator.state_dtype);
  visit(Choice<Algorithm>{"algorithm", {Algorithm::kOwner, Algorithm::kRing}, algorithm_name,
                          "owner (push, owner fp32 sum, gather) | ring (requantize at every hop)"},
        s.algorithm);
  visit(Integer{"exact_max_count", 0, std::numeric_limits<std::int64_t>::max(),
                "messages of at most this many elements take the exact path: one fp32 sum of every rank's x' "
                "(rounded to bf16 first in forward bf16 calls), rounded once"},
        s.exact_max_count);
  visit(Integer{"outliers", 0, kMaxOutliers,
                "per group, this many largest-magnitude values travel as bf16 with their index (0, 1 or 2; "
                "4 wire bytes each; the CPU reference only)"},
        s.quant.outliers);
  visit(Choice<OverflowGroups>{"overflow_groups", {OverflowGroups::kWide, OverflowGroups::kPoison},
                               overflow_groups_name,
                               "a finite group whose scale overflows fp16: wide (a flagged bf16 scale, finite out) | "
                               "poison (NaN out)"},
        s.quant.overflow);
  visit(Choice<Rotation>{"rotation", {Rotation::kNone, Rotation::kHadamard}, rotation_name,
                         "none | hadamard (randomized Hadamard transform of every full group before "
                         "quantization, inverted after)"},
        s.quant.rotation);
  visit(Choice<CompensatorUnits>{"compensator_units", {CompensatorUnits::kSite, CompensatorUnits::kStream},
                                 compensator_units_name,
                                 "site (the state in each site's units, the paper's) | stream (in residual-stream "
                                 "units through each site's post-norm; calls need the site's post-norm)"},
        s.compensator.units);
  visit(Choice<CompensatorProfile>{"compensator_profile", {CompensatorProfile::kFlat, CompensatorProfile::kSqrt},
                                   compensator_profile_name,
                                   "flat (one stream gain per token row) | sqrt (each feature's gains also times the "
                                   "square root of its post-norm weight over the weights' RMS; units 'stream' only)"},
        s.compensator.profile);
  visit(Real{"compensator_clip", 0.0f, 1024.0f, false,
             "> 0: each rank's correction clamped per element to this times the RMS of its own token row, at "
             "post-norm sites (units 'stream' only); 0: no clip"},
        s.compensator.clip);
  visit(Choice<CompensatorGains>{"compensator_gains", {CompensatorGains::kOwn, CompensatorGains::kSum},
                                 compensator_gains_name,
                                 "own (the stream gains at the RMS of each rank's own token row) | sum (the update at "
                                 "the delivered sum's row RMS, the apply at the own RMS times the sum-to-own ratio of "
                                 "the last site of the same kind; units 'stream' only, calls need the site's kind)"},
        s.compensator.gains);
}

std::vector<SpecField> describe_fields() {
  std::vector<SpecField> fields;
  const AllReduceSpec defaults;
  visit_fields(defaults, [&](const auto& row, const auto& member) {
    SpecField f;
    f.name = row.name;
    f.has_flag = f.name != "dtype";  // each command has its own --dtype (a trace's, a model's)
    f.help = row.help;
    row.describe(&f);
    f.default_value = row.value(member);
    fields.push_back(std::move(f));
  });
  return fields;
}

}  // namespace

std::string SpecField::flag() const {
  std::string text = "--" + name;
  for (char& c : text) c = c == '_' ? '-' : c;
  return text;
}

std::string SpecField::allowed() const {
  if (type == SpecFieldType::kChoice) {
    std::string text;
    for (const std::string& c : choices) text += (text.empty() ? "one of " : ", ") + c;
    return text;
  }
  const bool unbounded = max >= static_cast<double>(std::numeric_limits<std::int64_t>::max());
  const std::string low = type == SpecFieldType::kReal ? float_text(static_cast<float>(min)) : integer_text(min);
  const std::string high = type == SpecFieldType::kReal ? float_text(static_cast<float>(max)) : integer_text(max);
  if (unbounded) return ">= " + low;
  const std::string range = "in [" + low + ", " + high + (max_open ? ")" : "]");
  return power_of_two ? "a power of two " + range : range;
}

const std::vector<SpecField>& spec_fields() {
  static const std::vector<SpecField> fields = describe_fields();
  return fields;
}

const SpecField* find_spec_field(std::string_view name) {
  for (const SpecField& f : spec_fields()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

Status set_spec_field(AllReduceSpec* spec, std::string_view name, const SpecValue& value) {
  Status status(StatusCode::kInvalidArgument, "unknown spec field '" + std::string(name) + "'");
  visit_fields(*spec, [&](const auto& row, auto& member) {
    if (name == row.name) status = row.assign(row.name, value, &member);
  });
  return status;
}

Status set_spec_field_text(AllReduceSpec* spec, std::string_view name, std::string_view text) {
  const SpecField* field = find_spec_field(name);
  if (field == nullptr) return set_spec_field(spec, name, std::string(text));
  const std::string s(text);
  if (field->type == SpecFieldType::kChoice) return set_spec_field(spec, name, s);
  if (field->type == SpecFieldType::kInteger) {
    std::int64_t v = 0;
    const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (error != std::errc() || end != s.data() + s.size()) {
      return bad_value(field->name, "an integer", "'" + s + "'");
    }
    return set_spec_field(spec, name, v);
  }
  // As CLI11 reads a float option: strtold, then one rounding to fp32.
  char* end = nullptr;
  const long double v = std::strtold(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) return bad_value(field->name, "a number", "'" + s + "'");
  return set_spec_field(spec, name, static_cast<float>(v));
}

SpecValue get_spec_field(const AllReduceSpec& spec, std::string_view name) {
  SpecValue value;
  visit_fields(spec, [&](const auto& row, const auto& member) {
    if (name == row.name) value = row.value(member);
  });
  return value;
}

std::string spec_value_text(const SpecValue& value) {
  if (const auto* i = std::get_if<std::int64_t>(&value)) return std::to_string(*i);
  if (const auto* f = std::get_if<float>(&value)) return float_text(*f);
  return std::get<std::string>(value);
}

std::string float_text(float v) {
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(v));
    if (std::strtof(text, nullptr) == v) break;
  }
  return text;
}

}  // namespace echo
