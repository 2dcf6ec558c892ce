// The spec table (echo/spec_fields.h) for Python: echotk.Spec's fields and defaults are built from
// spec_fields(), and make_spec takes the fields by name, so neither side lists them again.
#include <cstdlib>
#include <string>

#include <nanobind/stl/string.h>

#include "allreduce_binding.h"
#include "echo/spec_fields.h"

namespace echotk {
namespace nb = nanobind;
namespace {

const char* python_type(echo::SpecFieldType type) {
  switch (type) {
    case echo::SpecFieldType::kInteger: return "int";
    case echo::SpecFieldType::kReal: return "float";
    case echo::SpecFieldType::kChoice: return "str";
  }
  return "str";
}

// A Python value as the field's value: int for integers (not bool), int or float for reals
// (rounded to fp32 once, as the spec stores it), str for choices; ValueError naming the field.
echo::SpecValue spec_value(const echo::SpecField& field, nb::handle v) {
  const bool is_bool = nb::isinstance<nb::bool_>(v);
  const bool is_int = nb::isinstance<nb::int_>(v) && !is_bool;
  const bool is_real = nb::isinstance<nb::float_>(v);
  switch (field.type) {
    case echo::SpecFieldType::kInteger:
      if (is_int) {
        try {
          return nb::cast<std::int64_t>(v);
        } catch (const nb::cast_error&) {
        }
      }
      break;
    case echo::SpecFieldType::kReal:
      if (is_int || is_real) return static_cast<float>(nb::cast<double>(v));
      break;
    case echo::SpecFieldType::kChoice:
      if (nb::isinstance<nb::str>(v)) return nb::cast<std::string>(v);
      break;
  }
  const char* wanted = field.type == echo::SpecFieldType::kChoice    ? "a string"
                       : field.type == echo::SpecFieldType::kInteger ? "an integer"
                                                                      : "a number";
  throw nb::value_error((field.name + " must be " + wanted + " (" + field.allowed() + "), got " +
                         nb::cast<std::string>(nb::repr(v)))
                            .c_str());
}

// Sets every (name, value) of `fields` on `spec`; ValueError naming an unknown or bad field.
void set_fields(nb::dict fields, echo::AllReduceSpec* spec) {
  for (auto [key, value] : fields) {
    const std::string name = nb::cast<std::string>(nb::str(key));
    const echo::SpecField* field = echo::find_spec_field(name);
    if (field == nullptr) throw nb::value_error(("unknown spec field '" + name + "'").c_str());
    raise_if_error(echo::set_spec_field(spec, name, spec_value(*field, value)));
  }
}

nb::object python_value(const echo::SpecValue& value) {
  if (const auto* i = std::get_if<std::int64_t>(&value)) return nb::int_(*i);
  // The shortest decimal of the fp32 value, as Python reads it: 0.35f is 0.35.
  if (const auto* f = std::get_if<float>(&value)) {
    return nb::float_(std::strtod(echo::float_text(*f).c_str(), nullptr));
  }
  return nb::str(std::get<std::string>(value).c_str());
}

nb::list spec_fields() {
  nb::list rows;
  for (const echo::SpecField& f : echo::spec_fields()) {
    nb::dict row;
    row["name"] = f.name;
    row["flag"] = f.has_flag ? nb::object(nb::str(f.flag().c_str())) : nb::none();
    row["type"] = python_type(f.type);
    row["default"] = python_value(f.default_value);
    row["help"] = f.help;
    row["allowed"] = f.allowed();
    nb::list choices;
    for (const std::string& c : f.choices) choices.append(nb::str(c.c_str()));
    row["choices"] = choices;
    nb::dict aliases;
    for (const auto& [alias, canonical] : f.aliases) aliases[alias.c_str()] = canonical;
    row["aliases"] = aliases;
    row["min"] = f.min;
    row["max"] = f.max;
    row["max_open"] = f.max_open;
    row["power_of_two"] = f.power_of_two;
    rows.append(row);
  }
  return rows;
}

SpecHandle make_spec(nb::dict fields, int ranks) {
  SpecHandle h;
  set_fields(fields, &h.spec);
  h.ranks = ranks;
  raise_if_error(h.spec.validate(ranks));
  return h;
}

// The fields checked one by one (type and allowed values, not the whole-spec rules), choices
// under their canonical names ("bfloat16" -> "bf16"); other values as given.
nb::dict canonical_fields(nb::dict fields) {
  echo::AllReduceSpec spec;
  set_fields(fields, &spec);
  nb::dict out;
  for (auto [key, value] : fields) {
    const std::string name = nb::cast<std::string>(nb::str(key));
    const bool choice = echo::find_spec_field(name)->type == echo::SpecFieldType::kChoice;
    out[key] = choice ? python_value(echo::get_spec_field(spec, name)) : nb::borrow(value);
  }
  return out;
}

}  // namespace

void register_spec(nb::module_& m) {
  nb::class_<SpecHandle>(m, "SpecHandle", "A validated all-reduce configuration for a number of ranks")
      .def_prop_ro("ranks", [](const SpecHandle& h) { return h.ranks; })
      .def_prop_ro("wire_bits_per_element",
                   [](const SpecHandle& h) { return h.spec.quant.wire_bits_per_element(); },
                   "QuantSpec::wire_bits_per_element: codes, parameters and outlier entries per element "
                   "of a full group");
  m.def("spec_fields", &spec_fields,
        "The spec table (echo/spec_fields.h): per field its name, flag, type, default, allowed values and help.");
  m.def("make_spec", &make_spec, nb::arg("fields"), nb::arg("ranks"),
        "Builds and validates (AllReduceSpec::validate) a spec from {field name: value}; fields not given take "
        "their defaults; ValueError names what is out of range.");
  m.def("canonical_spec_fields", &canonical_fields, nb::arg("fields"),
        "Checks {field name: value} field by field (ValueError naming the field) and returns it with choices "
        "under their canonical names.");
}

}  // namespace echotk
