// Parsing a job file into a JobSpec: the walk over the TOML document, `--set` overrides and the
// required-key check. The field table is in jobs/schema.cc, the rules across fields in jobs/validate.cc.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>
#include <sstream>

#include "core/file_descriptor.h"
#include "core/logging.h"
#include "jobs/schema.h"
#include "jobs/spec.h"

namespace tessel::jobs {
namespace {

using schema::ErrorList;
using schema::Field;

std::string Location(const std::string& source_name, const toml::source_region& where) {
  if (where.begin.line == 0) return source_name;
  return StrCat(source_name, ":", where.begin.line, ":", where.begin.column);
}

// Optimal string alignment distance: edits, with a swap of neighbours counting as one.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string_view LastComponent(std::string_view key) {
  const size_t dot = key.rfind('.');
  return dot == std::string_view::npos ? key : key.substr(dot + 1);
}

// " (did you mean 'train.epochs'?)", or "" when nothing is close. A near miss of the whole path wins;
// else keys of other sections with the same last component ('epochs' -> 'train.epochs').
std::string Suggestion(std::string_view unknown, bool is_section) {
  std::vector<std::string> candidates = schema::SectionNames();
  if (!is_section) {
    for (const Field& f : schema::Fields()) candidates.emplace_back(f.key);
  }
  const size_t limit = unknown.size() <= 4 ? 1 : unknown.size() <= 10 ? 2 : 3;
  size_t best = limit + 1;
  std::string best_key;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(unknown, c);
    if (d < best) best = d, best_key = c;
  }
  const auto quote = [is_section](std::string_view k) {
    return is_section ? StrCat("'[", k, "]'") : StrCat("'", k, "'");
  };
  if (!best_key.empty()) return StrCat(" (did you mean ", quote(best_key), "?)");
  std::vector<std::string_view> same_name;
  for (const std::string& c : candidates) {
    if (LastComponent(c) == LastComponent(unknown)) same_name.push_back(c);
  }
  if (same_name.empty()) return "";
  std::string out = " (did you mean ";
  for (size_t i = 0; i < same_name.size(); ++i) {
    out += StrCat(i == 0 ? "" : i + 1 == same_name.size() ? " or " : ", ", quote(same_name[i]));
  }
  return out + "?)";
}

class Parser {
 public:
  Parser(JobSpec* spec, ErrorList* errors) : spec_(spec), errors_(errors) {}

