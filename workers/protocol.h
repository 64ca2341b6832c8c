// The coordinator <-> worker protocol: MPI tags and the byte encoding of each message.
// All messages travel on MPI_COMM_WORLD between rank 0 and one worker rank. Nothing here knows what a
// worker trains: an assignment is settings plus an executor payload tagged by kind, and results and
// progress are Records (core/record.h) that the coordinator passes on without interpreting them.
// Thread safety: values. Failure: Decode* return kBadData on malformed bytes (a version mismatch
// between ranks, or a bug), never read out of bounds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/record.h"
#include "core/status.h"
#include "workers/assignment.h"

namespace tessel::workers {

enum Tag : int {
  kTagHello = 101,      // worker -> coordinator: host, pid, metrics port
  kTagAssign = 102,     // coordinator -> worker: settings + executor payload
  kTagHeartbeat = 103,  // worker -> coordinator: current step
  kTagProgress = 104,   // worker -> coordinator: one finished step (every worker, every step)
  kTagResult = 105,     // worker -> coordinator: final figures
  kTagError = 106,      // worker -> coordinator: a failure, with its exit code
  kTagShutdown = 107,   // coordinator -> worker: stop; empty: the job ended, {1}: the coordinator is aborting it
  kTagCheckpoint = 108, // first worker -> coordinator: every shard of a checkpoint is on disk
  kTagAlive = 109,      // coordinator -> worker: it lives (every heartbeat interval while it runs)
  kTagStop = 110,       // coordinator -> worker: stop after the current step, state saved (a signal it got)
  kTagAbort = 111,      // coordinator -> worker: the job is being aborted; leave now (empty; sent before
                        // kTagShutdown {1}, for a rank whose training thread is stuck in a collective)
  kTagStartup = 112,    // worker -> coordinator: a HelloMsg (host, pid; no metrics port yet) at start-up,
                        // before its assignment; then a heartbeat answers each kTagAlive until it arrives
};

struct HelloMsg {
  std::string host;
  int64_t pid = 0;
  int32_t metrics_port = 0;  // 0 = no exporter
};

struct AssignMsg {
  WorkerSettings settings;
  std::string run_dir;
  std::string kind;              // the executor registry key of the payload
  std::vector<uint8_t> payload;  // AssignmentPayload::Encode
  int64_t predicted_memory_bytes = 0;  // WorkerPlan's, for RunHooks
};

struct HeartbeatMsg {
  int64_t step = 0;
  std::string activity;  // what the rank's compute is doing (core/activity.h), for a hang's report
};

// The coordinator's beat: a worker that has heard one presumes the coordinator dead after
// `silence_limit_seconds` (timeouts.heartbeat_timeout_seconds) without another.
struct AliveMsg {
  double silence_limit_seconds = 0;
};

// A stop request the coordinator received (core/stop_signal.h), passed on to every worker.
struct StopMsg {
  int32_t signal = 0;
};

struct ProgressMsg {
  int64_t step = 0;
  double loss = 0;
  double seconds = 0;
  Record shown;    // the executor's progress figures (StepResult::shown)
  Record figures;  // this rank's figures of the step, a row of RUN_DIR/metrics.csv (monitoring/step_figures.h)
};

struct ResultMsg {
  Record values;  // merged into summary.json as they are
};

// Every worker's shard of checkpoint `step` is written; shard w has bytes[w] bytes and CRC-32 crc32[w].
struct CheckpointMsg {
  int64_t step = 0;
  std::vector<int64_t> bytes;
  std::vector<int64_t> crc32;
};

struct ErrorMsg {
  int32_t code = 1;
  int64_t step = -1;
  std::string message;
};

std::vector<uint8_t> Encode(const HelloMsg& m);
std::vector<uint8_t> Encode(const AssignMsg& m);
std::vector<uint8_t> Encode(const HeartbeatMsg& m);
std::vector<uint8_t> Encode(const AliveMsg& m);
std::vector<uint8_t> Encode(const StopMsg& m);
std::vector<uint8_t> Encode(const ProgressMsg& m);
std::vector<uint8_t> Encode(const ResultMsg& m);
std::vector<uint8_t> Encode(const ErrorMsg& m);
std::vector<uint8_t> Encode(const CheckpointMsg& m);
Status Decode(const std::vector<uint8_t>& b, HelloMsg* m);
Status Decode(const std::vector<uint8_t>& b, AssignMsg* m);
Status Decode(const std::vector<uint8_t>& b, HeartbeatMsg* m);
Status Decode(const std::vector<uint8_t>& b, AliveMsg* m);
Status Decode(const std::vector<uint8_t>& b, StopMsg* m);
Status Decode(const std::vector<uint8_t>& b, ProgressMsg* m);
Status Decode(const std::vector<uint8_t>& b, ResultMsg* m);
Status Decode(const std::vector<uint8_t>& b, ErrorMsg* m);
Status Decode(const std::vector<uint8_t>& b, CheckpointMsg* m);

}  // namespace tessel::workers
