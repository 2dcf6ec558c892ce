// echotk ppl: perplexity of the GGUF model over N evenly spaced windows of L tokens of a text, with
// every tensor-parallel all-reduce site going through the selected all-reduce.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "echo/text_output.h"
#include "echo/model/llama.h"
#include "echo/model/perplexity.h"
#include "echo/model/text_file.h"
#include "run_options.h"
#include "spec_options.h"

namespace echo::cli {
namespace {

constexpr const char* kCommand = "ppl";

struct PplArgs {
  model::RunOptions run;
  SpecOptions allreduce;
  std::string text = "data/smollm2/moby-dick.txt.gz";
  int windows = 8;
  int length = 512;
  std::string csv;
};

void run_ppl(const PplArgs& args) {
  // Files first: the model loads for seconds and a run takes minutes.
  check_input_file(kCommand, args.text, "--text");
  refuse_output_over_input(kCommand, args.text, args.csv, "--csv");
  refuse_output_over_input(kCommand, args.run.model_path, args.csv, "--csv");
  check_output_target(kCommand, args.csv, "--csv");
  model::TensorParallelSpec spec;
  AllReduceSpec allreduce;
  check(kCommand, args.allreduce.to_spec(&allreduce));
  check(kCommand, model::make_tensor_parallel_spec(args.run, allreduce, &spec));
  const int threads = model::apply_threads(args.run.threads);

  model::LlamaModel llama;
  std::vector<std::int32_t> ids;
  std::vector<std::size_t> starts;
  check(kCommand, model::load_model_and_windows(args.run, args.text, args.windows, args.length, "--windows",
                                                &llama, &ids, &starts));

  for (int site : spec.eight_bit_sites) {
    if (site >= llama.config().num_sites()) {
      check(kCommand, Status(StatusCode::kInvalidArgument,
                             "--eight-bit-sites: site " + std::to_string(site) + " is beyond the model's " +
                                 std::to_string(llama.config().num_sites()) + " sites"));
    }
  }
  model::TensorParallel tp;
  check(kCommand, tp.configure(spec));
  // The per-window table is written once the run has finished and its summary printed, all or
  // nothing (its path was checked before the run).
  std::ostringstream csv;
  csv << "window,start,tokens,predictions,nll_sum,mean_nll,seconds\n";
  csv.precision(17);

  std::vector<double> nll;
  std::vector<std::size_t> predictions;
  double forward_seconds = 0.0;
  model::ProgressBar bar("ppl", starts.size(), "windows");
  model::Matrix logits;
  for (std::size_t w = 0; w < starts.size(); ++w) {
    const auto first = ids.begin() + static_cast<std::ptrdiff_t>(starts[w]);
    const std::vector<std::int32_t> window(first, first + args.length);
    const auto begin = std::chrono::steady_clock::now();
    check(kCommand, llama.forward(window, tp, &logits));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    forward_seconds += seconds;
    nll.push_back(model::window_nll(logits, window));
    predictions.push_back(window.size() - 1);
    csv << w << ',' << starts[w] << ',' << window.size() << ',' << predictions.back() << ','
        << nll.back() << ',' << nll.back() / static_cast<double>(predictions.back()) << ','
        << seconds << '\n';
    bar.update(w + 1, (w + 1) * window.size());
  }
  bar.finish();

  const model::PerplexitySummary s = model::summarize_perplexity(nll, predictions);
  const double tokens = static_cast<double>(starts.size()) * args.length;
  std::printf("model        %s (%s)\n", llama.config().name.c_str(), args.run.model_path.c_str());
  std::printf("text         %s (%zu tokens)\n", args.text.c_str(), ids.size());
  std::printf("allreduce    %s\n", model::describe(spec).c_str());
  std::printf("wire bits    %.4f per element (codes, parameters, outlier entries; mean over %d sites)\n",
              spec.wire_bits_per_element(llama.config().num_sites()), llama.config().num_sites());
  std::printf("windows      %zu x %d tokens, evenly spaced (%zu predictions)\n", s.windows,
              args.length, s.predictions);
  std::printf("mean nll     %.6f (standard error over windows %.6f)\n", s.mean_nll, s.nll_stderr);
  std::printf("perplexity   %.4f  95%% CI [%.4f, %.4f] (Student t over windows)\n", s.perplexity,
              s.ci_low, s.ci_high);
  std::printf("speed        %.1f tokens/s forward on %d threads (%.2f s per window)\n",
              tokens / forward_seconds, threads, forward_seconds / static_cast<double>(s.windows));
  if (tp.poisoned_groups() > 0) {
    std::printf("warning      %zu poisoned (NaN) quantization groups\n", tp.poisoned_groups());
  }
  std::fflush(stdout);
  if (!args.csv.empty()) check(kCommand, write_text_file_atomically(args.csv, csv.str()));
}

}  // namespace

void register_ppl(CLI::App& app) {
  auto args = std::make_shared<PplArgs>();
  CLI::App* command = app.add_subcommand(
      kCommand,
      "Perplexity of the SmolLM2 GGUF model over N evenly spaced windows of L tokens of a text, "
      "with every attention and MLP output (60 sites) combined by the chosen all-reduce");
  command->add_option("--text", args->text, "UTF-8 text, plain or .gz (the default is relative to the repository root)")
      ->check(CLI::ExistingFile)
      ->capture_default_str();
  command->add_option("--windows,-n", args->windows, "number of windows N")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  command->add_option("--length,-L", args->length, "tokens per window L (L - 1 predictions each)")
      ->check(CLI::Range(2, 8192))
      ->capture_default_str();
  command->add_option("--csv", args->csv,
                      "write per-window results (start, nll, seconds) to this CSV file");
  model::add_run_options(command, &args->run);
  add_spec_options(command, &args->allreduce);
  command->callback([args] { run_ppl(*args); });
}

}  // namespace echo::cli
