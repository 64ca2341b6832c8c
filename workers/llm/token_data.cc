#include "workers/llm/token_data.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <random>

#include "core/logging.h"
#include "storage/llmc.h"

namespace tessel::workers {
namespace {

Status CheckLength(const std::vector<int32_t>& tokens, const std::string& name, const char* split, int64_t need,
                   const std::string& what) {
  if (static_cast<int64_t>(tokens.size()) >= need) return Status();
  return BadDataError(StrCat(name, ": the ", split, " split has ", tokens.size(), " tokens; ", what, " needs ", need));
}

}  // namespace

std::string GenerateText(int64_t bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  // A lexicon of short lower-case words, each with a few likely successors.
  constexpr int kWords = 400, kNext = 4;
  std::vector<std::string> words(kWords);
  const char* const letters = "etaoinshrdlucmfwypvbgkjqxz";
  std::geometric_distribution<int> length(0.3);
  std::uniform_int_distribution<int> letter_skew(0, 99);
  for (std::string& w : words) {
    const int n = 2 + std::min(length(rng), 8);
    for (int i = 0; i < n; ++i) {
      const int r = letter_skew(rng);
      w.push_back(letters[r < 60 ? r % 9 : r < 90 ? 9 + r % 9 : 18 + r % 8]);
    }
  }
  std::vector<std::array<int, kNext>> next(kWords);
  std::uniform_int_distribution<int> any_word(0, kWords - 1);
  for (auto& n : next) {
    for (int& x : n) x = any_word(rng);
  }
  std::discrete_distribution<int> pick({55, 25, 12, 8});
  std::uniform_int_distribution<int> sentence_len(4, 14);
  std::string text;
  text.reserve(static_cast<size_t>(bytes) + 64);
  int word = any_word(rng);
  while (static_cast<int64_t>(text.size()) < bytes) {
    const int n = sentence_len(rng);
    for (int i = 0; i < n; ++i) {
      std::string w = words[static_cast<size_t>(word)];
      if (i == 0) w[0] = static_cast<char>(w[0] - 'a' + 'A');
      text += w;
      text += i + 1 == n ? ".\n" : " ";
      word = next[static_cast<size_t>(word)][static_cast<size_t>(pick(rng))];
    }
  }
  text.resize(static_cast<size_t>(bytes));
  return text;
}

bool HasValidation(const LlmDataSettings& data) {
  return data.val_fraction > 0 || (data.format == DataFormat::kLlmc && !data.val_tokens.empty());
}

Result<TokenSplits> LoadTokenSplits(const LlmDataSettings& data, int32_t vocab, int64_t global_batch, int64_t seq_len) {
  TokenSplits out;
  std::vector<int32_t> all;
  std::string name;
  switch (data.format) {
    case DataFormat::kText: {
      name = data.text;
      TESSEL_ASSIGN_OR_RETURN(all, storage::ReadTextTokens(data.text));
      break;
    }
    case DataFormat::kLlmc: {
      name = data.train_tokens;
      TESSEL_ASSIGN_OR_RETURN(all, storage::ReadLlmcTokens(data.train_tokens, vocab));
      break;
    }
    case DataFormat::kGeneratedText: {
      name = StrCat("generated text (", data.generated_bytes, " bytes)");
      const std::string text = GenerateText(data.generated_bytes, data.generated_seed);
      all.assign(text.begin(), text.end());
      for (int32_t& t : all) t &= 0xff;
      break;
    }
    default:
      return InternalError(StrCat("data.format = \"", NameOf(data.format), "\" holds no tokens"));
  }
  if (data.format != DataFormat::kLlmc) {
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i] >= vocab) {
        return BadDataError(StrCat(name, ": byte ", i, " is token ", all[i], ", outside model.vocab_size = ", vocab));
      }
    }
  }
  out.train_name = out.val_name = name;
  if (data.format == DataFormat::kLlmc && !data.val_tokens.empty()) {
    out.train = std::move(all);
    out.val_name = data.val_tokens;
    TESSEL_ASSIGN_OR_RETURN(out.val, storage::ReadLlmcTokens(data.val_tokens, vocab));
  } else {
    const auto n = static_cast<int64_t>(all.size());
    const int64_t train_n = n - static_cast<int64_t>(static_cast<double>(n) * data.val_fraction);
    out.val.assign(all.begin() + train_n, all.end());
    all.resize(static_cast<size_t>(train_n));
    out.train = std::move(all);
  }
  TESSEL_RETURN_IF_ERROR(CheckLength(out.train, out.train_name, "training", global_batch * seq_len + 1,
                                     StrCat("one batch of ", global_batch, " sequences of ", seq_len, " tokens")));
  if (HasValidation(data)) {
    TESSEL_RETURN_IF_ERROR(CheckLength(out.val, out.val_name, "validation", global_batch * seq_len + 1,
                                       StrCat("one batch of ", global_batch, " sequences of ", seq_len,
                                              " tokens (or data.val_fraction = 0: no validation)")));
  }
  return out;
}

BatchPlan::BatchPlan(int64_t num_tokens, int64_t seq_len, int64_t sequences, bool shuffled, uint64_t seed)
    : seq_len_(seq_len), sequences_(sequences), shuffled_(shuffled), seed_(seed) {
  if (num_tokens < 1) return;
  if (shuffled) {
    slots_ = (num_tokens - 1) / seq_len;
    per_pass_ = slots_ / sequences;
  } else {
    per_pass_ = (num_tokens - 1) / (seq_len * sequences);
  }
}

int64_t BatchPlan::Start(int64_t batch, int64_t j) const {
  const int64_t pass = batch / std::max<int64_t>(per_pass_, 1);
  const int64_t k = batch % std::max<int64_t>(per_pass_, 1);
  if (!shuffled_) return (k * sequences_ + j) * seq_len_;
  if (pass != cached_pass_) {
    order_.resize(static_cast<size_t>(slots_));
    std::iota(order_.begin(), order_.end(), int64_t{0});
    std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(pass) + 1);
    std::shuffle(order_.begin(), order_.end(), rng);
    cached_pass_ = pass;
  }
  return order_[static_cast<size_t>(k * sequences_ + j)] * seq_len_;
}

}  // namespace tessel::workers
