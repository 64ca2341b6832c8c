#include "storage/inspect.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <set>
#include <vector>

#include "core/logging.h"
#include "storage/hdf5_util.h"

namespace tessel::storage {
namespace {

constexpr int kMaxDepth = 16;
constexpr int64_t kMaxTreeLines = 5000;

// ---- graph summary --------------------------------------------------------------------------------

int64_t CountOnes(const std::vector<uint8_t>& v) { return std::count(v.begin(), v.end(), uint8_t{1}); }

int64_t DistinctPairs(const Relation& r) {
  std::vector<std::pair<int64_t, int64_t>> pairs(r.src.size());
  for (size_t i = 0; i < pairs.size(); ++i) pairs[i] = {r.src[i], r.dst[i]};
  std::sort(pairs.begin(), pairs.end());
  return std::unique(pairs.begin(), pairs.end()) - pairs.begin();
}

std::string Plural(int64_t n, std::string_view one, std::string_view many) {
  return StrCat(WithThousands(n), " ", n == 1 ? one : many);
}

// ---- generic tree dump -------------------------------------------------------------------------

std::string ShapeString(hid_t space) {
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0) return "?";
  if (rank == 0) return "scalar";
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += StrCat(i ? ", " : "", WithThousands(static_cast<int64_t>(dims[i])));
  return s + "]";
}

// A short rendering of a small attribute's value, or "" when it is too large or of another type.
std::string AttributeValue(hid_t attr, hid_t type, hid_t space) {
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  if (n < 1 || n > 8) return "";
  const H5T_class_t cls = H5Tget_class(type);
  std::string s;
  if (cls == H5T_STRING) {
    Result<std::vector<std::string>> values = h5::ReadStrings(attr, "", "");
    if (!values.ok()) return "";
    for (size_t i = 0; i < values->size(); ++i) {
      std::string v = (*values)[i];
      if (v.size() > 100) v = v.substr(0, 97) + "...";
      s += StrCat(i ? ", " : "", "\"", v, "\"");
    }
  } else if (cls == H5T_INTEGER) {
    std::vector<int64_t> v(static_cast<size_t>(n));
    if (H5Aread(attr, H5T_NATIVE_INT64, v.data()) < 0) return "";
    for (size_t i = 0; i < v.size(); ++i) s += StrCat(i ? ", " : "", v[i]);
  } else if (cls == H5T_FLOAT) {
    std::vector<double> v(static_cast<size_t>(n));
    if (H5Aread(attr, H5T_NATIVE_DOUBLE, v.data()) < 0) return "";
    for (size_t i = 0; i < v.size(); ++i) s += StrCat(i ? ", " : "", v[i]);
  } else {
    return "";
  }
  return n > 1 ? StrCat("[", s, "]") : s;
}

struct TreeDumper {
  std::ostream& out;
  std::set<haddr_t> visited;
  int64_t lines = 0;

  void Line(int depth, const std::string& text) {
    if (++lines == kMaxTreeLines) out << std::string(2 * depth, ' ') << "... (output truncated)\n";
    if (lines >= kMaxTreeLines) return;
    out << std::string(2 * depth, ' ') << text << "\n";
  }

  void Attributes(hid_t obj, int depth) {
    H5O_info_t info;
    if (H5Oget_info2(obj, &info, H5O_INFO_NUM_ATTRS) < 0) return;
    for (hsize_t i = 0; i < info.num_attrs; ++i) {
      h5::Attribute a(H5Aopen_by_idx(obj, ".", H5_INDEX_NAME, H5_ITER_INC, i, H5P_DEFAULT, H5P_DEFAULT));
      if (!a.valid()) continue;
      char name[256] = {0};
      H5Aget_name(a.get(), sizeof(name), name);
      h5::Datatype type(H5Aget_type(a.get()));
      h5::Dataspace space(H5Aget_space(a.get()));
      if (!type.valid() || !space.valid()) continue;
      const std::string value = AttributeValue(a.get(), type.get(), space.get());
      Line(depth, StrCat("@", name, ": ", h5::DescribeType(type.get()), " ", ShapeString(space.get()),
                         value.empty() ? "" : " = ", value));
    }
  }

