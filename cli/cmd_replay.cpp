// echotk replay TRACE.h5 --out RESULT.h5: a trace through the reference (or CUDA) all-reduce.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <unistd.h>

#include "commands.h"
#include "echo/cuda/can_implement.h"
#include "echo/replay.h"
#include "spec_options.h"
#ifdef ECHO_CLI_HAS_EMULATE_BACKEND
#include "cuda_backend.h"
#include "echo/cuda/emulate.h"
#endif

namespace echo::cli {
namespace {

struct ReplayArgs {
  std::string trace;
  std::string out;
  std::string backend = "cpu";
  std::string dtype;
  bool save_outputs = false;
  bool allow_nonfinite = false;
  bool quiet = false;
  SpecOptions spec;
};

void print_summary(const ReplaySummary& s, const AllReduceSpec& spec, const std::string& backend,
                   const std::string& out) {
  const TraceInfo& t = s.trace;
  std::printf("trace      %zu passes x %zu sites, P = %d ranks, n = %zu, %s, %s\n", t.passes, t.sites,
              t.ranks, t.count, dtype_name(s.dtype), direction_name(t.direction));
  if (!t.model.empty()) std::printf("model      %s\n", t.model.c_str());
  std::printf("all-reduce %s, %d-bit %s, group %d, compensator %s (%s residual, eta %.3g), backend %s\n",
              algorithm_name(spec.algorithm), spec.quant.bits, quantizer_name(spec.quant.kind),
              spec.quant.group, compensator_mode_name(spec.compensator.mode),
              residual_mode_name(spec.compensator.residual), spec.compensator.eta, backend.c_str());
  std::printf("q = max ||delta_k||        %.6g   (mean %.6g)\n", s.q, s.mean_injected_norm);
  std::printf("max_t ||S_t||              %.6g   = %.3f q\n", s.max_partial_sum,
              s.q > 0 ? s.max_partial_sum / s.q : 0.0);
  std::printf("bound (Eq. 21)             %.6g   = %.3f q   (1 + mu_w = %.4f, tau_2 = %.4f)\n",
              s.bound, s.q > 0 ? s.bound / s.q : 0.0, 1.0 + s.mu_w, s.tau_2);
  std::printf("rms_t ||S_t||              %.6g   (Remark 1 scale q sqrt(sum phi_m^2) = %.6g)\n",
              s.rms_partial_sum, s.remark1_bound);
  std::printf("||S_{N-1}|| (mean/pass)    %.6g\n", s.final_partial_sum);
  std::printf("mean ||C_k||               %.6g\n", s.mean_correction_norm);
  if (t.has_hidden_states) {
    std::printf("max ||S_t|| / (sqrt(n) sigma_t) %.6g   (deviation against the hidden state)\n",
                s.max_relative_deviation);
  }
  std::printf("mean ||rho_k|| / ||sum x|| %.6g\n", s.relative_output_error);
  if (s.poisoned_groups > 0) {
    std::printf("poisoned groups (NaN out)  %zu\n", s.poisoned_groups);
  }
  if (s.exact_path_sites > 0) std::printf("exact-path sites           %zu\n", s.exact_path_sites);
  const double elements = static_cast<double>(t.passes * t.sites * t.count * t.ranks);
  std::printf("time in all-reduce         %.3f s (%.3g G contribution elements/s)\n", s.seconds,
              s.seconds > 0 ? elements / s.seconds * 1e-9 : 0.0);
  std::printf("result                     %s\n", out.c_str());
}

void run_replay(const ReplayArgs& args) {
  const std::string name = "replay";
  refuse_output_over_input(name, args.trace, args.out, "--out");
  TraceReader trace;
  open_trace(name, args.trace, &trace);
  ReplayOptions options;
  bool dtype_from_file = false;
  check(name, args.spec.to_spec(&options.spec, &dtype_from_file));
  options.save_outputs = args.save_outputs;
  options.allow_nonfinite = args.allow_nonfinite;
  if (dtype_from_file) options.dtype_override = options.spec.dtype;
  if (!args.dtype.empty()) options.dtype_override = parse_dtype(args.dtype);
  AllReduceSpec spec = options.spec;
  spec.dtype = options.dtype_override.value_or(trace.info().dtype);
  spec.direction = trace.info().direction;

  std::unique_ptr<AllReduceBackend> backend;
  if (args.backend == "cpu") {
    check(name, spec.validate(trace.info().ranks));
    backend = make_cpu_backend(spec, trace.info().ranks);
  } else {
    // What the CUDA path implements, refused as bad options before any GPU work (in every build
    // with the CUDA library; the emulation's check is part of it).
    const bool emulate = args.backend == "emulate";
#ifdef ECHO_CLI_HAS_EMULATE_BACKEND
    const Status implemented = emulate ? cuda::emulate_can_implement_spec(spec, trace.info().ranks)
                                       : cuda::can_implement(spec, trace.info().ranks);
#else
    const Status implemented = emulate ? Status::Ok() : cuda::can_implement(spec, trace.info().ranks);
#endif
    if (!implemented.ok()) fail(name, kExitBadInput, "--backend " + args.backend + ": " + implemented.message());
#if defined(ECHO_CLI_HAS_CUDA_BACKEND)
    check(name, emulate ? make_emulate_backend(spec, trace.info().ranks, &backend)
                        : make_cuda_backend(spec, trace.info().ranks, &backend));
#elif defined(ECHO_CLI_HAS_EMULATE_BACKEND)
    if (!emulate) {
      fail(name, kExitBadInput, "--backend cuda: this echotk was built without the peer-to-peer kernels "
                                "(ECHO_CUDA_PEER_TO_PEER=OFF); --backend emulate runs the one-GPU emulation");
    }
    check(name, make_emulate_backend(spec, trace.info().ranks, &backend));
#else
    fail(name, kExitBadInput, "--backend " + args.backend + ": this echotk was built without CUDA");
#endif
  }

  // Progress on stderr: a live line on a terminal, one line per pass otherwise.
  const std::size_t sites = trace.info().sites;
  const std::size_t total = trace.info().passes * sites;
  const bool tty = isatty(fileno(stderr)) != 0;
  const auto start = std::chrono::steady_clock::now();
  options.on_site = [&](std::size_t pass, std::size_t site) {
    if (args.quiet || (!tty && site + 1 != sites)) return;
    const std::size_t done = pass * sites + site + 1;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "%sreplay: pass %zu/%zu, site %zu/%zu (%.0f%%, %.1f s)%s", tty ? "\r" : "",
                 pass + 1, trace.info().passes, site + 1, sites, 100.0 * done / total, elapsed,
                 tty ? "" : "\n");
  };
  ReplaySummary summary;
  const Status status = replay_trace(trace, args.out, options, *backend, &summary);
  if (tty && !args.quiet) std::fprintf(stderr, "\n");
  check(name, status);
  print_summary(summary, spec, backend->name(), args.out);
}

}  // namespace

