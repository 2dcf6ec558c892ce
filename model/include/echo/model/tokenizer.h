// Byte-level BPE tokenizer built from a GGUF vocabulary and merge list (the GPT-2 scheme used by
// SmolLM2): control tokens are matched verbatim, the rest of the text is split into single digits
// and then by the GPT-2 pattern, and each piece is merged by merge rank over its bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "echo/model/gguf.h"
#include "echo/status.h"

namespace echo::model {

// Pre-tokenizer patterns of llama.cpp's "smollm" pre-type, equal to the Hugging Face
// Sequence[Digits(individual_digits), ByteLevel(use_regex)] of the model's tokenizer.json.
inline constexpr const char* kDigitPattern = "\\p{N}";
inline constexpr const char* kPiecePattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

class Tokenizer {
 public:
  // Reads tokenizer.ggml.{model,tokens,merges,token_type,bos_token_id,eos_token_id}.
  Status load(const GgufFile& file);

  // Token ids of UTF-8 text (no BOS is added: the model's add_bos_token is false).
  Status encode(std::string_view text, std::vector<std::int32_t>* ids) const;
  // Text of ids; control tokens are written as their names.
  std::string decode(const std::vector<std::int32_t>& ids) const;

  int vocab_size() const { return static_cast<int>(tokens_.size()); }
  std::int32_t bos_id() const { return bos_id_; }
  std::int32_t eos_id() const { return eos_id_; }

 private:
  Status encode_plain(std::string_view text, std::vector<std::int32_t>* ids,
                      std::unordered_map<std::string, std::vector<std::int32_t>>* cache) const;
  Status encode_piece(std::string_view piece, std::vector<std::int32_t>* ids) const;

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, std::int32_t> token_ids_;
  std::unordered_map<std::string, int> merge_ranks_;  // key: left + ' ' + right
  std::vector<std::string> control_tokens_;
  std::vector<bool> is_control_;
  std::string byte_symbols_[256];  // byte -> UTF-8 of its printable stand-in code point
  std::unordered_map<std::string, std::uint8_t> symbol_bytes_;
  std::int32_t bos_id_ = -1;
  std::int32_t eos_id_ = -1;
};

}  // namespace echo::model
