// Validating reader of the trace format (docs/trace-format.md).
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "echo/hdf5_util.h"
#include "echo/printable.h"
#include "echo/trace.h"

namespace echo {

struct TraceReader::Impl {
  H5::H5File file;
  H5::DataSet contributions;
  H5::DataSet hidden_states;
};

TraceReader::TraceReader() = default;
TraceReader::~TraceReader() = default;
TraceReader::TraceReader(TraceReader&&) noexcept = default;
TraceReader& TraceReader::operator=(TraceReader&&) noexcept = default;

namespace {

Status format_error(const std::string& path, const std::string& what) {
  return Status(StatusCode::kFormatError, path + ": " + what);
}

Status require_float_dataset(const H5::DataSet& dataset, const std::string& path,
                             const std::string& name) {
  if (dataset.getTypeClass() != H5T_FLOAT || dataset.getFloatType().getSize() != 4) {
    return format_error(path, "dataset '" + name + "' must be float32");
  }
  return Status::Ok();
}

// The product of the factors, or nullopt when it does not fit in 64 bits.
std::optional<std::uint64_t> product(std::initializer_list<std::uint64_t> factors) {
  std::uint64_t out = 1;
  for (std::uint64_t f : factors) {
    if (__builtin_mul_overflow(out, f, &out)) return std::nullopt;
  }
  return out;
}

// The attribute post_norm and, with "rmsnorm", the dataset /post_norm_weights [sites, hidden] of
// finite values (docs/trace-format.md); traces written before them have neither.
Status read_post_norm(const H5::H5File& file, const std::string& path, TraceInfo* info) {
  std::optional<std::string> kind;
  ECHO_TRY(h5::read_string_attribute(file, path, "post_norm", &kind));
  if (!kind) {
    if (file.nameExists("/post_norm_weights")) {
      return format_error(path, "dataset '/post_norm_weights' without the attribute post_norm = 'rmsnorm'");
    }
    return Status::Ok();
  }
  if (*kind != "none" && *kind != "rmsnorm") {
    return format_error(path, "attribute 'post_norm' is '" + printable(*kind) + "', expected 'none' or 'rmsnorm'");
  }
  info->post_norm = *kind;
  if (*kind == "none") return Status::Ok();
  if (!info->hidden) return format_error(path, "post_norm = 'rmsnorm' needs the attribute 'hidden'");
  if (!file.nameExists("/post_norm_weights")) {
    return format_error(path, "post_norm = 'rmsnorm' but the dataset '/post_norm_weights' is missing");
  }
  H5::DataSet weights;
  std::vector<hsize_t> dims;
  ECHO_TRY(h5::dataset_shape(file, path, "/post_norm_weights", &weights, &dims));
  ECHO_TRY(require_float_dataset(weights, path, "/post_norm_weights"));
  const auto hidden = static_cast<std::size_t>(*info->hidden);
  if (dims.size() != 2 || dims[0] != info->sites || dims[1] != hidden) {
    return format_error(path, "dataset '/post_norm_weights' must have shape [sites, hidden] = [" +
                                  std::to_string(info->sites) + ", " + std::to_string(hidden) + "]");
  }
  info->post_norm_weights.resize(info->sites * hidden);
  h5::read_block(weights, {0, 0}, {info->sites, hidden}, H5::PredType::NATIVE_FLOAT, info->post_norm_weights.data());
  for (std::size_t i = 0; i < info->post_norm_weights.size(); ++i) {
    if (!std::isfinite(info->post_norm_weights[i])) {
      return format_error(path, "dataset '/post_norm_weights' holds a non-finite value at site " +
                                    std::to_string(i / hidden) + ", index " + std::to_string(i % hidden));
    }
  }
  return Status::Ok();
}

std::string gib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

// Declared shapes against what the file can hold and what the machine can hold at once, checked
// before anything of that size is allocated or read.
Status check_declared_sizes(const std::string& path, const TraceInfo& info, std::uint64_t file_bytes) {
  const std::uint64_t ranks = static_cast<std::uint64_t>(info.ranks);
  const std::string shape = "[passes, sites, ranks, n] = [" + std::to_string(info.passes) + ", " +
                            std::to_string(info.sites) + ", " + std::to_string(ranks) + ", " +
                            std::to_string(info.count) + "]";
  const auto contributions = product({info.passes, info.sites, ranks, info.count, sizeof(float)});
  const auto hidden = product({info.passes, info.sites + 1, info.count, sizeof(float)});
  std::uint64_t declared = 0;
  const bool representable = contributions && hidden &&
                             !__builtin_add_overflow(*contributions, info.has_hidden_states ? *hidden : 0, &declared);
  if (!representable || (file_bytes > 0 && declared / kMaxCompressionRatio > file_bytes)) {
    return format_error(path, "the datasets declare " +
                                  (representable ? std::to_string(declared) + " bytes" : std::string("2^64 bytes or more")) +
                                  " of float32 data (" + shape + ") but the file has " + std::to_string(file_bytes) +
                                  " bytes; deflate compresses at most " + std::to_string(kMaxCompressionRatio) +
                                  ":1, so the data cannot all be there");
  }
  // Held at once by a replay: one site's contributions and outputs, one pass of hidden states and
  // the per-site rows of a pass.
  const auto per_site = product({ranks, info.count, kReplayBytesPerContribution});
  const auto hidden_pass = product({info.sites + 1, info.count, info.has_hidden_states ? sizeof(float) : 0});
  const auto site_rows = product({info.sites + 1, kReplayBytesPerSite});
  std::uint64_t working = 0;
  const bool fits = per_site && hidden_pass && site_rows && !__builtin_add_overflow(*per_site, *hidden_pass, &working) &&
                    !__builtin_add_overflow(working, *site_rows, &working);
  const std::uint64_t budget = trace_memory_budget();
  if (!fits || working > budget) {
    return format_error(path, "replaying " + shape + " needs " +
                                  (fits ? "about " + gib(working) : std::string("2^64 bytes or more")) +
                                  " of working memory at once, more than the " + gib(budget) +
                                  " this machine can give it");
  }
  return Status::Ok();
}

}  // namespace

std::uint64_t trace_memory_budget() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 1ull << 32;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size) / 2;
}