  // The keys of a TOML table, recursively; `prefix` is the section path ("" at the top).
  void Walk(const toml::table& table, const std::string& prefix) {
    // toml++ iterates keys in sorted order; problems read better in file order.
    std::vector<std::pair<const toml::key*, const toml::node*>> entries;
    for (auto&& [k, node] : table) entries.emplace_back(&k, &node);
    std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      const toml::source_position& pa = a.first->source().begin;
      const toml::source_position& pb = b.first->source().begin;
      return std::pair(pa.line, pa.column) < std::pair(pb.line, pb.column);
    });
    for (const auto& [key_ptr, node_ptr] : entries) {
      const toml::key& k = *key_ptr;
      const toml::node& node = *node_ptr;
      const std::string key = prefix.empty() ? std::string(k.str()) : StrCat(prefix, ".", k.str());
      const std::string where = Location(spec_->source_path, k.source());
      if (key == "version") continue;  // read before the walk
      if (const Field* field = schema::FindField(key)) {
        Set(*field, node, where, /*from_file=*/true);
      } else if (schema::IsSection(key)) {
        spec_->origins[key] = where;
        if (const toml::table* sub = node.as_table()) {
          Walk(*sub, key);
        } else {
          errors_->Add(where, StrCat(key, ": expected a table ([", key, "]), got ", schema::NodeTypeName(node)));
        }
      } else if (node.is_table()) {
        errors_->Add(where, StrCat("unknown section '[", key, "]'", Suggestion(key, /*is_section=*/true)));
      } else {
        errors_->Add(where, StrCat("unknown key '", key, "'", Suggestion(key, /*is_section=*/false)));
      }
    }
  }

  // One "key.path=value" override.
  void Override(const std::string& text) {
    const std::string origin = StrCat("--set ", text);
    const size_t eq = text.find('=');
    if (eq == std::string::npos) {
      errors_->Add(origin, "expected key.path=value");
      return;
    }
    const std::string key = Trim(text.substr(0, eq));
    const std::string value_text = Trim(text.substr(eq + 1));
    if (key == "version") {
      errors_->Add(origin, "version is the schema version of the file and cannot be overridden");
      return;
    }
    const Field* field = schema::FindField(key);
    if (!field) {
      if (schema::IsSection(key)) {
        errors_->Add(origin, StrCat("'", key, "' is a section; set its keys one by one (--set ", key, ".KEY=VALUE)"));
      } else {
        errors_->Add(origin, StrCat("unknown key '", key, "'", Suggestion(key, /*is_section=*/false)));
      }
      return;
    }
    // The value as TOML; text that is not a TOML value is the bare string. A string key always takes
    // the text unless it is quoted: `--set job.name=2024-05-01` would otherwise be a date.
    std::optional<toml::table> parsed;
    try {
      const std::string doc = StrCat("v = ", value_text);
      parsed = toml::parse(std::string_view(doc), std::string_view("--set"));
    } catch (const toml::parse_error&) {
      parsed.reset();
    }
    const toml::node* as_toml = parsed && parsed->size() == 1 ? parsed->get("v") : nullptr;
    const toml::value<std::string> bare(value_text);
    const toml::node* node = &bare;
    if (as_toml && (field->type != schema::ValueType::kString || as_toml->is_string())) node = as_toml;
    Set(*field, *node, origin, /*from_file=*/false);
  }

 private:
  static std::string Trim(std::string s) {
    const auto not_space = [](unsigned char c) { return !std::isspace(c); };
    s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
    s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
    return s;
  }

  // `where` is the key's origin; array elements of a file get their own ("data.edges[1]").
  void Set(const Field& field, const toml::node& node, const std::string& where, bool from_file) {
    spec_->origins[std::string(field.key)] = where;
    Result<schema::Value> value = schema::Convert(field, node);
    if (!value.ok()) {
      errors_->Add(where, StrCat(field.key, ": ", value.status().message()));
      return;
    }
    if (const toml::array* arr = node.as_array()) {
      for (size_t i = 0; i < arr->size(); ++i) {
        const toml::source_region& src = (*arr)[i].source();
        spec_->origins[StrCat(field.key, "[", i, "]")] =
            from_file && src.begin.line ? Location(spec_->source_path, src) : where;
      }
    }
    field.set(*spec_, *value);
  }

  JobSpec* spec_;
  ErrorList* errors_;
};

// `version = 1` must come first: another version may mean another schema, so nothing else is checked.
Status CheckVersion(const toml::table& root, const std::string& source) {
  const toml::node* v = root.get("version");
  if (!v) {
    return UsageError(StrCat(source, ": missing required key 'version' (add `version = ", kJobFileVersion,
                             "` at the top of the file)"));
  }
  const std::string where = Location(source, v->source());
  const auto* i = v->as_integer();
  if (!i) return UsageError(StrCat(where, ": version: expected an integer, got ", schema::NodeTypeName(*v)));
  if (i->get() != kJobFileVersion) {
    return UsageError(StrCat(where, ": version = ", i->get(),
                             " is not supported; this build reads job files of version ", kJobFileVersion));
  }
  return Status::Ok();
}

void CheckRequired(const JobSpec& spec, ErrorList* errors) {
  for (const Field& f : schema::Fields()) {
    if (!f.constraint.required || spec.origins.contains(f.key)) continue;
    const std::string section(f.key.substr(0, f.key.rfind('.')));
    if (const auto it = spec.origins.find(section); it != spec.origins.end()) {
      errors->Add(it->second, StrCat("missing required key '", f.key, "' in [", section, "]"));
    } else {
      errors->Add(spec.source_path, StrCat("missing required key '", f.key, "'"));
    }
  }
}

}  // namespace

std::string KeyOrigin(const JobSpec& spec, std::string_view key) {
  const auto it = spec.origins.find(key);
  return it == spec.origins.end() ? spec.source_path : it->second;
}

