#include "echo/model/tokenizer.h"

#include <unicode/regex.h>
#include <unicode/utext.h>
#include <unicode/utf8.h>

#include <limits>
#include <memory>

namespace echo::model {
namespace {

constexpr std::int64_t kControlTokenType = 3;

std::string utf8_of(UChar32 code_point) {
  char buffer[U8_MAX_LENGTH];
  std::int32_t length = 0;
  UBool error = false;
  U8_APPEND(buffer, length, U8_MAX_LENGTH, code_point, error);
  (void)error;  // code points below 0x200 always fit
  return std::string(buffer, static_cast<std::size_t>(length));
}

// GPT-2's reversible map of bytes to printable code points: printable Latin-1 bytes map to
// themselves, the others to 256, 257, ... in byte order.
void build_byte_symbols(std::string* symbols) {
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    symbols[b] = utf8_of(printable ? b : next++);
  }
}

bool valid_utf8(std::string_view text) {
  std::int32_t i = 0;
  const auto length = static_cast<std::int32_t>(text.size());
  while (i < length) {
    UChar32 c;
    U8_NEXT(text.data(), i, length, c);
    if (c < 0) return false;
  }
  return true;
}

// Calls emit(begin, end) for each match of pattern in text and for each gap between matches
// (gaps flagged by matched = false). Offsets are UTF-8 byte offsets.
template <typename Emit>
Status split(const char* pattern, std::string_view text, Emit emit) {
  UErrorCode error = U_ZERO_ERROR;
  UText* input = utext_openUTF8(nullptr, text.data(), static_cast<int64_t>(text.size()), &error);
  icu::RegexMatcher matcher(icu::UnicodeString::fromUTF8(pattern), 0, error);
  if (U_SUCCESS(error)) matcher.reset(input);
  std::size_t cursor = 0;
  Status status;
  while (U_SUCCESS(error) && status.ok() && matcher.find(error)) {
    const auto begin = static_cast<std::size_t>(matcher.start64(error));
    const auto end = static_cast<std::size_t>(matcher.end64(error));
    if (begin > cursor) status = emit(cursor, begin, false);
    if (status.ok()) status = emit(begin, end, true);
    cursor = end;
  }
  if (U_SUCCESS(error) && status.ok() && cursor < text.size()) {
    status = emit(cursor, text.size(), false);
  }
  utext_close(input);
  if (U_FAILURE(error)) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("tokenizer: ICU regex failed: ") + u_errorName(error));
  }
  return status;
}

}  // namespace

Status Tokenizer::load(const GgufFile& file) {
  std::string model;
  Status status = file.get_string("tokenizer.ggml.model", &model);
  if (!status.ok()) return status;
  if (model != "gpt2") {
    return Status(StatusCode::kUnsupported, "GGUF " + file.name() + ": tokenizer.ggml.model is " +
                                                model + ", only gpt2 (byte-level BPE) is supported");
  }
  const std::vector<std::string>* tokens = nullptr;
  const std::vector<std::string>* merges = nullptr;
  const std::vector<std::int64_t>* types = nullptr;
  if (!(status = file.get_string_array("tokenizer.ggml.tokens", &tokens)).ok()) return status;
  if (!(status = file.get_string_array("tokenizer.ggml.merges", &merges)).ok()) return status;
  if (!(status = file.get_integer_array("tokenizer.ggml.token_type", &types)).ok()) return status;
  if (types->size() != tokens->size() ||
      tokens->size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    return Status(StatusCode::kFormatError,
                  "GGUF " + file.name() + ": tokenizer.ggml.token_type has " +
                      std::to_string(types->size()) + " entries for " +
                      std::to_string(tokens->size()) + " tokens");
  }
  std::int64_t bos = -1;
  std::int64_t eos = -1;
  if (!(status = file.get_integer("tokenizer.ggml.bos_token_id", &bos)).ok()) return status;
  if (!(status = file.get_integer("tokenizer.ggml.eos_token_id", &eos)).ok()) return status;
  const auto num_tokens = static_cast<std::int64_t>(tokens->size());
  if (bos < 0 || bos >= num_tokens || eos < 0 || eos >= num_tokens) {
    return Status(StatusCode::kFormatError,
                  "GGUF " + file.name() + ": bos/eos token id outside the vocabulary");
  }
  bos_id_ = static_cast<std::int32_t>(bos);
  eos_id_ = static_cast<std::int32_t>(eos);

  tokens_ = *tokens;
  token_ids_.clear();
  control_tokens_.clear();
  is_control_.assign(tokens_.size(), false);
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    token_ids_.emplace(tokens_[i], static_cast<std::int32_t>(i));
    if ((*types)[i] == kControlTokenType && !tokens_[i].empty()) {
      control_tokens_.push_back(tokens_[i]);
      is_control_[i] = true;
    }
  }
  merge_ranks_.clear();
  for (std::size_t rank = 0; rank < merges->size(); ++rank) {
    const std::string& merge = (*merges)[rank];
    const std::size_t space = merge.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == merge.size() ||
        merge.find(' ', space + 1) != std::string::npos) {
      return Status(StatusCode::kFormatError, "GGUF " + file.name() + ": tokenizer.ggml.merges[" +
                                                  std::to_string(rank) + "] is not 'left right'");
    }
    merge_ranks_.emplace(merge, static_cast<int>(rank));  // first (lowest) rank wins
  }
  build_byte_symbols(byte_symbols_);
  symbol_bytes_.clear();
  for (int b = 0; b < 256; ++b) {
    // Some bytes (C0, C1, F5..FF, a few controls) have no token in SmolLM2; encode() reports them.
    symbol_bytes_.emplace(byte_symbols_[b], static_cast<std::uint8_t>(b));
  }
  return Status::Ok();
}