Status TraceReader::open(const std::string& path) {
  path_ = path;
  info_ = TraceInfo{};
  auto impl = std::make_unique<Impl>();
  ECHO_TRY(h5::open_read(path, &impl->file));
  std::error_code ec;
  const std::uintmax_t bytes = std::filesystem::file_size(path, ec);
  return read_header(std::move(impl), ec ? 0 : bytes);
}

Status TraceReader::open_image(const void* data, std::size_t size, const std::string& name) {
  path_ = name;
  info_ = TraceInfo{};
  auto impl = std::make_unique<Impl>();
  ECHO_TRY(h5::open_read_image(data, size, name, &impl->file));
  return read_header(std::move(impl), size);
}

Status TraceReader::read_header(std::unique_ptr<Impl> impl, std::uint64_t file_bytes) {
  const std::string& path = path_;
  try {
    std::optional<std::string> text;
    std::optional<std::int64_t> number;

    ECHO_TRY(h5::read_string_attribute(impl->file, path, "format", &text));
    if (!text) return format_error(path, "root attribute 'format' is missing (not an echo trace)");
    if (*text != kTraceFormatName) {
      return format_error(path, "root attribute 'format' is '" + printable(*text) + "', expected 'echo-trace'");
    }
    ECHO_TRY(h5::read_int_attribute(impl->file, path, "version", &number));
    if (!number) return format_error(path, "root attribute 'version' is missing");
    if (*number != kTraceFormatVersion) {
      return format_error(path, "unsupported version " + std::to_string(*number) + " (this build reads 1)");
    }
    ECHO_TRY(h5::read_int_attribute(impl->file, path, "ranks", &number));
    if (!number) return format_error(path, "root attribute 'ranks' is missing");
    if (*number < 1 || *number > kMaxRanks) {
      return format_error(path, "root attribute 'ranks' is " + std::to_string(*number) + ", must be in [1, 8]");
    }
    info_.ranks = static_cast<int>(*number);
    ECHO_TRY(h5::read_string_attribute(impl->file, path, "direction", &text));
    if (!text) return format_error(path, "root attribute 'direction' is missing");
    if (*text == "forward") {
      info_.direction = Direction::kForward;
    } else if (*text == "backward") {
      info_.direction = Direction::kBackward;
    } else {
      return format_error(path, "root attribute 'direction' is '" + printable(*text) +
                                    "', expected 'forward' or 'backward'");
    }

    std::vector<hsize_t> dims;
    ECHO_TRY(h5::dataset_shape(impl->file, path, "/contributions", &impl->contributions, &dims));
    ECHO_TRY(require_float_dataset(impl->contributions, path, "/contributions"));
    if (dims.size() != 4) {
      return format_error(path, "dataset '/contributions' has " + std::to_string(dims.size()) +
                                    " dimensions, expected 4 [passes, sites, ranks, n]");
    }
    if (dims[2] != static_cast<hsize_t>(info_.ranks)) {
      return format_error(path, "dataset '/contributions' has " + std::to_string(dims[2]) +
                                    " ranks in dimension 2 but attribute 'ranks' says " + std::to_string(info_.ranks));
    }
    if (dims[0] == 0 || dims[1] == 0 || dims[3] == 0) {
      return format_error(path, "dataset '/contributions' is empty");
    }
    info_.passes = dims[0];
    info_.sites = dims[1];
    info_.count = dims[3];
    ECHO_TRY(h5::read_string_attribute(impl->contributions, path, "dtype", &text));
    if (!text) return format_error(path, "dataset '/contributions' has no 'dtype' attribute");
    const std::optional<DType> dtype = parse_dtype(*text);
    if (!dtype || *text != dtype_name(*dtype)) {
      return format_error(path, "attribute '/contributions/dtype' is '" + printable(*text) +
                                    "', expected 'float32', 'bfloat16' or 'float16'");
    }
    info_.dtype = *dtype;

    if (impl->file.nameExists("/hidden_states")) {
      ECHO_TRY(h5::dataset_shape(impl->file, path, "/hidden_states", &impl->hidden_states, &dims));
      ECHO_TRY(require_float_dataset(impl->hidden_states, path, "/hidden_states"));
      if (dims.size() != 3 || dims[0] != info_.passes || dims[1] != info_.sites + 1 ||
          dims[2] != info_.count) {
        return format_error(path, "dataset '/hidden_states' must have shape [passes, sites + 1, n] = [" +
                                      std::to_string(info_.passes) + ", " + std::to_string(info_.sites + 1) +
                                      ", " + std::to_string(info_.count) + "]");
      }
      info_.has_hidden_states = true;
    }
    ECHO_TRY(check_declared_sizes(path, info_, file_bytes));
    if (impl->file.nameExists("/site_kind")) {
      H5::DataSet kinds;
      ECHO_TRY(h5::dataset_shape(impl->file, path, "/site_kind", &kinds, &dims));
      if (kinds.getTypeClass() != H5T_INTEGER || dims.size() != 1 || dims[0] != info_.sites) {
        return format_error(path, "dataset '/site_kind' must be int8 of shape [sites] = [" +
                                      std::to_string(info_.sites) + "]");
      }
      // Read as int64 so that a value out of int8's range is reported as it is, not saturated.
      std::vector<std::int64_t> wide(info_.sites);
      h5::read_block(kinds, {0}, {info_.sites}, H5::PredType::NATIVE_INT64, wide.data());
      info_.site_kind.resize(info_.sites);
      for (std::size_t k = 0; k < info_.sites; ++k) {
        if (wide[k] != 0 && wide[k] != 1) {
          return format_error(path, "dataset '/site_kind' holds " + std::to_string(wide[k]) + " at index " +
                                        std::to_string(k) + " (0 attention, 1 MLP)");
        }
        info_.site_kind[k] = static_cast<std::int8_t>(wide[k]);
      }
    }
    ECHO_TRY(h5::read_int_attribute(impl->file, path, "tokens", &info_.tokens));
    ECHO_TRY(h5::read_int_attribute(impl->file, path, "hidden", &info_.hidden));
    for (const auto& [name, value] : {std::pair{"tokens", info_.tokens}, std::pair{"hidden", info_.hidden}}) {
      if (value && *value < 1) {
        return format_error(path, std::string("attribute '") + name + "' must be >= 1, got " + std::to_string(*value));
      }
    }
    if (info_.tokens && info_.hidden &&
        static_cast<std::uint64_t>(*info_.tokens) * static_cast<std::uint64_t>(*info_.hidden) != info_.count) {
      return format_error(path, "attributes tokens x hidden = " + std::to_string(*info_.tokens) + " x " +
                                    std::to_string(*info_.hidden) + " do not match n = " + std::to_string(info_.count));
    }
    ECHO_TRY(read_post_norm(impl->file, path, &info_));
    ECHO_TRY(h5::read_string_attribute(impl->file, path, "model", &text));
    info_.model = text.value_or("");
    ECHO_TRY(h5::read_string_attribute(impl->file, path, "source", &text));
    info_.source = text.value_or("");
  } catch (const H5::Exception& e) {
    return format_error(path, "unreadable (" + printable(e.getDetailMsg()) + ")");
  } catch (const std::bad_alloc&) {
    return format_error(path, "reading the header needs more memory than is available");
  }
  impl_ = std::move(impl);
  return Status::Ok();
}