  std::string DatasetDetails(hid_t d) {
    h5::Datatype type(H5Dget_type(d));
    h5::Dataspace space(H5Dget_space(d));
    h5::PropList dcpl(H5Dget_create_plist(d));
    std::string s =
        StrCat(type.valid() ? h5::DescribeType(type.get()) : "?", " ", space.valid() ? ShapeString(space.get()) : "?");
    if (dcpl.valid()) {
      const H5D_layout_t layout = H5Pget_layout(dcpl.get());
      s += layout == H5D_CHUNKED ? ", chunked" : (layout == H5D_COMPACT ? ", compact" : ", contiguous");
      H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
      if (layout == H5D_CONTIGUOUS && H5Dget_space_status(d, &status) >= 0 &&
          status != H5D_SPACE_STATUS_NOT_ALLOCATED && H5Dget_offset(d) != HADDR_UNDEF) {
        s += StrCat(" at byte ", H5Dget_offset(d));  // where a mapping of it starts
      }
      const int filters = H5Pget_nfilters(dcpl.get());
      for (int f = 0; f < filters; ++f) {
        unsigned flags = 0;
        size_t nelem = 0;
        char fname[64] = {0};
        const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(f), &flags, &nelem, nullptr,
                                               sizeof(fname), fname, nullptr);
        s += StrCat(", ", id == H5Z_FILTER_DEFLATE      ? "deflate"
                          : id == H5Z_FILTER_SHUFFLE    ? "shuffle"
                          : id == H5Z_FILTER_FLETCHER32 ? "fletcher32"
                                                        : std::string(fname));
      }
    }
    if (type.valid() && space.valid() && H5Sget_simple_extent_npoints(space.get()) == 1 &&
        (H5Tget_class(type.get()) == H5T_INTEGER || H5Tget_class(type.get()) == H5T_FLOAT)) {
      double v = 0;
      if (H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) >= 0) s += StrCat(" = ", v);
    }
    return s;
  }

  void Visit(hid_t group, int depth) {
    std::vector<std::string> names;
    auto collect = [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
      static_cast<std::vector<std::string>*>(data)->emplace_back(name);
      return 0;
    };
    hsize_t idx = 0;
    if (H5Literate(group, H5_INDEX_CRT_ORDER, H5_ITER_INC, &idx, collect, &names) < 0) {
      names.clear();
      idx = 0;
      if (H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &idx, collect, &names) < 0) {
        Line(depth, "(unreadable group)");
        return;
      }
    }
    for (const auto& name : names) {
      h5::Object obj(H5Oopen(group, name.c_str(), H5P_DEFAULT));
      if (!obj.valid()) {
        Line(depth, StrCat(name, ": (dangling or unreadable link)"));
        continue;
      }
      H5O_info_t info;
      if (H5Oget_info2(obj.get(), &info, H5O_INFO_BASIC) < 0) continue;
      if (info.type == H5O_TYPE_GROUP) {
        if (!visited.insert(info.addr).second || depth >= kMaxDepth) {
          Line(depth, StrCat(name, "/ (already shown)"));
          continue;
        }
        Line(depth, StrCat(name, "/"));
        Attributes(obj.get(), depth + 1);
        Visit(obj.get(), depth + 1);
      } else if (info.type == H5O_TYPE_DATASET) {
        Line(depth, StrCat(name, ": ", DatasetDetails(obj.get())));
        Attributes(obj.get(), depth + 1);
      } else {
        Line(depth, StrCat(name, ": (named datatype)"));
      }
    }
  }
};

bool IsGraphFile(hid_t file) {
  if (H5Lexists(file, "meta", H5P_DEFAULT) <= 0) return false;
  h5::Object meta(H5Oopen(file, "meta", H5P_DEFAULT));
  return meta.valid() && H5Aexists(meta.get(), "format_version") > 0 && H5Lexists(file, "nodes", H5P_DEFAULT) > 0;
}

}  // namespace

std::string WithThousands(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -static_cast<uint64_t>(n) : static_cast<uint64_t>(n));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return n < 0 ? "-" + out : out;
}

