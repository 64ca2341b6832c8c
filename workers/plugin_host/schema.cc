#include "workers/plugin_host/schema.h"

#include <tessel/plugin.h>

#include <cctype>
#include <limits>
#include <map>
#include <optional>

#include "core/logging.h"

namespace tessel::workers {
namespace {

std::string_view TypeName(SchemaType type) {
  switch (type) {
    case SchemaType::kFloating:
      return "T";
    case SchemaType::kAccumulate:
      return "A";
    case SchemaType::kF32:
      return "f32";
    case SchemaType::kF64:
      return "f64";
    case SchemaType::kI32:
      return "i32";
    case SchemaType::kI64:
      return "i64";
    case SchemaType::kU8:
      return "u8";
  }
  return "?";
}

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// A recursive-descent parser over the schema text; every error names the byte offset.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<Schema> Parse() {
    Schema schema;
    SkipSpace();
    TESSEL_ASSIGN_OR_RETURN(schema.op, OpName());
    TESSEL_ASSIGN_OR_RETURN(schema.inputs, ArgList());
    TESSEL_RETURN_IF_ERROR(Expect("->"));
    TESSEL_ASSIGN_OR_RETURN(schema.outputs, ArgList());
    SkipSpace();
    if (pos_ != text_.size()) return Error("end of schema");
    std::map<std::string, int, std::less<>> seen;
    for (const auto* list : {&schema.inputs, &schema.outputs}) {
      for (const SchemaArg& arg : *list) {
        if (seen[arg.name]++ > 0)
          return PluginError(StrCat("schema '", text_, "': argument '", arg.name, "' appears twice"));
      }
    }
    return schema;
  }

 private:
  void SkipSpace() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  bool Accept(std::string_view token) {
    SkipSpace();
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }
  Status Expect(std::string_view token) {
    if (Accept(token)) return Status::Ok();
    return Error(StrCat("'", token, "'"));
  }
  Status Error(std::string_view expected) const {
    return PluginError(StrCat("malformed schema '", text_, "': expected ", expected, " at offset ", pos_));
  }

  Result<std::string> Identifier(std::string_view what) {
    SkipSpace();
    if (pos_ >= text_.size() || !IsIdentStart(text_[pos_])) return Error(what);
    const size_t begin = pos_;
    while (pos_ < text_.size() && IsIdentChar(text_[pos_])) ++pos_;
    return std::string(text_.substr(begin, pos_ - begin));
  }

  Result<std::string> OpName() {
    std::string op;
    for (;;) {
      TESSEL_ASSIGN_OR_RETURN(std::string part, Identifier("an op name"));
      op += part;
      if (pos_ < text_.size() && text_[pos_] == '.') {
        op += '.';
        ++pos_;
        continue;
      }
      return op;
    }
  }

