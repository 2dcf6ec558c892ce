// The spec table (echo/spec_fields.h): every field reads back what was set, its allowed values are
// exactly those AllReduceSpec::validate accepts, and a bad value is refused naming the field.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>

#include "echo/spec_fields.h"

using namespace echo;

namespace {

// Whether the table and AllReduceSpec::validate agree on one value of one field.
// The spec starts in compensator units 'stream', where every field's whole range is valid (the
// profile and the clip act in those units only: validate refuses them in units 'site').
bool table_accepts(const SpecField& field, const SpecValue& value, bool* validate_accepts) {
  AllReduceSpec spec;
  spec.compensator.units = CompensatorUnits::kStream;
  const Status s = set_spec_field(&spec, field.name, value);
  if (s.ok()) {
    *validate_accepts = spec.validate(1).ok();
  } else {
    BOOST_TEST(s.message().find(field.name) != std::string::npos, s.message());
  }
  return s.ok();
}

SpecValue number(const SpecField& field, double v) {
  if (field.type == SpecFieldType::kInteger) return static_cast<std::int64_t>(v);
  return static_cast<float>(v);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(spec_table)

BOOST_AUTO_TEST_CASE(every_field_has_its_default_a_name_and_help) {
  const AllReduceSpec defaults;
  BOOST_TEST(!spec_fields().empty());
  for (const SpecField& f : spec_fields()) {
    BOOST_TEST(!f.help.empty(), f.name);
    BOOST_TEST(find_spec_field(f.name) == &f);
    BOOST_TEST(spec_value_text(get_spec_field(defaults, f.name)) == spec_value_text(f.default_value), f.name);
  }
  BOOST_TEST(find_spec_field("overflow_groups")->flag() == "--overflow-groups");
  BOOST_TEST(!find_spec_field("dtype")->has_flag);
  BOOST_TEST(spec_value_text(find_spec_field("a")->default_value) == "0.35");
}

BOOST_AUTO_TEST_CASE(the_bounds_are_those_validate_accepts) {
  for (const SpecField& f : spec_fields()) {
    if (f.type == SpecFieldType::kChoice) continue;
    bool valid = false;
    BOOST_TEST(table_accepts(f, number(f, f.min), &valid), f.name);
    BOOST_TEST(valid, f.name << " at its minimum");
    if (f.type == SpecFieldType::kInteger) {
      BOOST_TEST(!table_accepts(f, number(f, f.min - 1), &valid), f.name);
      if (f.max < 1e18) {
        BOOST_TEST(table_accepts(f, number(f, f.max), &valid), f.name);
        BOOST_TEST(valid, f.name << " at its maximum");
        BOOST_TEST(!table_accepts(f, number(f, f.max + 1), &valid), f.name);
      }
    } else {
      const float below_min = std::nextafter(static_cast<float>(f.min), -1.0f);
      const float top = f.max_open ? std::nextafter(static_cast<float>(f.max), 0.0f) : static_cast<float>(f.max);
      const float past = std::nextafter(top, INFINITY);
      BOOST_TEST(!table_accepts(f, below_min, &valid), f.name);
      BOOST_TEST(table_accepts(f, top, &valid), f.name);
      BOOST_TEST(valid, f.name << " at its largest value");
      BOOST_TEST(!table_accepts(f, past, &valid), f.name);
      BOOST_TEST(!table_accepts(f, std::nanf(""), &valid), f.name);
    }
  }
  bool valid = false;
  BOOST_TEST(!table_accepts(*find_spec_field("group"), std::int64_t{96}, &valid));  // not a power of two
}

BOOST_AUTO_TEST_CASE(every_choice_and_alias_reads_back_canonical) {
  for (const SpecField& f : spec_fields()) {
    if (f.type != SpecFieldType::kChoice) continue;
    for (const std::string& name : f.choices) {
      AllReduceSpec spec;
      BOOST_TEST(set_spec_field(&spec, f.name, name).ok(), f.name << " " << name);
      BOOST_TEST(std::get<std::string>(get_spec_field(spec, f.name)) == name);
    }
    for (const auto& [alias, canonical] : f.aliases) {
      AllReduceSpec spec;
      BOOST_TEST(set_spec_field(&spec, f.name, alias).ok(), f.name << " " << alias);
      BOOST_TEST(std::get<std::string>(get_spec_field(spec, f.name)) == canonical);
    }
    AllReduceSpec spec;
    const Status s = set_spec_field(&spec, f.name, std::string("nonsense"));
    BOOST_TEST(s.message() == f.name + " must be " + f.allowed() + ", got 'nonsense'");
  }
  AllReduceSpec spec;
  BOOST_TEST(set_spec_field(&spec, "state_dtype", std::string("bfloat16")).ok());
  BOOST_TEST((spec.compensator.state_dtype == DType::kBFloat16));
  BOOST_TEST(!set_spec_field(&spec, "state_dtype", std::string("fp16")).ok());  // validate refuses it too
}

BOOST_AUTO_TEST_CASE(text_is_read_as_the_command_line_reads_it) {
  AllReduceSpec spec;
  BOOST_TEST(set_spec_field_text(&spec, "eta", "0.35").ok());
  BOOST_TEST(spec.compensator.eta == 0.35f);
  BOOST_TEST(set_spec_field_text(&spec, "exact_max_count", "1048576").ok());
  BOOST_TEST(spec.exact_max_count == 1048576u);
  BOOST_TEST(set_spec_field_text(&spec, "overflow_groups", "poison").ok());
  BOOST_TEST((spec.quant.overflow == OverflowGroups::kPoison));
  BOOST_TEST(set_spec_field_text(&spec, "bits", "4x").message() == "bits must be an integer, got '4x'");
  BOOST_TEST(set_spec_field_text(&spec, "beta", "").message() == "beta must be a number, got ''");
  BOOST_TEST(set_spec_field(&spec, "bits", 0.5f).message() == "bits must be an integer, got 0.5");
  BOOST_TEST(set_spec_field_text(&spec, "bitz", "4").message() == "unknown spec field 'bitz'");
  BOOST_TEST(set_spec_field_text(&spec, "exact_max_count", "-1").message() == "exact_max_count must be >= 0, got -1");
}

BOOST_AUTO_TEST_SUITE_END()
