// FeatureStore: the node-feature rows that one worker serves, read from the graph file (DESIGN.md
// "Graph file" and "Zero-copy gathers"). In sampled training a worker holds the rows of the nodes it owns
// and fetches the others from their owners; this store is what it reads its own rows from.
//
// Modes:
//   kMapped  maps each node type's /nodes/<type>/features dataset read-only, in place, from the page below
//            its file offset (MADV_RANDOM, so nothing is read ahead: only the pages of rows that are
//            touched are ever read, and Open touches just the owned rows when it checks them).
//   kPinned  reads only the owned rows (one pread per run of consecutive ids) into one buffer from the
//            caller's allocator: PinnedAllocator() on a GPU worker, so a kernel reads them in place.
//
// Addressing. Rows live in one or more tables, each a dense row-major float [rows, feature_dim] array:
//   kPinned  one table (none when the store serves no rows), the owned rows packed in ascending global
//            id; a row's index is the position of its id in owned_ids.
//   kMapped  one table per node type that holds an owned row: that type's whole dataset, indexed by the
//            type-local id (rows of other workers are there but never touched).
// So when there is one table (always in kPinned; in kMapped when the owned ids fall in one node type)
// base() + RowIndex(id) * feature_dim() is a row's address, the (base, index) pair a gather kernel takes.
// In general Locate(id) gives (table, row) and table(t).data that table's base: a plugin gathers per table.
//
// Node types: every type that has features must have the same width (the model takes one input width).
// A type without features is fine unless the worker owns one of its nodes: then Open refuses.
//
// Open refuses, with kBadData naming the file and the dataset ("g.h5: /nodes/paper/features: ..."):
//   - a missing or unreadable file, one that is not HDF5, a missing /nodes/<type>/count;
//   - a features dataset that is not stored contiguously (chunked, compact, external or virtual), in both
//     modes: one rule, the one the file format states. Tessel writes features contiguous; other files
//     can be fixed with `h5repack -l /nodes/<type>/features:CONTI`;
//   - an element type other than 32-bit little-endian IEEE float; a rank other than 2; a row count that
//     differs from /nodes/<type>/count; a zero width; widths that differ between node types;
//   - a dataset with no allocated storage, or whose bytes run past the end of the file (truncated);
//   - kMapped only: data that does not start on a 4-byte boundary (rows could not be read as floats in
//     place). Tessel aligns features to 64 bytes; kPinned reads any offset;
//   - a NaN or +-Inf in any owned row (the message names the node, type-local and global, and the column);
//   - an owned id in a node type without features, or beyond the file's node count.
// Owned ids that are not sorted ascending without repeats are the caller's bug: kInternal.
//
// Ownership: the store owns its mappings and buffer and releases them in its destructor (unregistering
// them from CUDA first where they were registered). Pointers it returns live as long as the store. It is
// move-only. Thread safety: Open any thread; after it every const method may be called from any number
// of threads at once (nothing in the store changes). Failure: see Open, CheckedRow and Gather.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/choices.h"
#include "core/status.h"

namespace tessel::storage {

class FeatureStore {
 public:
  // kMapped or kPinned (the store serves no other; the planner resolves data.feature_store = "auto").
  using Mode = FeatureStoreChoice;
  // kMapped only: whether Open also registers the mapped tables with CUDA (core/cuda_device.h
  // RegisterHostMemory), so a GPU kernel reads rows in place. That pins every page of those tables, the
  // rows of other workers included. Without CUDA or a usable GPU it does nothing.
  enum class CudaAccess { kNone, kRegisterMappedTables };

  struct Options {
    Mode mode = Mode::kMapped;
    // kPinned: where the row buffer comes from; null means HostAllocator(). Not owned: it must outlive
    // the store.
    Allocator* allocator = nullptr;
    CudaAccess cuda_access = CudaAccess::kNone;
  };

  // A dense row-major float [rows, feature_dim] array: row r starts at data + r * feature_dim.
  struct Table {
    const float* data = nullptr;
    int64_t rows = 0;
  };
  // Where a row lives: table `table`, row `row`; {-1, -1} for an id the store does not serve.
  struct RowRef {
    int32_t table = -1;
    int64_t row = -1;
    bool found() const { return table >= 0; }
  };

  // Opens the store over `graph_path` for `owned_ids`: the global ids (node types concatenated in file
  // order) whose rows this worker serves, sorted ascending without repeats. Failure: see the top of file.
  static Result<FeatureStore> Open(const std::string& graph_path, std::vector<int64_t> owned_ids,
                                   const Options& options);

  FeatureStore(FeatureStore&& other) noexcept;
  FeatureStore& operator=(FeatureStore&& other) noexcept;
  FeatureStore(const FeatureStore&) = delete;
  FeatureStore& operator=(const FeatureStore&) = delete;
  ~FeatureStore();

  Mode mode() const { return mode_; }
  // Row width in floats; 0 only for a store that serves no rows of a graph without features.
  int64_t feature_dim() const { return feature_dim_; }
  // Rows served (the number of owned ids).
  int64_t num_rows() const { return static_cast<int64_t>(owned_ids_.size()); }
  const std::vector<int64_t>& owned_ids() const { return owned_ids_; }
  // Bytes the store holds: the buffer (kPinned), or the mapped length (kMapped; mapped pages cost memory
  // only once touched, and are page cache the kernel may evict).
  int64_t bytes() const { return bytes_; }

  // Where `global_id`'s row lives, or {-1, -1} when the store does not serve it. O(log rows).
  RowRef Locate(int64_t global_id) const;
  // The address of `global_id`'s row, or null when the store does not serve it.
  const float* Row(int64_t global_id) const;
  // Row, but a non-served id is kInternal naming the id (asking for it is a bug in the caller).
  Result<const float*> CheckedRow(int64_t global_id) const;

  int32_t num_tables() const { return static_cast<int32_t>(tables_.size()); }
  Table table(int32_t t) const { return tables_[static_cast<size_t>(t)]; }
  // The single table's base when num_tables() == 1, else null (then use Locate and table()).
  const float* base() const { return tables_.size() == 1 ? tables_[0].data : nullptr; }
  // Locate(global_id).row: the row index within its table; -1 when not served.
  int64_t RowIndex(int64_t global_id) const { return Locate(global_id).row; }

  // The reference gather: copies the rows of global_ids[0, n) into out[n * feature_dim()], in order.
  // An id the store does not serve is kInternal naming it and its index; `out` is then partly written.
  Status Gather(const int64_t* global_ids, int64_t n, float* out) const;

 private:
  struct Mapping {
    void* addr = nullptr;
    size_t length = 0;
    bool registered = false;  // with CUDA
  };
  FeatureStore() = default;
  void Release();

  Mode mode_ = Mode::kMapped;
  int64_t feature_dim_ = 0;
  int64_t bytes_ = 0;
  std::vector<int64_t> owned_ids_;
  std::vector<int32_t> slot_of_;       // [nodes]: a node's index in owned_ids_, or -1
  std::vector<int64_t> type_offsets_;  // [types + 1]: type t's global ids are [off[t], off[t + 1])
  std::vector<int32_t> type_table_;    // kMapped: the table of each node type, -1 if none
  std::vector<Table> tables_;
  std::vector<Mapping> mappings_;   // kMapped
  Allocator* allocator_ = nullptr;  // kPinned: owns buffer_
  void* buffer_ = nullptr;
};

}  // namespace tessel::storage
