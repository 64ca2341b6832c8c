#include "workers/llm/stage_weights.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/logging.h"
#include "core/safe_file.h"

namespace tessel::workers {

storage::LlmcConfig ToLlmc(const GptConfig& c) {
  storage::LlmcConfig l;
  l.max_seq_len = c.context;
  l.vocab_size = c.vocab;
  l.padded_vocab_size = c.padded_vocab;
  l.num_layers = c.layers;
  l.num_heads = c.heads;
  l.channels = c.width;
  return l;
}

const std::vector<std::string>& BlockTensorNames() {
  static const std::vector<std::string> names = {"ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
                                                 "ln2w", "ln2b", "fcw",  "fcb",  "fcprojw",  "fcprojb"};
  return names;
}

std::vector<int64_t> BlockTensorShape(const std::string& n, int64_t c) {
  if (n == "qkvw") return {3 * c, c};
  if (n == "qkvb") return {3 * c};
  if (n == "attprojw") return {c, c};
  if (n == "fcw") return {4 * c, c};
  if (n == "fcb") return {4 * c};
  if (n == "fcprojw") return {c, 4 * c};
  return {c};  // ln1w, ln1b, attprojb, ln2w, ln2b, fcprojb
}

namespace {

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The stage's tensors in file order: (llm.c name, block or -1, numel).
struct Piece {
  std::string name;
  int32_t block;
  int64_t numel;
};
std::vector<Piece> StagePieces(const GptConfig& c, const StagePlacement& p) {
  std::vector<Piece> pieces;
  if (p.first()) {
    pieces.push_back({"wte", -1, int64_t{c.padded_vocab} * c.width});
    pieces.push_back({"wpe", -1, int64_t{c.context} * c.width});
  }
  for (int32_t l = p.first_block; l < p.end_block; ++l) {
    for (const std::string& n : BlockTensorNames()) pieces.push_back({n, l, Numel(BlockTensorShape(n, c.width))});
  }
  if (p.last()) {
    pieces.push_back({"lnfw", -1, c.width});
    pieces.push_back({"lnfb", -1, c.width});
  }
  return pieces;
}

}  // namespace

Status WriteStageWeights(const std::string& path, const GptConfig& c, const StagePlacement& p,
                         const std::vector<float>& values) {
  int64_t expected = 0;
  for (const Piece& piece : StagePieces(c, p)) expected += piece.numel;
  if (static_cast<int64_t>(values.size()) != expected) {
    return InternalError(StrCat("stage weights: ", values.size(), " values, expected ", expected));
  }
  std::array<int32_t, 16> header{};
  const int32_t fields[] = {kStageWeightsMagic, 1,       c.layers, c.width,       c.heads,    c.context, c.vocab,
                            c.padded_vocab,     p.stage, p.stages, p.first_block, p.end_block};
  std::copy(std::begin(fields), std::end(fields), header.begin());
  std::string bytes(sizeof header + values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), header.data(), sizeof header);
  std::memcpy(bytes.data() + sizeof header, values.data(), values.size() * sizeof(float));
  return WriteFileAtomically(path, bytes);
}

Result<storage::LlmcCheckpoint> AssembleLlmc(const std::string& run_dir) {
  const std::string dir = run_dir + "/weights";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return BadDataError(StrCat(dir, ": no such directory: is ", run_dir, " the run directory of an llm job?"));
  }
  std::map<int32_t, std::pair<std::string, std::array<int32_t, 16>>> stages;  // by stage index
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("stage-") || !name.ends_with(".bin")) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::array<int32_t, 16> h{};
    in.read(reinterpret_cast<char*>(h.data()), sizeof h);
    if (!in || h[0] != kStageWeightsMagic || h[1] != 1) {
      return BadDataError(StrCat(entry.path().string(), ": not a Tessel stage weights file (magic or version)"));
    }
    if (stages.contains(h[8])) {
      return BadDataError(StrCat(entry.path().string(), ": stage ", h[8], " again (also ", stages[h[8]].first, ")"));
    }
    stages[h[8]] = {entry.path().string(), h};
  }
  if (stages.empty()) return BadDataError(StrCat(dir, ": no stage-*.bin files"));
  const std::array<int32_t, 16>& h0 = stages.begin()->second.second;
  GptConfig c;
  c.layers = h0[2], c.width = h0[3], c.heads = h0[4], c.context = h0[5], c.vocab = h0[6], c.padded_vocab = h0[7];
  const int32_t num_stages = h0[9];
  storage::LlmcCheckpoint ck;
  ck.config = ToLlmc(c);
  TESSEL_RETURN_IF_ERROR(storage::ValidateLlmcConfig(ck.config, stages.begin()->second.first, Code::kBadData));
  if (num_stages < 1 || static_cast<size_t>(num_stages) != stages.size() || stages.rbegin()->first >= num_stages ||
      stages.begin()->first < 0) {
    return BadDataError(StrCat(dir, ": ", stages.size(), " stage files for a model of ", num_stages,
                               " stages (numbered 0 .. ", num_stages - 1, ")"));
  }
  std::map<std::string, storage::LlmcTensor> where;
  for (const storage::LlmcTensor& t : storage::LlmcTensors(ck.config)) where[t.name] = t;
  ck.params.assign(static_cast<size_t>(storage::LlmcNumParameters(ck.config)), 0.0f);
  std::vector<int> covered(static_cast<size_t>(c.layers), 0);
  for (int32_t s = 0; s < num_stages; ++s) {
    auto it = stages.find(s);
    if (it == stages.end()) return BadDataError(StrCat(dir, ": stage ", s, " of ", num_stages, " is missing"));
    const auto& [path, h] = it->second;
    if (!std::equal(h.begin() + 2, h.begin() + 8, h0.begin() + 2) || h[9] != num_stages) {
      return BadDataError(StrCat(path, ": a different model shape than ", stages.begin()->second.first));
    }
    StagePlacement p;
    p.stage = s, p.stages = num_stages, p.first_block = h[10], p.end_block = h[11];
    if (p.first_block < 0 || p.end_block > c.layers || p.first_block > p.end_block) {
      return BadDataError(StrCat(path, ": blocks ", p.first_block, "..", p.end_block, " out of range"));
    }
    std::ifstream in(path, std::ios::binary);
    in.seekg(sizeof(int32_t) * 16);
    for (const Piece& piece : StagePieces(c, p)) {
      const storage::LlmcTensor& t = where.at(piece.name);
      const int64_t per = piece.block < 0 ? t.numel : t.numel / c.layers;
      const int64_t at = t.offset + (piece.block < 0 ? 0 : piece.block * per);
      in.read(reinterpret_cast<char*>(ck.params.data() + at), static_cast<std::streamsize>(per * sizeof(float)));
      if (!in) return BadDataError(StrCat(path, ": truncated (", piece.name, ")"));
    }
    in.peek();
    if (!in.eof()) return BadDataError(StrCat(path, ": longer than its header says"));
    for (int32_t l = p.first_block; l < p.end_block; ++l) ++covered[static_cast<size_t>(l)];
  }
  for (int32_t l = 0; l < c.layers; ++l) {
    if (covered[static_cast<size_t>(l)] != 1) {
      return BadDataError(StrCat(dir, ": block ", l, " is held by ", covered[static_cast<size_t>(l)], " stages"));
    }
  }
  return ck;
}

}  // namespace tessel::workers