void PrintGraphSummary(const HeteroGraph& g, const InspectOptions& options, std::ostream& out) {
  int64_t by_kind[3] = {0, 0, 0};
  int64_t distinct_triples = 0;
  for (const auto& r : g.relations) {
    ++by_kind[static_cast<int>(r.kind)];
    if (r.kind == RelationKind::kBase) distinct_triples += DistinctPairs(r);
  }
  int64_t train = 0, val = 0, test = 0, labelled = 0;
  std::vector<int64_t> per_class(static_cast<size_t>(g.num_classes), 0);
  for (const auto& t : g.node_types) {
    train += CountOnes(t.train_mask);
    val += CountOnes(t.val_mask);
    test += CountOnes(t.test_mask);
    for (int64_t label : t.labels) {
      if (label >= 0 && label < g.num_classes) ++per_class[label], ++labelled;
    }
  }
  out << "graph \"" << g.name << "\" (format version " << kGraphFormatVersion << ")\n";
  out << "  " << Plural(g.num_nodes(), "node", "nodes") << " in "
      << Plural(static_cast<int64_t>(g.node_types.size()), "node type", "node types") << "\n";
  out << "  " << Plural(static_cast<int64_t>(g.relations.size()), "relation", "relations") << " ("
      << WithThousands(by_kind[0]) << " base, " << WithThousands(by_kind[1]) << " inverse, "
      << WithThousands(by_kind[2]) << " self-loop), " << Plural(g.num_edges(), "edge", "edges") << "\n";
  out << "  " << Plural(distinct_triples, "distinct triple", "distinct triples") << " over "
      << Plural(by_kind[0], "predicate", "predicates") << "\n";
  if (g.num_classes == 0 && labelled == 0) {
    out << "  no labels\n";
  } else {
    out << "  " << WithThousands(train) << " train, " << (val > 0 ? StrCat(WithThousands(val), " val, ") : "")
        << WithThousands(test) << " test labelled nodes, " << Plural(g.num_classes, "class", "classes") << " ("
        << WithThousands(labelled) << " nodes labelled)\n";
  }

  out << "node types:\n";
  for (const auto& t : g.node_types) {
    out << "  " << t.name << ": " << Plural(t.count, "node", "nodes") << ", "
        << (t.feature_dim > 0 ? StrCat("features float32 [", WithThousands(t.count), ", ", t.feature_dim, "]")
                              : std::string("no features"));
    if (!t.labels.empty()) {
      const int64_t l = std::count_if(t.labels.begin(), t.labels.end(), [](int64_t x) { return x >= 0; });
      out << ", " << WithThousands(l) << " labelled (" << WithThousands(CountOnes(t.train_mask)) << " train, "
          << WithThousands(CountOnes(t.val_mask)) << " val, " << WithThousands(CountOnes(t.test_mask)) << " test)";
    }
    out << "\n";
  }
  if (g.num_classes > 0) {
    out << "classes:\n";
    for (int64_t c = 0; c < g.num_classes; ++c) {
      out << "  " << c << ": " << Plural(per_class[c], "node", "nodes");
      if (!g.class_names.empty()) out << "  " << g.class_names[c];
      out << "\n";
    }
  }
  out << "relations:\n";
  const auto shown = options.max_relations < 0
                         ? g.relations.size()
                         : std::min(g.relations.size(), static_cast<size_t>(options.max_relations));
  for (size_t i = 0; i < shown; ++i) {
    const Relation& r = g.relations[i];
    out << "  " << std::setw(4) << i << "  " << std::left << std::setw(9) << RelationKindName(r.kind) << std::right
        << " " << g.node_types[r.src_type].name << " -> " << g.node_types[r.dst_type].name << "  " << std::setw(12)
        << WithThousands(static_cast<int64_t>(r.src.size())) << " edges  " << r.name << "\n";
  }
  if (shown < g.relations.size()) {
    out << "  ... " << WithThousands(static_cast<int64_t>(g.relations.size() - shown))
        << " more (tessel inspect --all lists them)\n";
  }
  if (!g.source_fingerprint.empty()) out << "source: " << g.source_fingerprint << "\n";
}

Status InspectFile(const std::string& path, const InspectOptions& options, std::ostream& out) {
  bool graph = false;
  {
    h5::ScopedErrorSilencer silence;
    if (H5Fis_hdf5(path.c_str()) <= 0) {
      // Said as it is: a path that names nothing, or a directory, is not a file of the wrong format.
      std::error_code ec;
      const auto what = std::filesystem::status(path, ec);
      if (what.type() == std::filesystem::file_type::not_found) return BadDataError(StrCat(path, ": no such file"));
      if (what.type() == std::filesystem::file_type::directory) {
        return BadDataError(StrCat(path, ": a directory, not an HDF5 file"));
      }
      if (::access(path.c_str(), R_OK) != 0) {
        return BadDataError(StrCat(path, ": cannot read it: ", std::strerror(errno)));
      }
      return BadDataError(StrCat(path, ": not an HDF5 file"));
    }
    h5::File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    if (!file.valid()) return h5::ReadError(path, "cannot open (truncated or corrupt HDF5 file?)");
    graph = IsGraphFile(file.get());
    if (!graph || options.view == InspectView::kTree) {
      out << path << (graph ? ": Tessel graph file\n/\n" : ": HDF5 file (not a Tessel graph file)\n/\n");
      TreeDumper dumper{out, {}, 0};
      dumper.Attributes(file.get(), 1);
      dumper.Visit(file.get(), 1);
      return Status::Ok();
    }
  }
  TESSEL_ASSIGN_OR_RETURN(HeteroGraph g, ReadGraph(path));
  out << path << ": ";
  PrintGraphSummary(g, options, out);
  return Status::Ok();
}

}  // namespace tessel::storage
