// The coordinator <-> worker protocol: MPI tags and the byte encoding of each message.
// All messages travel on MPI_COMM_WORLD between rank 0 and one worker rank.
// Thread safety: values. Failure: Decode* return kBadData on malformed bytes (a version mismatch
// between ranks, or a bug), never read out of bounds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessel::workers {

enum Tag : int {
  kTagHello = 101,      // worker -> coordinator: host, pid, metrics port
  kTagAssign = 102,     // coordinator -> worker: job text + partition
  kTagHeartbeat = 103,  // worker -> coordinator: current step
  kTagProgress = 104,   // first worker -> coordinator: one finished epoch
  kTagResult = 105,     // worker -> coordinator: final figures
  kTagError = 106,      // worker -> coordinator: a failure, with its exit code
  kTagShutdown = 107,   // coordinator -> worker: stop without running
};

struct HelloMsg {
  std::string host;
  int64_t pid = 0;
  int32_t metrics_port = 0;  // 0 = no exporter
};

struct AssignMsg {
  std::string job_text;  // the job file as read by the coordinator
  std::string job_source;
  std::vector<std::string> overrides;
  std::string run_dir;
  std::vector<uint8_t> partition;  // storage::EncodePartition
};

struct HeartbeatMsg {
  int64_t step = 0;
};

struct ProgressMsg {
  int64_t epoch = 0;
  double loss = 0;
  double train_accuracy = 0;
  double seconds = 0;
};

struct ResultMsg {
  std::vector<double> epoch_loss;
  std::vector<double> epoch_seconds;
  double train_accuracy = 0;
  double test_accuracy = 0;
  int64_t test_correct = 0;
  int64_t test_total = 0;
  int64_t peak_rss_bytes = 0;
  int64_t halo_bytes_sent = 0;
};

struct ErrorMsg {
  int32_t code = 1;
  int64_t step = -1;
  std::string message;
};

std::vector<uint8_t> Encode(const HelloMsg& m);
std::vector<uint8_t> Encode(const AssignMsg& m);
std::vector<uint8_t> Encode(const HeartbeatMsg& m);
std::vector<uint8_t> Encode(const ProgressMsg& m);
std::vector<uint8_t> Encode(const ResultMsg& m);
std::vector<uint8_t> Encode(const ErrorMsg& m);
Status Decode(const std::vector<uint8_t>& b, HelloMsg* m);
Status Decode(const std::vector<uint8_t>& b, AssignMsg* m);
Status Decode(const std::vector<uint8_t>& b, HeartbeatMsg* m);
Status Decode(const std::vector<uint8_t>& b, ProgressMsg* m);
Status Decode(const std::vector<uint8_t>& b, ResultMsg* m);
Status Decode(const std::vector<uint8_t>& b, ErrorMsg* m);

}  // namespace tessel::workers