std::vector<int32_t> FanoutsOf(const JobSpec& spec) {
  if (!spec.train.fanouts.empty()) return spec.train.fanouts;
  return std::vector<int32_t>(static_cast<size_t>(std::max(spec.model.layers, 0)), kDefaultFanout);
}

Result<JobSpec> ParseJob(std::string_view toml_text, const std::string& source_name,
                         const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    return UsageError(StrCat(Location(source_name, e.source()), ": TOML syntax error: ", e.description()));
  }
  TESSEL_RETURN_IF_ERROR(CheckVersion(root, source_name));

  JobSpec spec;
  spec.source_path = source_name;
  ErrorList errors;
  Parser parser(&spec, &errors);
  parser.Walk(root, "");
  for (const std::string& o : overrides) parser.Override(o);
  CheckRequired(spec, &errors);
  TESSEL_RETURN_IF_ERROR(errors.ToStatus());
  TESSEL_RETURN_IF_ERROR(ValidateJob(spec));
  return spec;
}

namespace {

// What a non-regular file is, in the user's words.
std::string_view FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

Status NotAJobFile(const std::string& path, mode_t mode) {
  return UsageError(
      StrCat("job file '", path, "' is ", FileKind(mode), ", not a TOML file: give the path of a .toml file"));
}

Status TooLarge(const std::string& path, int64_t bytes) {
  return UsageError(StrCat("job file '", path, "' is ",
                           bytes < 0 ? std::string("larger than ") : StrCat(bytes, " bytes, over "), "the limit of ",
                           kMaxJobFileBytes, " bytes (1 MiB): is it a job file?"));
}

}  // namespace

Result<JobSpec> LoadJobFile(const std::string& path, const std::vector<std::string>& overrides) {
  const auto unreadable = [&path](int err) {
    return UsageError(StrCat("cannot read job file '", path, "': ", std::strerror(err)));
  };
  // Looked at before it is opened, and again through the descriptor (O_NONBLOCK: a FIFO put in its place
  // meanwhile cannot block the open), so that neither a FIFO nor a device is ever read.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return unreadable(errno);
  if (!S_ISREG(st.st_mode)) return NotAJobFile(path, st.st_mode);
  if (st.st_size > kMaxJobFileBytes) return TooLarge(path, st.st_size);
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) return unreadable(errno);
  if (::fstat(fd.get(), &st) != 0) return unreadable(errno);
  if (!S_ISREG(st.st_mode)) return NotAJobFile(path, st.st_mode);
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return unreadable(errno);
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (static_cast<int64_t>(text.size()) > kMaxJobFileBytes) return TooLarge(path, -1);  // it grew
  }
  return ParseJob(text, path, overrides);
}

std::string FormatJobToml(const JobSpec& spec) {
  std::string out = StrCat("# The resolved job", spec.source_path.empty() ? "" : StrCat(" from ", spec.source_path),
                           ", every key included.\nversion = ", spec.version, "\n");
  std::string section;
  for (const Field& f : schema::Fields()) {
    // An rgnn job must not have a [pipeline] section (ValidateJob refuses it), so writing its defaults
    // would make a file that does not read back.
    if (spec.job.kind == JobKind::kRgnn && f.key.starts_with("pipeline.")) continue;
    const size_t dot = f.key.rfind('.');
    const std::string_view this_section = f.key.substr(0, dot);
    if (this_section != section) {
      section = this_section;
      out += StrCat("\n[", section, "]\n");
    }
    out += StrCat(f.key.substr(dot + 1), " = ", schema::FormatValue(f.get(spec)), "\n");
  }
  return out;
}

std::vector<FieldInfo> DescribeFields() {
  const JobSpec defaults;
  std::vector<FieldInfo> out;
  for (const Field& f : schema::Fields()) {
    FieldInfo info;
    info.key = f.key;
    info.type = schema::TypeName(f.type);
    info.default_value = f.constraint.required ? "required" : schema::FormatValue(f.get(defaults));
    info.allowed = schema::DescribeAllowed(f);
    info.doc = f.doc;
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace tessel::jobs