void register_replay(CLI::App& app) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* cmd = app.add_subcommand(
      "replay", "Replay a recorded trace through the Echo all-reduce and measure the error process");
  cmd->add_option("trace", args->trace, "input trace (HDF5, docs/trace-format.md)")->required();
  cmd->add_option("--out", args->out, "result file (HDF5), written atomically")->required();
  cmd->add_option("--backend", args->backend,
                  "cpu (bit-exact reference) | cuda (the peer-to-peer collective over the GPUs present) | "
                  "emulate (the one-GPU emulation of the ranks)")
      ->check(CLI::IsMember({"cpu", "cuda", "emulate"}))
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype,
                  "run the all-reduce in this type instead of the trace's: float32 | bfloat16 | float16")
      ->check(CLI::IsMember({"float32", "bfloat16", "float16", "fp32", "bf16", "fp16"}));
  cmd->add_flag("--save-outputs", args->save_outputs,
                "also write /outputs [passes, sites, ranks, n] (every rank's result)");
  cmd->add_flag("--allow-nonfinite", args->allow_nonfinite,
                "replay NaN/Inf contributions (their groups come out NaN) instead of refusing");
  cmd->add_flag("--quiet", args->quiet, "no progress output");
  add_spec_options(cmd, &args->spec);
  add_spec_file_option(cmd, &args->spec);
  cmd->callback([args] { run_replay(*args); });
}

}  // namespace echo::cli
