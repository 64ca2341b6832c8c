// `tessel export`: a run's trained weights in another format: llm.c's GPT-2 checkpoint, or Hugging Face's.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "core/json.h"
#include "core/logging.h"
#include "orchestrator/cli.h"
#include "orchestrator/partitioning/rank_output.h"
#include "storage/hf_gpt2.h"
#include "storage/llmc.h"
#include "workers/llm/stage_weights.h"

namespace tessel::cli {

namespace {

// Whether RUN_DIR holds a finished llm run, in the user's words when not: no such directory, not a run, a
// run of another kind, or a run that did not finish (its summary.json says how it ended). A run that did
// not finish is refused even when a weights/ is there: it is not this run's (issue 32: a failed run into
// a good run's directory exported the good run's weights).
Status FinishedLlmRun(const std::string& run_dir) {
  std::error_code ec;
  if (!std::filesystem::exists(run_dir, ec)) return BadDataError(StrCat(run_dir, ": no such directory"));
  if (!std::filesystem::is_directory(run_dir, ec)) return BadDataError(StrCat(run_dir, ": not a directory"));
  std::ifstream in(run_dir + "/summary.json");
  std::ostringstream text;
  text << in.rdbuf();
  Result<Json> summary = in ? ParseJson(text.str(), run_dir + "/summary.json") : Result<Json>(BadDataError(""));
  if (!summary.ok() || !summary->is_object()) {
    return BadDataError(StrCat(run_dir,
                               " has no weights/ and no readable summary.json: not a run directory, or a run "
                               "that is still going or was killed"));
  }
  const auto text_of = [&](const char* key) {
    const auto it = summary->find(key);
    return it != summary->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (const std::string kind = text_of("kind"); kind != "llm") {
    return BadDataError(StrCat(run_dir, " is a run of ", kind.empty() ? "an unknown" : "an " + kind,
                               " job: only llm runs write weights to export"));
  }
  if (const std::string outcome = text_of("outcome"); outcome == "failed") {
    return BadDataError(StrCat(run_dir, ": the run did not finish (it failed: ", text_of("error"),
                               "): there are no weights of it to export; export a finished run"));
  } else if (outcome == "stopped") {
    return BadDataError(StrCat(run_dir, ": the run did not finish (stopped by ", text_of("stopped_by"),
                               "): there are no final weights; finish it with tessel run --resume, then export"));
  }
  if (text_of("outcome") != "done") {
    return BadDataError(StrCat(run_dir, ": summary.json gives no outcome \"done\": not a finished run"));
  }
  return Status();
}

// The trained weights of the finished llm run in RUN_DIR, as one llm.c checkpoint.
Result<storage::LlmcCheckpoint> TrainedWeights(const std::string& run_dir) {
  TESSEL_RETURN_IF_ERROR(FinishedLlmRun(run_dir));
  if (std::error_code ec; !std::filesystem::is_directory(run_dir + "/weights", ec)) {
    return BadDataError(StrCat(run_dir, "/weights: no such directory, though summary.json says the run finished"));
  }
  return workers::AssembleLlmc(run_dir);
}

// Writes `ck` as Hugging Face's GPT-2 into OUT, a new directory (or an empty one), through a temporary
// directory beside it renamed into place: OUT is whole or absent.
Status WriteHfDirectory(const std::string& out, const storage::LlmcCheckpoint& ck) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec))) {
    return UsageError(StrCat(out, " exists and is not an empty directory; remove it or name another"));
  }
  TESSEL_ASSIGN_OR_RETURN(const fs::path tmp, orchestrator::MakeTemporaryDirectory(out));
  Status st = storage::WriteHfGpt2(tmp.string(), ck);
  if (st.ok() && std::rename(tmp.c_str(), out.c_str()) != 0) {
    st = StorageError(StrCat("cannot rename ", tmp.string(), " to ", out, ": ", std::strerror(errno)));
  }
  if (!st.ok()) fs::remove_all(tmp, ec);
  return st;
}

}  // namespace

// tessel export llmc RUN_DIR OUT.bin: an llm run's trained weights as an llm.c checkpoint; tessel export hf
// RUN_DIR OUT: the same as Hugging Face's GPT2LMHeadModel (config.json, model.safetensors).
void RegisterExportCommands(CLI::App& app, Status* result) {
  CLI::App* exp = app.add_subcommand("export", "Write a run's trained weights in another format");
  exp->require_subcommand(1);
  auto run_dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = exp->add_subcommand("llmc", "An llm run's GPT-2 as an llm.c checkpoint (version 3, float32)");
  cmd->add_option("RUN_DIR", *run_dir, "The run directory (it holds weights/stage-*.bin)")->required();
  cmd->add_option("OUT", *out, "The checkpoint to write")->required();
  cmd->callback([run_dir, out, result] {
    Result<storage::LlmcCheckpoint> ck = TrainedWeights(*run_dir);
    *result = ck.ok() ? storage::WriteLlmcCheckpoint(*out, *ck) : ck.status();
    if (result->ok()) {
      std::cout << "wrote " << *out << ": " << ck->params.size() << " parameters, " << ck->config.num_layers
                << " layers, width " << ck->config.channels << "\n";
    }
  });
  CLI::App* hf = exp->add_subcommand(
      "hf", "An llm run's GPT-2 as Hugging Face's GPT2LMHeadModel (config.json, model.safetensors)");
  hf->add_option("RUN_DIR", *run_dir, "The run directory (it holds weights/stage-*.bin)")->required();
  hf->add_option("OUT", *out, "The directory to write (new, or empty)")->required();
  hf->callback([run_dir, out, result] {
    Result<storage::LlmcCheckpoint> ck = TrainedWeights(*run_dir);
    *result = ck.ok() ? WriteHfDirectory(*out, *ck) : ck.status();
    if (result->ok()) {
      std::cout << "wrote " << *out << " (config.json, model.safetensors): " << ck->config.num_layers
                << " layers, width " << ck->config.channels << ", vocabulary " << ck->config.vocab_size
                << "; load it with transformers.GPT2LMHeadModel.from_pretrained\n";
    }
  });
}

}  // namespace tessel::cli