Status TraceReader::find_nonfinite(std::size_t pass, std::size_t site, const float* contributions,
                                   DType dtype) const {
  for (int r = 0; r < info_.ranks; ++r) {
    const float* x = contributions + static_cast<std::size_t>(r) * info_.count;
    for (std::size_t i = 0; i < info_.count; ++i) {
      if (!std::isfinite(round_to_dtype(x[i], dtype))) {
        const std::string what = std::isfinite(x[i]) ? "value " + std::to_string(x[i]) +
                                                           " overflows " + dtype_name(dtype)
                                                     : "non-finite value " + std::to_string(x[i]);
        return Status(StatusCode::kNonFiniteInput,
                      path_ + ": " + what + " in '/contributions' at pass " + std::to_string(pass) + ", site " +
                          std::to_string(site) + ", rank " + std::to_string(r) + ", index " + std::to_string(i));
      }
    }
  }
  return Status::Ok();
}

Status TraceReader::read_site(std::size_t pass, std::size_t site, float* out) const {
  if (!impl_) return Status(StatusCode::kInvalidArgument, "trace is not open");
  if (pass >= info_.passes || site >= info_.sites) {
    return Status(StatusCode::kInvalidArgument, path_ + ": pass " + std::to_string(pass) + " site " +
                                                    std::to_string(site) + " is out of range");
  }
  try {
    h5::read_block(impl_->contributions, {pass, site, 0, 0},
                   {1, 1, static_cast<hsize_t>(info_.ranks), info_.count},
                   H5::PredType::NATIVE_FLOAT, out);
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kIoError, path_ + ": reading '/contributions' at pass " + std::to_string(pass) +
                                            " site " + std::to_string(site) + " failed (" + printable(e.getDetailMsg()) + ")");
  }
  return Status::Ok();
}

