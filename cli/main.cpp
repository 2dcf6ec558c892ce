// echotk: the Echo toolkit's command-line front end.
#include <CLI/CLI.hpp>

#include "commands.h"
#ifdef ECHO_CLI_HAS_CUDA_BACKEND
#include "echo/cuda/communicator.h"
#endif

int main(int argc, char** argv) {
  using namespace echo::cli;
#ifdef ECHO_CLI_HAS_CUDA_BACKEND
  // Replay and bench may put several ranks on one GPU: enough hardware queues for their streams.
  echo::cuda::request_work_queues();
#endif
  CLI::App app{"echotk: Echo error-compensated low-bit all-reduce toolkit"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "echotk 0.1.0");
  register_replay(app);
  register_quantize(app);
  register_verify(app);
  register_compare(app);
#ifdef ECHO_CLI_HAS_PPL
  register_ppl(app);
#else
  register_unavailable(app, "ppl", "perplexity of the model with Echo at every TP site", "model/ was not built");
#endif
#ifdef ECHO_CLI_HAS_CAPTURE
  register_capture(app);
#else
  register_unavailable(app, "capture", "record per-rank contributions as a trace", "model/ was not built");
#endif
#ifdef ECHO_CLI_HAS_PROVE
  register_prove(app);
#else
  register_unavailable(app, "prove", "empirical checks of the paper's theorems", "proofs_check/ was not built");
#endif
#ifdef ECHO_CLI_HAS_BENCH
  register_bench(app);
#elif defined(ECHO_CLI_HAS_EMULATE_BACKEND)
  register_unavailable(app, "bench", "GPU benchmark against NCCL",
                       "built without the peer-to-peer kernels (ECHO_CUDA_PEER_TO_PEER=OFF)");
#else
  register_unavailable(app, "bench", "GPU benchmark against NCCL", "built without CUDA");
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // fail() already printed the message
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;  // --help exits 0, usage errors are bad input
  }
  return kExitOk;
}