Status Tokenizer::encode(std::string_view text, std::vector<std::int32_t>* ids) const {
  if (tokens_.empty()) return Status(StatusCode::kInvalidArgument, "tokenizer: not loaded");
  if (!valid_utf8(text)) return Status(StatusCode::kInvalidArgument, "tokenizer: invalid UTF-8");
  ids->clear();
  std::unordered_map<std::string, std::vector<std::int32_t>> cache;
  // Control tokens first: the leftmost, then longest, occurrence splits the text.
  std::size_t cursor = 0;
  while (cursor < text.size()) {
    std::size_t best_at = std::string_view::npos;
    std::size_t best_length = 0;
    std::int32_t best_id = -1;
    for (const std::string& control : control_tokens_) {
      const std::size_t at = text.find(control, cursor);
      if (at == std::string_view::npos) continue;
      if (at < best_at || (at == best_at && control.size() > best_length)) {
        best_at = at;
        best_length = control.size();
        best_id = token_ids_.at(control);
      }
    }
    const std::size_t plain_end = best_at == std::string_view::npos ? text.size() : best_at;
    Status status = encode_plain(text.substr(cursor, plain_end - cursor), ids, &cache);
    if (!status.ok()) return status;
    if (best_id < 0) break;
    ids->push_back(best_id);
    cursor = best_at + best_length;
  }
  return Status::Ok();
}

Status Tokenizer::encode_plain(
    std::string_view text, std::vector<std::int32_t>* ids,
    std::unordered_map<std::string, std::vector<std::int32_t>>* cache) const {
  auto piece = [&](std::size_t begin, std::size_t end, bool) -> Status {
    const std::string key(text.substr(begin, end - begin));
    auto it = cache->find(key);
    if (it == cache->end()) {
      std::vector<std::int32_t> piece_ids;
      Status status = encode_piece(key, &piece_ids);
      if (!status.ok()) return status;
      it = cache->emplace(key, std::move(piece_ids)).first;
    }
    ids->insert(ids->end(), it->second.begin(), it->second.end());
    return Status::Ok();
  };
  // Every digit stands alone; the spans between digits go through the GPT-2 pattern.
  return split(kDigitPattern, text, [&](std::size_t begin, std::size_t end, bool digit) {
    if (digit) return piece(begin, end, true);
    const std::string_view span = text.substr(begin, end - begin);
    return split(kPiecePattern, span, [&](std::size_t b, std::size_t e, bool matched) -> Status {
      if (!matched) {
        return Status(StatusCode::kInvalidArgument, "tokenizer: text not covered by the pattern");
      }
      return piece(begin + b, begin + e, true);
    });
  });
}

Status Tokenizer::encode_piece(std::string_view piece, std::vector<std::int32_t>* ids) const {
  std::vector<std::string> symbols;
  symbols.reserve(piece.size());
  for (const char c : piece) symbols.push_back(byte_symbols_[static_cast<std::uint8_t>(c)]);
  // Repeatedly merge the adjacent pair of lowest rank, all its occurrences left to right.
  while (symbols.size() > 1) {
    int best_rank = std::numeric_limits<int>::max();
    std::size_t best_index = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = merge_ranks_.find(symbols[i] + ' ' + symbols[i + 1]);
      if (it != merge_ranks_.end() && it->second < best_rank) {
        best_rank = it->second;
        best_index = i;
      }
    }
    if (best_rank == std::numeric_limits<int>::max()) break;
    const std::string left = symbols[best_index];
    const std::string right = symbols[best_index + 1];
    std::vector<std::string> merged;
    merged.reserve(symbols.size());
    for (std::size_t i = 0; i < symbols.size(); ++i) {
      if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
        merged.push_back(left + right);
        ++i;
      } else {
        merged.push_back(std::move(symbols[i]));
      }
    }
    symbols = std::move(merged);
  }
  for (const std::string& symbol : symbols) {
    const auto it = token_ids_.find(symbol);
    if (it == token_ids_.end()) {
      return Status(StatusCode::kInvalidArgument,
                    "tokenizer: the vocabulary has no token for the text \"" + std::string(piece) +
                        "\" (a byte without a byte token)");
    }
    ids->push_back(it->second);
  }
  return Status::Ok();
}

std::string Tokenizer::decode(const std::vector<std::int32_t>& ids) const {
  std::string text;
  for (const std::int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    const std::string& token = tokens_[static_cast<std::size_t>(id)];
    if (is_control_[static_cast<std::size_t>(id)]) {
      text += token;
      continue;
    }
    // Walk the token's code points and map each back to its byte.
    std::int32_t i = 0;
    const auto length = static_cast<std::int32_t>(token.size());
    while (i < length) {
      const std::int32_t start = i;
      UChar32 c;
      U8_NEXT(token.data(), i, length, c);
      const auto it = symbol_bytes_.find(token.substr(static_cast<std::size_t>(start),
                                                      static_cast<std::size_t>(i - start)));
      if (it != symbol_bytes_.end()) text.push_back(static_cast<char>(it->second));
    }
  }
  return text;
}

}  // namespace echo::model