  Result<int64_t> Integer() {
    SkipSpace();
    if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) return Error("an integer");
    int64_t value = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      const int digit = text_[pos_] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) return Error("a smaller integer");
      value = value * 10 + digit;
      ++pos_;
    }
    return value;
  }

  Result<SchemaDim> Dim() {
    SkipSpace();
    SchemaDim dim;
    if (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      TESSEL_ASSIGN_OR_RETURN(dim.value, Integer());
      return dim;
    }
    TESSEL_ASSIGN_OR_RETURN(dim.symbol, Identifier("a dimension (symbol or integer)"));
    if (Accept("+")) {
      TESSEL_ASSIGN_OR_RETURN(dim.value, Integer());
    }
    return dim;
  }

  Result<SchemaType> Type() {
    TESSEL_ASSIGN_OR_RETURN(std::string name, Identifier("a type (T, A, f32, f64, i32, i64, u8)"));
    for (SchemaType t : {SchemaType::kFloating, SchemaType::kAccumulate, SchemaType::kF32, SchemaType::kF64,
                         SchemaType::kI32, SchemaType::kI64, SchemaType::kU8}) {
      if (name == TypeName(t)) return t;
    }
    pos_ -= name.size();
    return Error("a type (T, A, f32, f64, i32, i64, u8)");
  }

  Result<SchemaArg> Arg() {
    SchemaArg arg;
    TESSEL_ASSIGN_OR_RETURN(arg.name, Identifier("an argument name"));
    TESSEL_RETURN_IF_ERROR(Expect(":"));
    TESSEL_ASSIGN_OR_RETURN(arg.type, Type());
    TESSEL_RETURN_IF_ERROR(Expect("["));
    if (Accept("]")) return arg;
    for (;;) {
      TESSEL_ASSIGN_OR_RETURN(SchemaDim dim, Dim());
      arg.dims.push_back(std::move(dim));
      if (Accept("]")) break;
      TESSEL_RETURN_IF_ERROR(Expect(","));
    }
    if (arg.dims.size() > TESSEL_MAX_DIMS) return Error(StrCat("at most ", TESSEL_MAX_DIMS, " dimensions"));
    return arg;
  }

  Result<std::vector<SchemaArg>> ArgList() {
    std::vector<SchemaArg> args;
    TESSEL_RETURN_IF_ERROR(Expect("("));
    if (Accept(")")) return args;
    for (;;) {
      TESSEL_ASSIGN_OR_RETURN(SchemaArg arg, Arg());
      args.push_back(std::move(arg));
      if (Accept(")")) return args;
      TESSEL_RETURN_IF_ERROR(Expect(","));
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

std::string DimString(const SchemaDim& dim) {
  if (dim.symbol.empty()) return std::to_string(dim.value);
  return dim.value == 0 ? dim.symbol : StrCat(dim.symbol, "+", dim.value);
}

std::string ArgString(const SchemaArg& arg) {
  std::string out = StrCat(arg.name, ":", TypeName(arg.type), "[");
  for (size_t i = 0; i < arg.dims.size(); ++i) out += (i ? "," : "") + DimString(arg.dims[i]);
  return out + "]";
}

std::string ShapeString(const Tensor& t) {
  std::string out = "[";
  for (int i = 0; i < t.ndim(); ++i) out += StrCat(i ? ", " : "", t.dim(i));
  return out + "]";
}

bool TypeMatches(SchemaType type, DType dtype) {
  switch (type) {
    case SchemaType::kFloating:
      return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kBF16 || dtype == DType::kF16;
    case SchemaType::kAccumulate:
      return dtype == DType::kF32 || dtype == DType::kF64;
    case SchemaType::kF32:
      return dtype == DType::kF32;
    case SchemaType::kF64:
      return dtype == DType::kF64;
    case SchemaType::kI32:
      return dtype == DType::kI32;
    case SchemaType::kI64:
      return dtype == DType::kI64;
    case SchemaType::kU8:
      return dtype == DType::kU8;
  }
  return false;
}

// Binds the symbols of a schema to sizes, argument by argument, and reports the first disagreement.
class ShapeBinder {
 public:
  ShapeBinder(const Schema& schema, Device device) : schema_(schema), device_(device) {}

  Status Check(std::string_view role, const SchemaArg& arg, const Tensor* t, OutputRows rows) {
    const std::string who = StrCat("op ", schema_.op, ": ", role, " '", arg.name, "' (", ArgString(arg), ")");
    if (t == nullptr) return InternalError(StrCat(who, " is null"));
    if (t->device() != device_) {
      return InternalError(
          StrCat(who, " is on ", DeviceName(t->device()), ", the kernel runs on ", DeviceName(device_)));
    }
    if (!TypeMatches(arg.type, t->dtype())) {
      return InternalError(StrCat(who, " has dtype ", DTypeName(t->dtype())));
    }
    if (arg.type == SchemaType::kFloating) {
      if (!floating_) {
        floating_ = t->dtype();
        floating_from_ = arg.name;
      } else if (*floating_ != t->dtype()) {
        return InternalError(StrCat(who, " has dtype ", DTypeName(t->dtype()), " but T is ", DTypeName(*floating_),
                                    " (from '", floating_from_, "')"));
      }
    }
    if (arg.type == SchemaType::kAccumulate && !accumulate_) accumulate_ = t->dtype(), accumulate_from_ = arg.name;
    if (floating_ && accumulate_ && *accumulate_ != AccumulateOf(*floating_)) {
      return InternalError(StrCat("op ", schema_.op, ": '", accumulate_from_, "' (A) has dtype ",
                                  DTypeName(*accumulate_), " but T is ", DTypeName(*floating_), " (from '",
                                  floating_from_, "'), so A must be ", DTypeName(AccumulateOf(*floating_))));
    }
    if (t->ndim() != static_cast<int>(arg.dims.size())) {
      return InternalError(StrCat(who, " has shape ", ShapeString(*t), ", rank ", t->ndim()));
    }
    if (rows == OutputRows::kMayBeEmpty && t->ndim() > 0 && t->dim(0) == 0) return Status::Ok();
    for (size_t i = 0; i < arg.dims.size(); ++i) {
      const SchemaDim& dim = arg.dims[i];
      const int64_t size = t->dim(static_cast<int>(i));
      if (dim.symbol.empty()) {
        if (size != dim.value)
          return InternalError(StrCat(who, " has shape ", ShapeString(*t), ": dim ", i, " must be ", dim.value));
        continue;
      }
      auto it = bound_.find(dim.symbol);
      if (it == bound_.end()) {
        if (size < dim.value) {
          return InternalError(
              StrCat(who, " has shape ", ShapeString(*t), ": dim ", i, " must be at least ", dim.value));
        }
        bound_.emplace(dim.symbol, Binding{size - dim.value, arg.name});
      } else if (it->second.value + dim.value != size) {
        return InternalError(StrCat(who, " has shape ", ShapeString(*t), ": dim ", i, " must be ", DimString(dim),
                                    " = ", it->second.value + dim.value, " (", dim.symbol, "=", it->second.value,
                                    " from '", it->second.from, "')"));
      }
    }
    return Status::Ok();
  }

  std::optional<DType> floating() const { return floating_; }

 private:
  // A for a given T.
  static DType AccumulateOf(DType t) { return t == DType::kF64 ? DType::kF64 : DType::kF32; }

  struct Binding {
    int64_t value;
    std::string from;
  };
  const Schema& schema_;
  Device device_;
  std::map<std::string, Binding, std::less<>> bound_;
  std::optional<DType> floating_, accumulate_;
  std::string floating_from_, accumulate_from_;
};

}  // namespace

std::string Schema::ToString() const {
  std::string out = op + "(";
  for (size_t i = 0; i < inputs.size(); ++i) out += (i ? ", " : "") + ArgString(inputs[i]);
  out += ") -> (";
  for (size_t i = 0; i < outputs.size(); ++i) out += (i ? ", " : "") + ArgString(outputs[i]);
  return out + ")";
}

Result<Schema> ParseSchema(std::string_view text) { return Parser(text).Parse(); }

Result<std::optional<DType>> CheckCall(const Schema& schema, Device device, const std::vector<const Tensor*>& inputs,
                                       const std::vector<Tensor*>& outputs,
                                       const std::vector<OutputRows>& output_rows) {
  if (inputs.size() != schema.inputs.size() || outputs.size() != schema.outputs.size()) {
    return InternalError(StrCat("op ", schema.op, " takes ", schema.inputs.size(), " inputs and ",
                                schema.outputs.size(), " outputs, the call passed ", inputs.size(), " and ",
                                outputs.size()));
  }
  ShapeBinder binder(schema, device);
  for (size_t i = 0; i < inputs.size(); ++i) {
    TESSEL_RETURN_IF_ERROR(binder.Check("input", schema.inputs[i], inputs[i], OutputRows::kRequired));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const OutputRows rows = i < output_rows.size() ? output_rows[i] : OutputRows::kRequired;
    TESSEL_RETURN_IF_ERROR(binder.Check("output", schema.outputs[i], outputs[i], rows));
  }
  return binder.floating();
}

}  // namespace tessel::workers
