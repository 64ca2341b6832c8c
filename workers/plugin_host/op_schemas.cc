#include "workers/plugin_host/op_schemas.h"

#include <array>

namespace tessel::workers {
namespace {

struct OpEntry {
  std::string_view op;
  std::string_view schema;
  std::string_view skippable_output;  // an output that may come with 0 rows, or empty
};

constexpr std::array kOps = {
    OpEntry{"rgnn.typed_linear.fwd",
            "rgnn.typed_linear.fwd(X:T[M,K], W:T[R,K,D], uniq_ptr:i64[R+1], uniq_src:i64[U]) -> (Y:T[U,D])", ""},
    OpEntry{"rgnn.typed_linear.bwd",
            "rgnn.typed_linear.bwd(dY:T[U,D], X:T[M,K], W:T[R,K,D], uniq_ptr:i64[R+1], uniq_src:i64[U]) -> "
            "(dX:T[M,K], dW:T[R,K,D])",
            "dX"},
    OpEntry{"rgnn.typed_embed.fwd",
            "rgnn.typed_embed.fwd(W:T[R,V,D], uniq_ptr:i64[R+1], uniq_src:i64[U], row_id:i64[M]) -> (Y:T[U,D])", ""},
    OpEntry{"rgnn.typed_embed.bwd",
            "rgnn.typed_embed.bwd(dY:T[U,D], uniq_ptr:i64[R+1], uniq_src:i64[U], row_id:i64[M]) -> (dW:T[R,V,D])", ""},
    OpEntry{"rgnn.aggregate.fwd",
            "rgnn.aggregate.fwd(Y:T[U,D], edge_uniq:i64[E], norm:T[E], dst_ptr:i64[N+1], dst_edges:i64[E]) -> "
            "(H:T[N,D])",
            ""},
    OpEntry{"rgnn.aggregate.bwd",
            "rgnn.aggregate.bwd(dH:T[N,D], dst:i64[E], norm:T[E], uniq_edge_ptr:i64[U+1]) -> (dY:T[U,D])", ""},
    OpEntry{"nn.relu.fwd", "nn.relu.fwd(X:T[N,D]) -> (Y:T[N,D])", ""},
    OpEntry{"nn.relu.bwd", "nn.relu.bwd(dY:T[N,D], Y:T[N,D]) -> (dX:T[N,D])", ""},
    OpEntry{"nn.softmax_xent.fwd_bwd",
            "nn.softmax_xent.fwd_bwd(logits:T[N,C], labels:i64[N], mask:u8[N], scale:f64[1]) -> "
            "(loss_sum:f64[1], correct:i64[1], dlogits:T[N,C])",
            ""},
    OpEntry{"optim.adam.step", "optim.adam.step(param:T[P], grad:T[P], m:T[P], v:T[P], hyper:f64[7]) -> ()", ""},
};

const OpEntry* FindEntry(std::string_view op) {
  for (const OpEntry& entry : kOps) {
    if (entry.op == op) return &entry;
  }
  return nullptr;
}

}  // namespace

std::string_view ExpectedSchema(std::string_view op) {
  const OpEntry* entry = FindEntry(op);
  return entry ? entry->schema : std::string_view();
}

const std::vector<std::string>& KnownOps() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> out;
    for (const OpEntry& entry : kOps) out.emplace_back(entry.op);
    return out;
  }();
  return ops;
}

const std::vector<std::string>& RgcnOps() {
  // Every op of the table: an RGCN layer stack needs all of them (embedding for featureless inputs).
  return KnownOps();
}

std::vector<OutputRows> OutputRowsFor(std::string_view op) {
  const OpEntry* entry = FindEntry(op);
  if (entry == nullptr) return {};
  Result<Schema> schema = ParseSchema(entry->schema);
  if (!schema.ok()) return {};
  std::vector<OutputRows> rows;
  for (const SchemaArg& out : schema->outputs) {
    rows.push_back(out.name == entry->skippable_output ? OutputRows::kMayBeEmpty : OutputRows::kRequired);
  }
  return rows;
}

}  // namespace tessel::workers
