#include "spec_options.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "echo/spec_fields.h"

namespace echo::cli {
namespace {

const char* type_name(const SpecField& field) {
  switch (field.type) {
    case SpecFieldType::kInteger: return "INT";
    case SpecFieldType::kReal: return "FLOAT";
    case SpecFieldType::kChoice: return "TEXT";
  }
  return "TEXT";
}

// The allowed values as --help shows them: "in [2, 8]", "{wide,poison}".
std::string help_allowed(const SpecField& field) {
  if (field.type != SpecFieldType::kChoice) return field.allowed();
  std::string names;
  for (const std::string& c : field.choices) names += (names.empty() ? "" : ",") + c;
  for (const auto& alias : field.aliases) names += "," + alias.first;
  return "{" + names + "}";
}

// One JSON value of a spec file as the field's value.
Status json_value(const SpecField& field, const nlohmann::json& v, SpecValue* out) {
  const bool fits = field.type == SpecFieldType::kChoice    ? v.is_string()
                    : field.type == SpecFieldType::kInteger ? v.is_number_integer()
                                                            : v.is_number();
  if (!fits) {
    const char* wanted = field.type == SpecFieldType::kChoice    ? "a string"
                         : field.type == SpecFieldType::kInteger ? "an integer"
                                                                 : "a number";
    return Status(StatusCode::kInvalidArgument, field.name + " must be " + wanted + ", got " + v.dump());
  }
  if (field.type == SpecFieldType::kChoice) {
    *out = v.get<std::string>();
  } else if (field.type == SpecFieldType::kInteger) {
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      return Status(StatusCode::kInvalidArgument, field.name + " is out of range, got " + v.dump());
    }
    *out = v.get<std::int64_t>();
  } else {
    *out = static_cast<float>(v.get<double>());  // as the Python binding rounds a float
  }
  return Status::Ok();
}

}  // namespace

Status read_spec_file(const std::string& path, AllReduceSpec* spec, bool* has_dtype) {
  std::ifstream file(path);
  if (!file) return Status(StatusCode::kIoError, path + ": cannot open the spec file");
  std::stringstream text;
  text << file.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status(StatusCode::kFormatError, path + ": not JSON");
  if (!doc.is_object()) return Status(StatusCode::kFormatError, path + ": a spec file holds one JSON object");
  for (const auto& [key, value] : doc.items()) {
    const SpecField* field = find_spec_field(key);
    if (field == nullptr) {
      return Status(StatusCode::kInvalidArgument, path + ": unknown key '" + key + "' (not a spec field)");
    }
    SpecValue v;
    Status s = json_value(*field, value, &v);
    if (s.ok()) s = set_spec_field(spec, key, v);
    if (!s.ok()) return Status(s.code(), path + ": key '" + key + "': " + s.message());
    if (key == "dtype" && has_dtype != nullptr) *has_dtype = true;
  }
  return Status::Ok();
}

Status SpecOptions::to_spec(AllReduceSpec* spec, bool* dtype_from_file) const {
  *spec = defaults;
  bool file_dtype = false;
  if (!spec_file.empty()) {
    ECHO_TRY(read_spec_file(spec_file, spec, &file_dtype));
  }
  if (dtype_from_file != nullptr) *dtype_from_file = file_dtype;
  for (const auto& [name, option] : options) {
    if (option->count() == 0) continue;
    // Checked by the option's validator already; a failure here would be a table error.
    ECHO_TRY(set_spec_field_text(spec, name, text.at(name)));
  }
  return Status::Ok();
}

void add_spec_options(CLI::App* command, SpecOptions* o, const std::vector<std::string>& only) {
  for (const SpecField& field : spec_fields()) {
    if (!field.has_flag) continue;
    if (!only.empty() && std::find(only.begin(), only.end(), field.name) == only.end()) continue;
    const std::string name = field.name;
    auto check = [name](std::string& value) {
      AllReduceSpec scratch;
      const Status s = set_spec_field_text(&scratch, name, value);
      return s.ok() ? std::string() : s.message();
    };
    o->options[name] = command->add_option(field.flag(), o->text[name], field.help)
                           ->type_name(type_name(field))
                           ->check(CLI::Validator(check, help_allowed(field)))
                           ->default_str(spec_value_text(get_spec_field(o->defaults, name)));
  }
}

void add_spec_file_option(CLI::App* command, SpecOptions* o) {
  command->add_option("--spec-file", o->spec_file,
                      "a JSON object of spec fields (echotk.Spec.to_json(); keys as echotk.Spec's fields, "
                      "\"dtype\" as --dtype), read before the options, which override it")
      ->check(CLI::ExistingFile);
}

}  // namespace echo::cli
