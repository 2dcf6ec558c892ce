#include "echo/trace.h"
#include "echo/hdf5_util.h"

namespace echo {

struct TraceWriter::Impl {
  h5::AtomicFile out;
  TraceInfo info;
  H5::DataSet contributions;
  H5::DataSet hidden_states;
};

TraceWriter::TraceWriter() = default;
TraceWriter::~TraceWriter() = default;
TraceWriter::TraceWriter(TraceWriter&&) noexcept = default;
TraceWriter& TraceWriter::operator=(TraceWriter&&) noexcept = default;

Status TraceWriter::create(const std::string& path, const TraceInfo& info, int compression) {
  if (info.ranks < 1 || info.ranks > kMaxRanks || info.passes == 0 || info.sites == 0 ||
      info.count == 0) {
    return Status(StatusCode::kInvalidArgument, path + ": a trace needs ranks in [1, 8] and non-empty passes, sites, n");
  }
  if (!info.site_kind.empty() && info.site_kind.size() != info.sites) {
    return Status(StatusCode::kInvalidArgument, path + ": site_kind must have one entry per site");
  }
  if (info.post_norm && *info.post_norm != "none" &&
      (*info.post_norm != "rmsnorm" || !info.hidden ||
       info.post_norm_weights.size() != info.sites * static_cast<std::size_t>(*info.hidden))) {
    return Status(StatusCode::kInvalidArgument,
                  path + ": post_norm must be 'none', or 'rmsnorm' with hidden set and sites x hidden weights");
  }
  auto impl = std::make_unique<Impl>();
  impl->info = info;
  ECHO_TRY(impl->out.create(path));
  try {
    H5::H5File& file = impl->out.file();
    h5::write_string_attribute(file, "format", kTraceFormatName);
    h5::write_int_attribute(file, "version", kTraceFormatVersion);
    h5::write_int_attribute(file, "ranks", info.ranks);
    h5::write_string_attribute(file, "direction", direction_name(info.direction));
    if (info.tokens) h5::write_int_attribute(file, "tokens", *info.tokens);
    if (info.hidden) h5::write_int_attribute(file, "hidden", *info.hidden);
    if (!info.model.empty()) h5::write_string_attribute(file, "model", info.model);
    if (!info.source.empty()) h5::write_string_attribute(file, "source", info.source);
    const hsize_t ranks = static_cast<hsize_t>(info.ranks);
    impl->contributions = h5::create_dataset(file, "/contributions", H5::PredType::IEEE_F32LE,
                                             {info.passes, info.sites, ranks, info.count},
                                             {1, 1, 1, info.count}, compression);
    h5::write_string_attribute(impl->contributions, "dtype", dtype_name(info.dtype));
    if (info.has_hidden_states) {
      impl->hidden_states = h5::create_dataset(file, "/hidden_states", H5::PredType::IEEE_F32LE,
                                               {info.passes, info.sites + 1, info.count},
                                               {1, 1, info.count}, compression);
    }
    if (!info.site_kind.empty()) {
      H5::DataSet kinds = h5::create_dataset(file, "/site_kind", H5::PredType::STD_I8LE,
                                             {info.sites}, {info.sites}, 0);
      h5::write_block(kinds, {0}, {info.sites}, H5::PredType::NATIVE_INT8, info.site_kind.data());
    }
    if (info.post_norm) {
      h5::write_string_attribute(file, "post_norm", *info.post_norm);
      if (*info.post_norm == "rmsnorm") {
        const auto hidden = static_cast<hsize_t>(info.hidden.value_or(0));
        H5::DataSet weights = h5::create_dataset(file, "/post_norm_weights", H5::PredType::IEEE_F32LE,
                                                 {info.sites, hidden}, {1, hidden}, 0);
        h5::write_block(weights, {0, 0}, {info.sites, hidden}, H5::PredType::NATIVE_FLOAT,
                        info.post_norm_weights.data());
      }
    }
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kIoError, path + ": cannot write trace header (" + e.getDetailMsg() + ")");
  }
  impl_ = std::move(impl);
  return Status::Ok();
}

Status TraceWriter::write_site(std::size_t pass, std::size_t site, const float* in) {
  if (!impl_) return Status(StatusCode::kInvalidArgument, "trace writer is not open");
  const TraceInfo& info = impl_->info;
  if (pass >= info.passes || site >= info.sites) {
    return Status(StatusCode::kInvalidArgument, "pass/site out of range");
  }
  try {
    h5::write_block(impl_->contributions, {pass, site, 0, 0},
                    {1, 1, static_cast<hsize_t>(info.ranks), info.count},
                    H5::PredType::NATIVE_FLOAT, in);
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kIoError, impl_->out.path() + ": write failed (" + e.getDetailMsg() + ")");
  }
  return Status::Ok();
}

Status TraceWriter::write_hidden_states(std::size_t pass, const float* in) {
  if (!impl_ || !impl_->info.has_hidden_states) {
    return Status(StatusCode::kInvalidArgument, "trace writer has no hidden states");
  }
  const TraceInfo& info = impl_->info;
  if (pass >= info.passes) return Status(StatusCode::kInvalidArgument, "pass out of range");
  try {
    h5::write_block(impl_->hidden_states, {pass, 0, 0}, {1, info.sites + 1, info.count},
                    H5::PredType::NATIVE_FLOAT, in);
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kIoError, impl_->out.path() + ": write failed (" + e.getDetailMsg() + ")");
  }
  return Status::Ok();
}

Status TraceWriter::commit() {
  if (!impl_) return Status(StatusCode::kInvalidArgument, "trace writer is not open");
  impl_->contributions = H5::DataSet();
  impl_->hidden_states = H5::DataSet();
  Status s = impl_->out.commit();
  impl_.reset();
  return s;
}

}  // namespace echo
