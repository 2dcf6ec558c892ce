// Writes the fuzzer's seed corpus: small well-formed GGUF images (metadata of every value type,
// F32 / F16 / Q4_0 / Q4_1 / Q8_0 tensors, a tiny byte-level vocabulary with merges).
//   make_seeds <directory>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gguf_builder.h"

using echo::model::testing::GgufBuilder;

namespace {

void write(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::string> byte_tokens() {
  // The 94 printable ASCII stand-ins of GPT-2's byte map plus a merged token.
  std::vector<std::string> tokens;
  for (char c = '!'; c <= '~'; ++c) tokens.emplace_back(1, c);
  tokens.push_back("Ca");
  return tokens;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds <directory>\n");
    return 2;
  }
  const std::string dir = argv[1];
  GgufBuilder tensors;
  tensors.kv_string("general.architecture", "llama")
      .kv_u32("general.alignment", 32)
      .tensor("f32", {4}, 0, std::vector<std::uint8_t>(16, 0x3F))
      .tensor("f16", {2, 2}, 1, std::vector<std::uint8_t>(8, 0x3C))
      .tensor("q4_0", {32}, 2, std::vector<std::uint8_t>(18, 0x21))
      .tensor("q4_1", {32, 2}, 3, std::vector<std::uint8_t>(40, 0x12))
      .tensor("q8_0", {32}, 8, std::vector<std::uint8_t>(34, 0x80));
  write(dir + "/tensors.gguf", tensors.bytes());

  const std::vector<std::string> tokens = byte_tokens();
  GgufBuilder vocab;
  vocab.kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.embedding_length", 32)
      .kv_u32("llama.feed_forward_length", 64)
      .kv_u32("llama.attention.head_count", 2)
      .kv_u32("llama.attention.head_count_kv", 1)
      .kv_u32("llama.context_length", 64)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .kv_string("tokenizer.ggml.model", "gpt2")
      .kv_strings("tokenizer.ggml.tokens", tokens)
      .kv_strings("tokenizer.ggml.merges", {"C a"})
      .kv_i32s("tokenizer.ggml.token_type", std::vector<std::int32_t>(tokens.size(), 1))
      .kv_u32("tokenizer.ggml.bos_token_id", 0)
      .kv_u32("tokenizer.ggml.eos_token_id", 1)
      .tensor("token_embd.weight", {32, static_cast<std::uint64_t>(tokens.size())}, 8,
              std::vector<std::uint8_t>(34 * tokens.size(), 0x01));
  write(dir + "/vocab.gguf", vocab.bytes());
  return 0;
}
