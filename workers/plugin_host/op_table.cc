#include "workers/plugin_host/op_table.h"

#include <tessel/ops/gather.h>
#include <tessel/ops/llm.h>
#include <tessel/ops/nn.h>
#include <tessel/ops/optim.h>
#include <tessel/ops/rgnn.h>

#include <algorithm>
#include <sstream>

namespace tessel::workers {
namespace {

#define TESSEL_OP_ADDRESS(ident, name, schema, params_size, optional) &tessel_op_##ident,

const tessel_op_decl* const kOps[] = {TESSEL_NN_OPS(TESSEL_OP_ADDRESS) TESSEL_OPTIM_OPS(TESSEL_OP_ADDRESS)
                                          TESSEL_RGNN_OPS(TESSEL_OP_ADDRESS) TESSEL_GATHER_OPS(TESSEL_OP_ADDRESS)
                                              TESSEL_LLM_OPS(TESSEL_OP_ADDRESS)};

#undef TESSEL_OP_ADDRESS

}  // namespace

const tessel_op_decl* FindOp(std::string_view op) {
  for (const tessel_op_decl* decl : kOps) {
    if (op == decl->name) return decl;
  }
  return nullptr;
}

const std::vector<const tessel_op_decl*>& HostOps() {
  static const std::vector<const tessel_op_decl*> ops(std::begin(kOps), std::end(kOps));
  return ops;
}

std::string_view ExpectedSchema(std::string_view op) {
  const tessel_op_decl* decl = FindOp(op);
  return decl ? std::string_view(decl->schema) : std::string_view();
}

std::vector<OutputRows> OutputRowsFor(std::string_view op) {
  const tessel_op_decl* decl = FindOp(op);
  if (decl == nullptr) return {};
  Result<Schema> schema = ParseSchema(decl->schema);
  if (!schema.ok()) return {};
  std::vector<std::string> optional;
  std::istringstream list(decl->optional_outputs);
  for (std::string name; std::getline(list, name, ',');) optional.push_back(name);
  std::vector<OutputRows> rows;
  for (const SchemaArg& out : schema->outputs) {
    const bool may_skip = std::find(optional.begin(), optional.end(), out.name) != optional.end();
    rows.push_back(may_skip ? OutputRows::kMayBeEmpty : OutputRows::kRequired);
  }
  return rows;
}

std::vector<std::string> OpsOfFamily(std::string_view family) {
  std::vector<std::string> ops;
  for (const tessel_op_decl* decl : kOps) {
    const std::string_view name = decl->name;
    if (name.size() > family.size() && name.substr(0, family.size()) == family && name[family.size()] == '.') {
      ops.emplace_back(name);
    }
  }
  return ops;
}

}  // namespace tessel::workers
