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

#include "core/fields.h"
#include "core/record.h"
#include "core/status.h"
#include "workers/assignment.h"

namespace tessel::workers {

enum Tag : int {
  kTagHello = 101,       // worker -> coordinator: host, pid, metrics port
  kTagAssign = 102,      // coordinator -> worker: settings + executor payload
  kTagHeartbeat = 103,   // worker -> coordinator: current step
  kTagProgress = 104,    // worker -> coordinator: one finished step (every worker, every step)
  kTagResult = 105,      // worker -> coordinator: final figures
  kTagError = 106,       // worker -> coordinator: a failure, with its exit code
  kTagShutdown = 107,    // coordinator -> worker: stop; empty: the job ended, {1}: the coordinator is aborting it
  kTagCheckpoint = 108,  // first worker -> coordinator: every shard of a checkpoint is on disk
  kTagAlive = 109,       // coordinator -> worker: it lives (every heartbeat interval while it runs)
  kTagStop = 110,        // coordinator -> worker: stop after the current step, state saved (a signal it got)
  kTagAbort = 111,       // coordinator -> worker: the job is being aborted; leave now (empty; sent before
                         // kTagShutdown {1}, for a rank whose training thread is stuck in a collective)
  kTagStartup = 112,     // worker -> coordinator: a HelloMsg (host, pid; no metrics port yet) at start-up,
                         // before its assignment; then a heartbeat answers each kTagAlive until it arrives
};

// Each message's fields are declared once, in its list (core/fields.h): its Encode and Decode, and the
// fuzzer's round trip, come from the list.
#define TESSEL_HELLO_MSG_FIELDS(X) \
  X(std::string, host)             \
  X(int64_t, pid)                  \
  X(int32_t, metrics_port) /* 0 = no exporter */
struct HelloMsg {
  TESSEL_FIELDS(HelloMsg, TESSEL_HELLO_MSG_FIELDS)
};

// kind: the executor registry key of the payload; payload: AssignmentPayload::Encode;
// predicted_memory_bytes: WorkerPlan's, for RunHooks.
#define TESSEL_ASSIGN_MSG_FIELDS(X) \
  X(WorkerSettings, settings)       \
  X(std::string, run_dir)           \
  X(std::string, kind)              \
  X(std::vector<uint8_t>, payload)  \
  X(int64_t, predicted_memory_bytes)
struct AssignMsg {
  TESSEL_FIELDS(AssignMsg, TESSEL_ASSIGN_MSG_FIELDS)
};

// activity: what the rank's compute is doing (core/activity.h), for a hang's report.
#define TESSEL_HEARTBEAT_MSG_FIELDS(X) \
  X(int64_t, step)                     \
  X(std::string, activity)
struct HeartbeatMsg {
  TESSEL_FIELDS(HeartbeatMsg, TESSEL_HEARTBEAT_MSG_FIELDS)
};

// The coordinator's beat: a worker that has heard one presumes the coordinator dead after
// `silence_limit_seconds` (timeouts.heartbeat_timeout_seconds) without another.
#define TESSEL_ALIVE_MSG_FIELDS(X) X(double, silence_limit_seconds)
struct AliveMsg {
  TESSEL_FIELDS(AliveMsg, TESSEL_ALIVE_MSG_FIELDS)
};

// A stop request the coordinator received (core/stop_signal.h), passed on to every worker.
#define TESSEL_STOP_MSG_FIELDS(X) X(int32_t, signal)
struct StopMsg {
  TESSEL_FIELDS(StopMsg, TESSEL_STOP_MSG_FIELDS)
};

// shown: the executor's progress figures (StepResult::shown); figures: this rank's figures of the step, a
// row of RUN_DIR/metrics.csv (monitoring/step_figures.h).
#define TESSEL_PROGRESS_MSG_FIELDS(X) \
  X(int64_t, step)                    \
  X(double, loss)                     \
  X(double, seconds)                  \
  X(Record, shown)                    \
  X(Record, figures)
struct ProgressMsg {
  TESSEL_FIELD_LIST(TESSEL_PROGRESS_MSG_FIELDS)
};

// values: merged into summary.json as they are.
#define TESSEL_RESULT_MSG_FIELDS(X) X(Record, values)
struct ResultMsg {
  TESSEL_FIELD_LIST(TESSEL_RESULT_MSG_FIELDS)
};

// Every worker's shard of checkpoint `step` is written; shard w has bytes[w] bytes and CRC-32 crc32[w]
// (the decoder refuses lists of different lengths).
#define TESSEL_CHECKPOINT_MSG_FIELDS(X) \
  X(int64_t, step)                      \
  X(std::vector<int64_t>, bytes)        \
  X(std::vector<int64_t>, crc32)
struct CheckpointMsg {
  TESSEL_FIELDS(CheckpointMsg, TESSEL_CHECKPOINT_MSG_FIELDS)
};

// code: the exit code (Status::exit_code); step: the step it failed in (-1: before any).
#define TESSEL_ERROR_MSG_FIELDS(X) \
  X(int32_t, code)                 \
  X(int64_t, step)                 \
  X(std::string, message)
struct ErrorMsg {
  TESSEL_FIELDS(ErrorMsg, TESSEL_ERROR_MSG_FIELDS)
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
