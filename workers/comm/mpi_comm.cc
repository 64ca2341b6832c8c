#include "workers/comm/mpi_comm.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "core/logging.h"

namespace tessel::workers {

Status MpiCheck(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return RankFailedError(std::string(what) + " failed: " + std::string(text, static_cast<size_t>(len)));
}

Result<std::unique_ptr<MpiSession>> MpiSession::Init(int* argc, char*** argv) {
  std::unique_ptr<MpiSession> s(new MpiSession());
  int provided = MPI_THREAD_SINGLE;
  TESSEL_RETURN_IF_ERROR(MpiCheck(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread"));
  s->thread_multiple_ = provided >= MPI_THREAD_MULTIPLE;
  // Errors come back as return codes, so a dead peer becomes a message rather than an abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &s->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &s->size_);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  s->hostname_.assign(name, static_cast<size_t>(len));
  return s;
}

MpiSession::~MpiSession() {
  if (skip_finalize_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

UniqueComm::~UniqueComm() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

UniqueComm& UniqueComm::operator=(UniqueComm&& o) noexcept {
  if (this != &o) {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    comm_ = o.comm_;
    o.comm_ = MPI_COMM_NULL;
  }
  return *this;
}

Result<std::unique_ptr<MpiWorkerComm>> MpiWorkerComm::OverWorkers(bool is_worker) {
  MPI_Comm comm = MPI_COMM_NULL;
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  TESSEL_RETURN_IF_ERROR(
      MpiCheck(MPI_Comm_split(MPI_COMM_WORLD, is_worker ? 1 : MPI_UNDEFINED, world_rank, &comm), "MPI_Comm_split"));
  if (!is_worker) return std::unique_ptr<MpiWorkerComm>();
  auto c = std::unique_ptr<MpiWorkerComm>(new MpiWorkerComm());
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  c->comm_ = UniqueComm(comm);
  MPI_Comm_rank(comm, &c->rank_);
  MPI_Comm_size(comm, &c->size_);
  return c;
}

Result<std::unique_ptr<WorkerComm>> MpiWorkerComm::Duplicate() {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_MULTIPLE) {
    return InternalError("MPI runs without MPI_THREAD_MULTIPLE: a second thread cannot communicate");
  }
  MPI_Comm comm = MPI_COMM_NULL;
  TESSEL_RETURN_IF_ERROR(MpiCheck(MPI_Comm_dup(comm_.get(), &comm), "MPI_Comm_dup"));
  auto c = std::unique_ptr<MpiWorkerComm>(new MpiWorkerComm());
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  c->comm_ = UniqueComm(comm);
  c->rank_ = rank_;
  c->size_ = size_;
  return std::unique_ptr<WorkerComm>(std::move(c));
}

Result<std::unique_ptr<WorkerComm>> MpiWorkerComm::Split(int color) {
  MPI_Comm comm = MPI_COMM_NULL;
  TESSEL_RETURN_IF_ERROR(MpiCheck(MPI_Comm_split(comm_.get(), color, rank_, &comm), "MPI_Comm_split"));
  auto c = std::unique_ptr<MpiWorkerComm>(new MpiWorkerComm());
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  c->comm_ = UniqueComm(comm);
  MPI_Comm_rank(comm, &c->rank_);
  MPI_Comm_size(comm, &c->size_);
  return std::unique_ptr<WorkerComm>(std::move(c));
}

MpiWorkerComm::~MpiWorkerComm() {
  // Sends still in flight when an executor gives up: cancel them rather than leak the requests.
  for (auto& [handle, s] : sends_) {
    // A cancel may lose the race with a matching receive: wait either way, so MPI is done with the buffer.
    MPI_Cancel(&s.request);
    MPI_Wait(&s.request, MPI_STATUS_IGNORE);
  }
}

namespace {

// Polls `request` with MPI_Test and a backoff sleep (20 us doubling to 1 ms) until it completes.
Status PollRequest(MPI_Request* request, double timeout_seconds, const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  int64_t sleep_us = 20;
  while (true) {
    int done = 0;
    TESSEL_RETURN_IF_ERROR(MpiCheck(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test"));
    if (done) return Status();
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_seconds) {
      return RankFailedError(
          StrCat(what, ": nothing after ", static_cast<int64_t>(waited), " s (timeouts.step_seconds)"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min<int64_t>(sleep_us * 2, 1000);
  }
}

}  // namespace

Result<int64_t> MpiWorkerComm::Isend(int peer, const float* data, int64_t count, int tag) {
  if (count > std::numeric_limits<int>::max()) return InternalError("a pipeline message exceeds MPI's count limit");
  MPI_Request r = MPI_REQUEST_NULL;
  TESSEL_RETURN_IF_ERROR(
      MpiCheck(MPI_Isend(data, static_cast<int>(count), MPI_FLOAT, peer, tag, comm_.get(), &r), "MPI_Isend"));
  const int64_t handle = next_send_++;
  sends_[handle] = Send{r, peer, tag};
  return handle;
}

Status MpiWorkerComm::WaitSend(int64_t handle, double timeout_seconds) {
  auto it = sends_.find(handle);
  if (it == sends_.end()) return Status();
  TESSEL_RETURN_IF_ERROR(
      PollRequest(&it->second.request, timeout_seconds,
                  StrCat("waiting for worker ", it->second.peer, " to take a message (tag ", it->second.tag, ")")));
  sends_.erase(it);
  return Status();
}

Status MpiWorkerComm::Recv(int peer, float* data, int64_t count, int tag, double timeout_seconds) {
  if (count > std::numeric_limits<int>::max()) return InternalError("a pipeline message exceeds MPI's count limit");
  MPI_Request r = MPI_REQUEST_NULL;
  TESSEL_RETURN_IF_ERROR(
      MpiCheck(MPI_Irecv(data, static_cast<int>(count), MPI_FLOAT, peer, tag, comm_.get(), &r), "MPI_Irecv"));
  Status st = PollRequest(&r, timeout_seconds, StrCat("waiting for worker ", peer, " (message tag ", tag, ")"));
  if (!st.ok()) {
    MPI_Cancel(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  }
  return st;
}

Status MpiWorkerComm::WaitSends(double timeout_seconds) {
  while (!sends_.empty()) TESSEL_RETURN_IF_ERROR(WaitSend(sends_.begin()->first, timeout_seconds));
  return Status();
}

namespace {

template <typename T>
MPI_Datatype MpiType();
template <>
MPI_Datatype MpiType<float>() {
  return MPI_FLOAT;
}
template <>
MPI_Datatype MpiType<double>() {
  return MPI_DOUBLE;
}
template <>
MPI_Datatype MpiType<int64_t>() {
  return MPI_INT64_T;
}

// MPI counts are int: reduce in chunks so huge parameter vectors never overflow.
template <typename T>
Status Allreduce(MPI_Comm comm, T* data, int64_t count) {
  constexpr int64_t kChunk = int64_t{1} << 28;
  for (int64_t off = 0; off < count; off += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, count - off));
    TESSEL_RETURN_IF_ERROR(
        MpiCheck(MPI_Allreduce(MPI_IN_PLACE, data + off, n, MpiType<T>(), MPI_SUM, comm), "MPI_Allreduce"));
  }
  return Status();
}

Result<std::vector<int>> ToInts(const std::vector<int64_t>& v, const char* what) {
  std::vector<int> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] > std::numeric_limits<int>::max()) {
      return InternalError(std::string(what) + " exceeds MPI's 32-bit count limit");
    }
    out[i] = static_cast<int>(v[i]);
  }
  return out;
}

}  // namespace

Status MpiWorkerComm::AllreduceSum(float* data, int64_t count) { return Allreduce(comm_.get(), data, count); }
Status MpiWorkerComm::AllreduceSum(double* data, int64_t count) { return Allreduce(comm_.get(), data, count); }
Status MpiWorkerComm::AllreduceSum(int64_t* data, int64_t count) { return Allreduce(comm_.get(), data, count); }

Status MpiWorkerComm::AllToAll(const std::vector<std::vector<int64_t>>& send, std::vector<std::vector<int64_t>>* recv) {
  const size_t n = static_cast<size_t>(size_);
  std::vector<int64_t> send_counts(n), recv_counts(n);
  for (size_t p = 0; p < n; ++p) send_counts[p] = static_cast<int64_t>(send[p].size());
  TESSEL_RETURN_IF_ERROR(
      MpiCheck(MPI_Alltoall(send_counts.data(), 1, MPI_INT64_T, recv_counts.data(), 1, MPI_INT64_T, comm_.get()),
               "MPI_Alltoall"));
  std::vector<int64_t> send_buf, send_off(n), recv_off(n);
  int64_t total = 0;
  for (size_t p = 0; p < n; ++p) {
    send_off[p] = static_cast<int64_t>(send_buf.size());
    send_buf.insert(send_buf.end(), send[p].begin(), send[p].end());
    recv_off[p] = total;
    total += recv_counts[p];
  }
  std::vector<int64_t> recv_buf(static_cast<size_t>(total));
  TESSEL_ASSIGN_OR_RETURN(auto sc, ToInts(send_counts, "all-to-all send"));
  TESSEL_ASSIGN_OR_RETURN(auto so, ToInts(send_off, "all-to-all send"));
  TESSEL_ASSIGN_OR_RETURN(auto rc, ToInts(recv_counts, "all-to-all receive"));
  TESSEL_ASSIGN_OR_RETURN(auto ro, ToInts(recv_off, "all-to-all receive"));
  TESSEL_RETURN_IF_ERROR(MpiCheck(MPI_Alltoallv(send_buf.data(), sc.data(), so.data(), MPI_INT64_T, recv_buf.data(),
                                                rc.data(), ro.data(), MPI_INT64_T, comm_.get()),
                                  "MPI_Alltoallv"));
  recv->assign(n, {});
  for (size_t p = 0; p < n; ++p) {
    (*recv)[p].assign(recv_buf.begin() + recv_off[p], recv_buf.begin() + recv_off[p] + recv_counts[p]);
  }
  return Status();
}

Status MpiWorkerComm::AllToAllV(const float* send_buf, const std::vector<int64_t>& send_counts,
                                const std::vector<int64_t>& send_offsets, float* recv_buf,
                                const std::vector<int64_t>& recv_counts, const std::vector<int64_t>& recv_offsets) {
  TESSEL_ASSIGN_OR_RETURN(auto sc, ToInts(send_counts, "halo send"));
  TESSEL_ASSIGN_OR_RETURN(auto so, ToInts(send_offsets, "halo send"));
  TESSEL_ASSIGN_OR_RETURN(auto rc, ToInts(recv_counts, "halo receive"));
  TESSEL_ASSIGN_OR_RETURN(auto ro, ToInts(recv_offsets, "halo receive"));
  return MpiCheck(
      MPI_Alltoallv(send_buf, sc.data(), so.data(), MPI_FLOAT, recv_buf, rc.data(), ro.data(), MPI_FLOAT, comm_.get()),
      "MPI_Alltoallv (halo exchange)");
}

namespace {

// The sends that timed out, each with its buffer. Open MPI's ob1 does not cancel a send (MPI_Cancel has no
// effect on one), so a receiver that matches it later, a stopped coordinator woken up say, reads the
// buffer then: it must outlive the send. Leaked at exit, as MPI may hold the requests until then.
struct PendingSend {
  MPI_Request request;
  std::vector<uint8_t> bytes;  // moved in: its heap buffer, which MPI reads, stays where it was
};
std::mutex& PendingMutex() {
  static std::mutex mu;
  return mu;
}
std::list<PendingSend>& PendingSends() {
  static auto* pending = new std::list<PendingSend>;
  return *pending;
}

// Drops the timed-out sends that have completed (or were cancelled).
void ReapPendingSends() {
  std::lock_guard<std::mutex> lock(PendingMutex());
  std::list<PendingSend>& pending = PendingSends();
  for (auto it = pending.begin(); it != pending.end();) {
    int done = 0;
    if (MPI_Test(&it->request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
      it = pending.erase(it);
    } else {
      ++it;
    }
  }
}

// A send past its limit: asked to cancel, and kept with its buffer until it completes.
Status AbandonSend(MPI_Request req, std::vector<uint8_t> bytes, int dest) {
  MPI_Cancel(&req);
  {
    std::lock_guard<std::mutex> lock(PendingMutex());
    PendingSends().push_back(PendingSend{req, std::move(bytes)});
  }
  return RankFailedError("sending to rank " + std::to_string(dest) + " timed out");
}

}  // namespace

Result<ByteSpan> ByteSpan::Of(size_t bytes) {
  ByteSpan s;
  if (bytes <= static_cast<size_t>(std::numeric_limits<int>::max())) {
    s.count_ = static_cast<int>(bytes);
    return s;
  }
  constexpr size_t kPiece = size_t{1} << 30;
  MPI_Datatype piece = MPI_DATATYPE_NULL, pieces = MPI_DATATYPE_NULL;
  TESSEL_RETURN_IF_ERROR(
      MpiCheck(MPI_Type_contiguous(static_cast<int>(kPiece), MPI_BYTE, &piece), "MPI_Type_contiguous"));
  Status st = MpiCheck(MPI_Type_contiguous(static_cast<int>(bytes / kPiece), piece, &pieces), "MPI_Type_contiguous");
  MPI_Type_free(&piece);
  TESSEL_RETURN_IF_ERROR(st);
  const int lengths[2] = {1, static_cast<int>(bytes % kPiece)};
  const MPI_Aint offsets[2] = {0, static_cast<MPI_Aint>(bytes - bytes % kPiece)};
  const MPI_Datatype types[2] = {pieces, MPI_BYTE};
  st = MpiCheck(MPI_Type_create_struct(lengths[1] > 0 ? 2 : 1, lengths, offsets, types, &s.type_),
                "MPI_Type_create_struct");
  MPI_Type_free(&pieces);
  TESSEL_RETURN_IF_ERROR(st);
  s.owned_ = true;
  TESSEL_RETURN_IF_ERROR(MpiCheck(MPI_Type_commit(&s.type_), "MPI_Type_commit"));
  s.count_ = 1;
  return s;
}

Status SendBytes(std::vector<uint8_t> bytes, int dest, int tag, std::chrono::duration<double> timeout) {
  ReapPendingSends();
  TESSEL_ASSIGN_OR_RETURN(const ByteSpan span, ByteSpan::Of(bytes.size()));
  MPI_Request req;
  TESSEL_RETURN_IF_ERROR(
      MpiCheck(MPI_Isend(bytes.data(), span.count(), span.type(), dest, tag, MPI_COMM_WORLD, &req), "MPI_Isend"));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // A big message moves in fragments, each only when this side calls into MPI: a sleeping sender would
  // make an 800 MB assignment take minutes, so past 1 MiB it only yields between tests.
  const bool big = bytes.size() > (size_t{1} << 20);
  Backoff backoff;
  for (;;) {
    int done = 0;
    TESSEL_RETURN_IF_ERROR(MpiCheck(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test"));
    if (done) return Status();
    if (std::chrono::steady_clock::now() > deadline) return AbandonSend(req, std::move(bytes), dest);
    if (big) {
      std::this_thread::yield();
      continue;
    }
    backoff.Wait();
  }
}

Result<Message> TryReceive(int source, int tag, const std::function<void()>& between) {
  int flag = 0;
  MPI_Message handle;
  MPI_Status st;
  TESSEL_RETURN_IF_ERROR(MpiCheck(MPI_Improbe(source, tag, MPI_COMM_WORLD, &flag, &handle, &st), "MPI_Improbe"));
  Message m;
  if (!flag) return m;
  MPI_Count count = 0;  // 64-bit: a message may exceed 2 GiB (ByteSpan)
  TESSEL_RETURN_IF_ERROR(MpiCheck(MPI_Get_elements_x(&st, MPI_BYTE, &count), "MPI_Get_elements_x"));
  if (count < 0) return RankFailedError("a message whose size MPI cannot tell (MPI_UNDEFINED)");
  m.bytes.resize(static_cast<size_t>(count));
  TESSEL_ASSIGN_OR_RETURN(const ByteSpan span, ByteSpan::Of(m.bytes.size()));
  if (between && count > (1 << 20)) {
    MPI_Request req;
    TESSEL_RETURN_IF_ERROR(
        MpiCheck(MPI_Imrecv(m.bytes.data(), span.count(), span.type(), &handle, &req), "MPI_Imrecv"));
    for (;;) {
      int done = 0;
      TESSEL_RETURN_IF_ERROR(MpiCheck(MPI_Test(&req, &done, &st), "MPI_Test"));
      if (done) break;
      between();
      std::this_thread::yield();  // a big message moves only while this side calls into MPI
    }
    m.source = st.MPI_SOURCE;
    m.tag = st.MPI_TAG;
    return m;
  }
  TESSEL_RETURN_IF_ERROR(MpiCheck(MPI_Mrecv(m.bytes.data(), span.count(), span.type(), &handle, &st), "MPI_Mrecv"));
  m.source = st.MPI_SOURCE;
  m.tag = st.MPI_TAG;
  return m;
}

Result<Message> PollMessage(int source, int tag, std::chrono::duration<double> timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Backoff backoff;
  for (;;) {
    TESSEL_ASSIGN_OR_RETURN(Message m, TryReceive(source, tag));
    if (m.source >= 0 || std::chrono::steady_clock::now() > deadline) return m;
    backoff.Wait();
  }
}

}  // namespace tessel::workers