Status TraceReader::read_hidden_states(std::size_t pass, float* out) const {
  if (!impl_ || !info_.has_hidden_states) {
    return Status(StatusCode::kInvalidArgument, path_ + ": the trace has no '/hidden_states'");
  }
  if (pass >= info_.passes) {
    return Status(StatusCode::kInvalidArgument, path_ + ": pass " + std::to_string(pass) + " is out of range");
  }
  try {
    h5::read_block(impl_->hidden_states, {pass, 0, 0}, {1, info_.sites + 1, info_.count},
                   H5::PredType::NATIVE_FLOAT, out);
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kIoError, path_ + ": reading '/hidden_states' failed (" + printable(e.getDetailMsg()) + ")");
  }
  return Status::Ok();
}

Status TraceReader::read_all() const {
  if (!impl_) return Status(StatusCode::kInvalidArgument, "trace is not open");
  try {
    std::vector<float> site(static_cast<std::size_t>(info_.ranks) * info_.count);
    std::vector<float> hidden(info_.has_hidden_states ? (info_.sites + 1) * info_.count : 0);
    for (std::size_t pass = 0; pass < info_.passes; ++pass) {
      if (info_.has_hidden_states) {
        ECHO_TRY(read_hidden_states(pass, hidden.data()));
      }
      for (std::size_t k = 0; k < info_.sites; ++k) {
        ECHO_TRY(read_site(pass, k, site.data()));
      }
    }
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kFormatError, path_ + ": reading the data needs more memory than is available");
  }
  return Status::Ok();
}

}  // namespace echo
