#include "spec_options.h"

namespace echo::cli {

AllReduceSpec SpecOptions::to_spec() const {
  AllReduceSpec spec;
  spec.quant.bits = bits;
  spec.quant.group = group;
  spec.quant.kind = *parse_quantizer(quantizer);
  spec.algorithm = algorithm == "ring" ? Algorithm::kRing : Algorithm::kOwner;
  spec.exact_max_count = exact_max_count;
  spec.compensator.mode = *parse_compensator_mode(compensator);
  spec.compensator.residual = *parse_residual_mode(residual);
  spec.compensator.eta = eta;
  spec.compensator.a = a;
  spec.compensator.beta1 = beta1;
  spec.compensator.beta2 = beta2;
  spec.compensator.beta = beta;
  spec.compensator.state_dtype = *parse_dtype(state_dtype);
  apply_transport_options(outliers, overflow_groups, rotation, &spec.quant);
  return spec;
}

void apply_transport_options(int outliers, const std::string& overflow_groups, const std::string& rotation,
                             QuantSpec* quant) {
  quant->outliers = outliers;
  quant->overflow = *parse_overflow_groups(overflow_groups);
  quant->rotation = *parse_rotation(rotation);
}

void add_transport_options(CLI::App* command, const TransportOptions& o) {
  command->add_option("--outliers", *o.outliers,
                      "per group, this many largest-magnitude values travel as bf16 with their index "
                      "(0, 1 or 2; 4 wire bytes each; the CPU reference only)")
      ->check(CLI::Range(0, kMaxOutliers))
      ->capture_default_str();
  command->add_option("--overflow-groups", *o.overflow_groups,
                      "a finite group whose scale overflows fp16: wide (a flagged bf16 scale, finite "
                      "out) | poison (NaN out)")
      ->check(CLI::IsMember({"poison", "wide"}))
      ->capture_default_str();
  command->add_option("--rotation", *o.rotation,
                      "none | hadamard (randomized Hadamard transform of every full group before "
                      "quantization, inverted after)")
      ->check(CLI::IsMember({"none", "hadamard"}))
      ->capture_default_str();
}

void add_spec_options(CLI::App* command, SpecOptions* o) {
  command->add_option("--bits", o->bits, "bit width of the codes (2..8; CUDA: 4 or 8)")
      ->check(CLI::Range(kMinBits, kMaxBits))
      ->capture_default_str();
  command->add_option("--group", o->group, "group size, a power of two in [16, 1024]")
      ->check(CLI::Range(kMinGroup, kMaxGroup))
      ->capture_default_str();
  command->add_option("--quantizer", o->quantizer, "zero-aware | naive | symmetric")
      ->check(CLI::IsMember({"zero-aware", "naive", "symmetric"}))
      ->capture_default_str();
  command->add_option("--compensator", o->compensator, "dual | single | off")
      ->check(CLI::IsMember({"dual", "single", "off"}))
      ->capture_default_str();
  command->add_option("--residual", o->residual,
                      "global (u = x' - y/P, the paper's) | local (each rank's own rounding errors)")
      ->check(CLI::IsMember({"global", "local"}))
      ->capture_default_str();
  command->add_option("--algorithm", o->algorithm,
                      "owner (push, owner fp32 sum, gather) | ring (requantize at every hop)")
      ->check(CLI::IsMember({"owner", "ring"}))
      ->capture_default_str();
  command->add_option("--eta", o->eta, "compensator gain in [0, 1]")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  command->add_option("--a", o->a, "blend weight of the slow average in [0, 1]")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  command->add_option("--beta1", o->beta1, "decay of the slow average in [0, 1)")->capture_default_str();
  command->add_option("--beta2", o->beta2, "decay of the fast average in [0, 1)")->capture_default_str();
  command->add_option("--beta", o->beta, "decay of the single average (--compensator single)")
      ->capture_default_str();
  add_state_dtype_option(command, &o->state_dtype);
  command->add_option("--exact-max-count", o->exact_max_count,
                      "messages of at most this many elements take the exact path: one fp32 sum of "
                      "every rank's x' (rounded to bf16 first in forward bf16 calls), rounded once")
      ->capture_default_str();
  add_transport_options(command, {&o->outliers, &o->overflow_groups, &o->rotation});
}

void add_state_dtype_option(CLI::App* command, std::string* state_dtype) {
  command->add_option("--state-dtype", *state_dtype,
                      "type the compensator's averages are stored in: fp32 | bf16 (rounded after every "
                      "update)")
      ->check(CLI::IsMember({"fp32", "bf16", "float32", "bfloat16"}))
      ->capture_default_str();
}

}  // namespace echo::cli
