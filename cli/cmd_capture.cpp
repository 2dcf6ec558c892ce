// echotk capture: runs the model over windows of a text and records, at each of the 2 x layers
// all-reduce sites, every rank's contribution, plus the residual stream, as an echo-trace file.
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "echo/model/llama.h"
#include "echo/model/perplexity.h"
#include "echo/model/text_file.h"
#include "echo/trace.h"
#include "run_options.h"
#include "spec_options.h"

namespace echo::cli {
namespace {

constexpr const char* kCommand = "capture";

struct CaptureArgs {
  model::RunOptions run;
  SpecOptions allreduce;
  std::string text = "data/smollm2/moby-dick.txt.gz";
  std::string out;
  int passes = 2;
  int length = 64;
  int compression = 9;
  bool hidden_states = true;
};

// Streams one pass's site contributions into the writer and gathers its hidden states.
class TraceObserver : public model::SiteObserver {
 public:
  TraceObserver(TraceWriter* writer, std::size_t sites, std::size_t count)
      : writer_(writer), count_(count), hidden_((sites + 1) * count) {}

  void start_pass(std::size_t pass) { pass_ = pass; }

  void on_site(int site, model::SiteKind, int ranks, std::size_t count,
               const float* const* contributions) override {
    packed_.resize(static_cast<std::size_t>(ranks) * count);
    for (int r = 0; r < ranks; ++r) {
      std::copy(contributions[r], contributions[r] + count,
                packed_.begin() + static_cast<std::ptrdiff_t>(r * count));
    }
    keep(writer_->write_site(pass_, static_cast<std::size_t>(site), packed_.data()));
  }

  void on_hidden(int index, const model::Matrix& hidden) override {
    std::copy(hidden.data(), hidden.data() + count_,
              hidden_.begin() + static_cast<std::ptrdiff_t>(index * count_));
  }

  Status write_hidden() { return writer_->write_hidden_states(pass_, hidden_.data()); }
  const Status& status() const { return status_; }

 private:
  void keep(Status status) {
    if (status_.ok()) status_ = std::move(status);
  }

  TraceWriter* writer_;
  std::size_t count_;
  std::size_t pass_ = 0;
  std::vector<float> packed_;
  std::vector<float> hidden_;
  Status status_;
};

void run_capture(const CaptureArgs& args) {
  // Files first: the model loads for seconds and a capture takes minutes.
  check_input_file(kCommand, args.text, "--text");
  refuse_output_over_input(kCommand, args.text, args.out, "--out");
  refuse_output_over_input(kCommand, args.run.model_path, args.out, "--out");
  check_output_target(kCommand, args.out, "--out");
  model::TensorParallelSpec spec;
  AllReduceSpec allreduce;
  check(kCommand, args.allreduce.to_spec(&allreduce));
  check(kCommand, model::make_tensor_parallel_spec(args.run, allreduce, &spec));
  model::apply_threads(args.run.threads);

  model::LlamaModel llama;
  std::vector<std::int32_t> ids;
  std::vector<std::size_t> starts;
  check(kCommand, model::load_model_and_windows(args.run, args.text, args.passes, args.length, "--passes",
                                                &llama, &ids, &starts));

  const model::LlamaConfig& config = llama.config();
  const auto sites = static_cast<std::size_t>(config.num_sites());
  TraceInfo info;
  info.ranks = spec.ranks;
  info.direction = Direction::kForward;
  info.dtype = spec.dtype;
  info.passes = starts.size();
  info.sites = sites;
  info.count = static_cast<std::size_t>(args.length) * static_cast<std::size_t>(config.hidden);
  info.has_hidden_states = args.hidden_states;
  for (std::size_t k = 0; k < sites; ++k) {
    info.site_kind.push_back(static_cast<std::int8_t>(k % 2 == 0 ? SiteKind::kAttention
                                                                 : SiteKind::kMlp));
  }
  info.tokens = args.length;
  info.hidden = config.hidden;
  info.post_norm = "none";  // SmolLM2: each site's output joins the residual stream as it is
  info.model = config.name.empty() ? "SmolLM2-135M-Instruct" : config.name;
  std::ostringstream source;
  source << "echotk capture: " << args.text << ", windows of " << args.length
         << " tokens starting at token";
  for (const std::size_t start : starts) source << ' ' << start;
  source << "; all-reduce " << model::describe(spec);
  info.source = source.str();

  TraceWriter writer;
  check(kCommand, writer.create(args.out, info, args.compression));
  model::TensorParallel tp;
  check(kCommand, tp.configure(spec));
  TraceObserver observer(&writer, sites, info.count);
  model::ProgressBar bar("capture", starts.size(), "passes");
  model::Matrix logits;
  for (std::size_t pass = 0; pass < starts.size(); ++pass) {
    const auto first = ids.begin() + static_cast<std::ptrdiff_t>(starts[pass]);
    const std::vector<std::int32_t> window(first, first + args.length);
    observer.start_pass(pass);
    check(kCommand, llama.forward(window, tp, &logits, &observer));
    check(kCommand, observer.status());
    if (args.hidden_states) check(kCommand, observer.write_hidden());
    bar.update(pass + 1, (pass + 1) * window.size());
  }
  bar.finish();
  check(kCommand, writer.commit());
  std::printf("wrote %s: %zu passes x %zu sites x %d ranks x %zu values (%s)\n", args.out.c_str(),
              info.passes, info.sites, info.ranks, info.count, model::describe(spec).c_str());
}

}  // namespace

void register_capture(CLI::App& app) {
  auto args = std::make_shared<CaptureArgs>();
  CLI::App* command = app.add_subcommand(
      kCommand,
      "Run the SmolLM2 GGUF model over windows of a text and write every rank's contribution at "
      "all 60 all-reduce sites (and the residual stream) as an echo-trace HDF5 file");
  command->add_option("--out,-o", args->out, "trace file to write (HDF5)")->required();
  command->add_option("--text", args->text, "UTF-8 text, plain or .gz (the default is relative to the repository root)")
      ->check(CLI::ExistingFile)
      ->capture_default_str();
  command->add_option("--passes", args->passes,
                      "forward passes, one per window, evenly spaced over the text")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  command->add_option("--length,-L", args->length, "tokens per window")
      ->check(CLI::Range(2, 8192))
      ->capture_default_str();
  command->add_option("--compression", args->compression, "gzip level of the datasets, 0..9")
      ->check(CLI::Range(0, 9))
      ->capture_default_str();
  command->add_flag("!--no-hidden-states", args->hidden_states,
                    "omit /hidden_states (the residual stream after the embedding and each site)");
  model::add_run_options(command, &args->run);
  add_spec_options(command, &args->allreduce);
  command->callback([args] { run_capture(*args); });
}

}  // namespace echo::cli
