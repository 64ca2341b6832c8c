#include "storage/rdf_import.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "core/logging.h"
#include "storage/edges_import.h"
#include "storage/line_reader.h"

namespace tessel::storage {
namespace {

// ---- N-Triples -------------------------------------------------------------------------------

bool IsSpace(char c) { return c == ' ' || c == '\t'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

class NTriplesParser {
 public:
  explicit NTriplesParser(std::string_view line) : s_(line) {}

  Result<bool> Parse(NTriple* out) {
    SkipSpace();
    if (AtEnd() || Peek() == '#') return false;
    TESSEL_RETURN_IF_ERROR(ParseSubject(&out->subject));
    SkipSpace();
    if (AtEnd() || Peek() != '<') return Error("expected a predicate IRI");
    TESSEL_RETURN_IF_ERROR(ParseIri(&out->predicate));
    SkipSpace();
    TESSEL_RETURN_IF_ERROR(ParseObject(&out->object));
    SkipSpace();
    if (AtEnd() || Peek() != '.') return Error("expected '.' after the object");
    ++pos_;
    SkipSpace();
    if (!AtEnd() && Peek() != '#') return Error("unexpected text after '.'");
    return true;
  }

 private:
  bool AtEnd() const { return pos_ >= s_.size(); }
  char Peek() const { return s_[pos_]; }
  void SkipSpace() {
    while (!AtEnd() && IsSpace(Peek())) ++pos_;
  }
  Status Error(std::string_view reason) const { return BadDataError(StrCat(reason, " at column ", pos_ + 1)); }

  Status ParseSubject(std::string* out) {
    if (Peek() == '<') return ParseIri(out);
    if (Peek() == '_') return ParseBlank(out);
    return Error("expected a subject (IRI or blank node)");
  }

  Status ParseObject(std::string* out) {
    if (AtEnd()) return Error("expected an object");
    if (Peek() == '<') return ParseIri(out);
    if (Peek() == '_') return ParseBlank(out);
    if (Peek() == '"') return ParseLiteral(out);
    return Error("expected an object (IRI, blank node or literal)");
  }

  // \uXXXX or \UXXXXXXXX at pos_ (which points at 'u' or 'U'); appends the UTF-8 encoding.
  Status ParseUchar(std::string* out) {
    const size_t digits = Peek() == 'u' ? 4 : 8;
    if (pos_ + digits >= s_.size()) return Error("truncated \\u escape");
    uint32_t cp = 0;
    for (size_t i = 1; i <= digits; ++i) {
      const char c = s_[pos_ + i];
      uint32_t v;
      if (IsDigit(c)) {
        v = static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v = static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v = static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return Error("bad hex digit in \\u escape");
      }
      cp = cp * 16 + v;
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return Error("\\u escape is not a Unicode scalar value");
    AppendUtf8(cp, out);
    pos_ += digits + 1;
    return Status::Ok();
  }

  Status ParseIri(std::string* out) {
    out->assign(1, '<');
    ++pos_;  // '<'
    while (true) {
      if (AtEnd()) return Error("unterminated IRI");
      const char c = Peek();
      if (c == '>') break;
      if (c == '\\') {
        ++pos_;
        if (AtEnd() || (Peek() != 'u' && Peek() != 'U')) return Error("bad escape in IRI");
        TESSEL_RETURN_IF_ERROR(ParseUchar(out));
        continue;
      }
      if (static_cast<unsigned char>(c) <= 0x20 || c == '<' || c == '"' || c == '{' || c == '}' || c == '|' ||
          c == '^' || c == '`') {
        return Error(StrCat("invalid character '", c == ' ' ? std::string("space") : std::string(1, c), "' in IRI"));
      }
      out->push_back(c);
      ++pos_;
    }
    // "<>" is a relative IRI (the document's own): N-Triples has absolute IRIs only, and an empty
    // predicate would name a relation "".
    if (out->size() == 1) return Error("empty IRI '<>' (N-Triples IRIs are absolute)");
    ++pos_;  // '>'
    out->push_back('>');
    return Status::Ok();
  }

  Status ParseBlank(std::string* out) {
    if (pos_ + 1 >= s_.size() || s_[pos_ + 1] != ':') return Error("expected '_:' to start a blank node");
    const size_t start = pos_;
    pos_ += 2;
    while (!AtEnd()) {
      const char c = Peek();
      if (IsAlpha(c) || IsDigit(c) || c == '_' || c == '-' || c == '.' || static_cast<unsigned char>(c) >= 0x80) {
        ++pos_;
      } else {
        break;
      }
    }
    while (pos_ > start + 2 && s_[pos_ - 1] == '.') --pos_;  // a trailing '.' ends the statement
    if (pos_ == start + 2) return Error("empty blank node label");
    const char first = s_[start + 2];
    if (first == '-' || first == '.') return Error("blank node label starts with an invalid character");
    out->assign(s_.substr(start, pos_ - start));
    return Status::Ok();
  }

  Status ParseLiteral(std::string* out) {
    out->assign(1, '"');
    ++pos_;  // '"'
    while (true) {
      if (AtEnd()) return Error("unterminated literal");
      const char c = Peek();
      if (c == '"') break;
      if (c != '\\') {
        out->push_back(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (AtEnd()) return Error("unterminated literal");
      const char e = Peek();
      if (e == 'u' || e == 'U') {
        std::string decoded;
        TESSEL_RETURN_IF_ERROR(ParseUchar(&decoded));
        AppendEscaped(decoded, out);
        continue;
      }
      char raw;
      switch (e) {
        case 't':
          raw = '\t';
          break;
        case 'b':
          raw = '\b';
          break;
        case 'n':
          raw = '\n';
          break;
        case 'r':
          raw = '\r';
          break;
        case 'f':
          raw = '\f';
          break;
        case '"':
          raw = '"';
          break;
        case '\'':
          raw = '\'';
          break;
        case '\\':
          raw = '\\';
          break;
        default:
          return Error(StrCat("invalid escape '\\", std::string(1, e), "' in literal"));
      }
      AppendEscaped(std::string_view(&raw, 1), out);
      ++pos_;
    }
    ++pos_;  // closing '"'
    out->push_back('"');
    if (!AtEnd() && Peek() == '@') {
      const size_t start = pos_;
      ++pos_;
      size_t letters = 0;
      while (!AtEnd() && IsAlpha(Peek())) ++pos_, ++letters;
      if (letters == 0) return Error("empty language tag");
      while (!AtEnd() && Peek() == '-') {
        ++pos_;
        size_t part = 0;
        while (!AtEnd() && (IsAlpha(Peek()) || IsDigit(Peek()))) ++pos_, ++part;
        if (part == 0) return Error("bad language tag");
      }
      out->append(s_.substr(start, pos_ - start));
    } else if (pos_ + 1 < s_.size() && Peek() == '^' && s_[pos_ + 1] == '^') {
      pos_ += 2;
      if (AtEnd() || Peek() != '<') return Error("expected a datatype IRI after '^^'");
      std::string datatype;
      TESSEL_RETURN_IF_ERROR(ParseIri(&datatype));
      out->append("^^");
      out->append(datatype);
    } else if (!AtEnd() && Peek() == '^') {
      return Error("expected '^^' before a datatype");
    }
    return Status::Ok();
  }

  // Canonical literal escaping: only what would otherwise break the term or the line.
  static void AppendEscaped(std::string_view raw, std::string* out) {
    for (char c : raw) {
      switch (c) {
        case '"':
          out->append("\\\"");
          break;
        case '\\':
          out->append("\\\\");
          break;
        case '\n':
          out->append("\\n");
          break;
        case '\r':
          out->append("\\r");
          break;
        default:
          out->push_back(c);
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// ---- labels ------------------------------------------------------------------------------------

struct LabelRow {
  std::string source;  // "file:LINE" for messages
  std::string entity;  // canonical term
  std::string label;
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitTabs(std::string_view line) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (true) {
    const size_t tab = line.find('\t', pos);
    out.push_back(Trim(line.substr(pos, tab == std::string_view::npos ? tab : tab - pos)));
    if (tab == std::string_view::npos) return out;
    pos = tab + 1;
  }
}

Result<size_t> FindColumn(const std::vector<std::string_view>& header, const std::string& wanted, size_t fallback,
                          const std::string& file) {
  if (wanted.empty()) return fallback;
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == wanted) return i;
  }
  std::string cols;
  for (auto h : header) cols += StrCat(cols.empty() ? "" : ", ", h);
  return BadDataError(StrCat(file, ":1: no column '", wanted, "' in the header (columns: ", cols, ")"));
}

Result<std::vector<LabelRow>> ReadLabelFile(const std::string& path, const RdfImportOptions& options) {
  std::vector<LabelRow> rows;
  size_t entity_col = 0, label_col = 0, num_cols = 0;
  bool have_header = false;
  TESSEL_RETURN_IF_ERROR(
      ForEachLine(path, {}, [&](const std::string& source, int64_t line_no, std::string_view line) -> Status {
        if (Trim(line).empty()) return Status::Ok();
        std::vector<std::string_view> cells = SplitTabs(line);
        if (!have_header) {
          have_header = true;
          num_cols = cells.size();
          if (num_cols < 2) {
            return BadDataError(StrCat(source, ":", line_no,
                                       ": expected a tab-separated header with an entity and "
                                       "a label column"));
          }
          TESSEL_ASSIGN_OR_RETURN(entity_col, FindColumn(cells, options.entity_column, 0, source));
          TESSEL_ASSIGN_OR_RETURN(label_col, FindColumn(cells, options.label_column, num_cols - 1, source));
          return Status::Ok();
        }
        if (cells.size() <= std::max(entity_col, label_col)) {
          return BadDataError(
              StrCat(source, ":", line_no, ": expected ", num_cols, " tab-separated columns, found ", cells.size()));
        }
        const std::string_view entity = cells[entity_col];
        const std::string_view label = cells[label_col];
        if (entity.empty() || label.empty()) {
          return BadDataError(StrCat(source, ":", line_no, ": empty entity or label"));
        }
        LabelRow& row = rows.emplace_back();
        row.source = StrCat(source, ":", line_no);
        const bool is_term = entity.front() == '<' || entity.substr(0, 2) == "_:";
        row.entity = is_term ? std::string(entity) : StrCat("<", entity, ">");
        row.label = std::string(label);
        return Status::Ok();
      }));
  if (!have_header) return BadDataError(StrCat(path, ": empty label file"));
  return rows;
}

// Applies the label files to the single node type of `g`.
Status ApplyLabels(const RdfImportOptions& options, const TripleCollector& collector, HeteroGraph* g) {
  const std::string* files[3] = {&options.train_labels, &options.val_labels, &options.test_labels};
  std::vector<LabelRow> rows[3];
  std::set<std::string> classes;
  bool any = false;
  for (int m = 0; m < 3; ++m) {
    if (files[m]->empty()) continue;
    any = true;
    TESSEL_ASSIGN_OR_RETURN(rows[m], ReadLabelFile(*files[m], options));
    for (const auto& row : rows[m]) classes.insert(row.label);
  }
  if (!any) return Status::Ok();
  g->class_names.assign(classes.begin(), classes.end());
  g->num_classes = static_cast<int64_t>(classes.size());
  std::map<std::string, int64_t> class_index;
  for (size_t c = 0; c < g->class_names.size(); ++c) class_index[g->class_names[c]] = static_cast<int64_t>(c);

  NodeType& t = g->node_types[0];
  const auto n = static_cast<size_t>(t.count);
  t.labels.assign(n, -1);
  std::vector<const LabelRow*> labelled_by(n, nullptr);
  std::vector<uint8_t>* masks[3] = {&t.train_mask, &t.val_mask, &t.test_mask};
  for (int m = 0; m < 3; ++m) {
    if (files[m]->empty()) continue;
    masks[m]->assign(n, 0);
    for (const auto& row : rows[m]) {
      const int64_t id = collector.FindNode(row.entity);
      if (id < 0) return BadDataError(StrCat(row.source, ": entity ", row.entity, " is not in the graph"));
      const int64_t label = class_index.at(row.label);
      if (t.labels[id] >= 0 && t.labels[id] != label) {
        return BadDataError(StrCat(row.source, ": entity ", row.entity, " has label '", row.label, "' but ",
                                   labelled_by[id]->source, " gave it '", labelled_by[id]->label, "'"));
      }
      t.labels[id] = label;
      labelled_by[id] = &row;
      (*masks[m])[id] = 1;
    }
  }
  return Status::Ok();
}

}  // namespace

Result<bool> ParseNTriplesLine(std::string_view line, NTriple* out) { return NTriplesParser(line).Parse(out); }

Result<HeteroGraph> ImportRdf(const RdfImportOptions& options) {
  if (options.triples.empty()) return UsageError("import rdf: no --triples file given");
  TripleCollector collector;
  NTriple triple;
  TESSEL_RETURN_IF_ERROR(ForEachLine(
      options.triples, {}, [&](const std::string& source, int64_t line_no, std::string_view line) -> Status {
        Result<bool> parsed = NTriplesParser(line).Parse(&triple);
        if (!parsed.ok()) {
          return BadDataError(StrCat(source, ":", line_no, ": malformed triple: ", parsed.status().message()));
        }
        if (!*parsed) return Status::Ok();
        const int64_t s = collector.InternNode(triple.subject);
        // Relation names are the bare predicate IRI.
        const int32_t p =
            collector.InternRelation(std::string_view(triple.predicate).substr(1, triple.predicate.size() - 2));
        const int64_t o = collector.InternNode(triple.object);
        collector.Add(s, p, o);
        return Status::Ok();
      }));
  if (collector.num_triples_added() == 0) return BadDataError(StrCat(options.triples, ": no triples found"));
  HeteroGraph g = collector.Build({.add_inverse = true, .add_self_loop = true});
  TESSEL_RETURN_IF_ERROR(ApplyLabels(options, collector, &g));
  g.name = options.name.empty() ? StemOf(options.triples) : options.name;
  std::string fp = StrCat("tessel-import-rdf v1; triples=", DescribeSourceFile(options.triples));
  if (!options.train_labels.empty()) fp += StrCat("; train=", DescribeSourceFile(options.train_labels));
  if (!options.val_labels.empty()) fp += StrCat("; val=", DescribeSourceFile(options.val_labels));
  if (!options.test_labels.empty()) fp += StrCat("; test=", DescribeSourceFile(options.test_labels));
  fp += StrCat("; entity_column=", options.entity_column, "; label_column=", options.label_column, "; name=", g.name);
  g.source_fingerprint = std::move(fp);
  return g;
}

}  // namespace tessel::storage
