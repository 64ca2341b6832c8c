// Kernel schemas: the signature string every kernel carries (include/tessel/plugin.h documents the
// grammar), parsed once at registration and checked against the tensors of every call.
//
//   rgnn.aggregate.fwd(Y:T[U,D], edge_uniq:i64[E], ...) -> (H:T[N,D])
//
// A dim is a literal (7), a symbol (N) or a symbol plus a literal (N+1). A symbol is bound by the first
// tensor that uses it and must agree everywhere else. T is the call's floating dtype (f32, f64, bf16 or
// f16; which ones a kernel takes, its registration says), the same for every T argument. A is T's
// accumulation type: f64 when T is f64, f32 otherwise (a bf16 call's LayerNorm statistics and
// parameter gradients).
// Thread safety: values; ParseSchema and CheckCall are pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace tessel::workers {

enum class SchemaType { kFloating, kAccumulate, kF32, kF64, kI32, kI64, kU8 };

struct SchemaDim {
  std::string symbol;  // empty for a literal
  int64_t value = 0;   // the literal, or what is added to the symbol
};

struct SchemaArg {
  std::string name;
  SchemaType type = SchemaType::kFloating;
  std::vector<SchemaDim> dims;
};

struct Schema {
  std::string op;
  std::vector<SchemaArg> inputs;
  std::vector<SchemaArg> outputs;

  // The canonical spelling: ", " between arguments, "," between dims, no other spaces.
  std::string ToString() const;
};

// Fails with a PluginError naming the position and what was expected.
Result<Schema> ParseSchema(std::string_view text);

// Whether an output may come with 0 rows, meaning "not requested" (the first layer's dX).
enum class OutputRows { kRequired, kMayBeEmpty };

// Checks the tensors of one call against the schema: counts, dtypes, ranks, devices and sizes.
// `output_rows[i]` relaxes output i (missing entries mean kRequired). Returns the call's T (the dtype of
// its T arguments; nullopt for an op without any). Fails with an InternalError that names the argument: a
// mismatch is a bug in the caller, not in the user's input.
Result<std::optional<DType>> CheckCall(const Schema& schema, Device device, const std::vector<const Tensor*>& inputs,
                                       const std::vector<Tensor*>& outputs, const std::vector<OutputRows>& output_rows);

}  // namespace tessel::workers
