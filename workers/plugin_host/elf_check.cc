#include "workers/plugin_host/elf_check.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/logging.h"

namespace tessel::workers {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kMachine = EM_X86_64;
constexpr const char* kMachineName = "x86-64";
#elif defined(__aarch64__)
constexpr uint16_t kMachine = EM_AARCH64;
constexpr const char* kMachineName = "AArch64";
#else
#error "CheckElfFile knows x86-64 and AArch64 only"
#endif
static_assert(sizeof(void*) == 8, "a 64-bit host");

const char* SegmentName(uint32_t type) {
  switch (type) {
    case PT_LOAD:
      return "PT_LOAD";
    case PT_DYNAMIC:
      return "PT_DYNAMIC";
    case PT_INTERP:
      return "PT_INTERP";
    case PT_NOTE:
      return "PT_NOTE";
    case PT_GNU_EH_FRAME:
      return "PT_GNU_EH_FRAME";
    default:
      return "a";
  }
}

// Reads exactly `n` bytes at `offset`; false at end of file or on an error.
bool ReadAt(int fd, void* out, size_t n, uint64_t offset) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

// a + b <= limit, without overflow.
bool Within(uint64_t a, uint64_t b, uint64_t limit) { return a <= limit && b <= limit - a; }

}  // namespace

Status CheckElfFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return PluginError(StrCat("cannot load plugin ", path, ": ", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) return PluginError(StrCat("cannot load plugin ", path, ": cannot stat it"));
  const auto size = static_cast<uint64_t>(st.st_size);
  const std::string refusing = StrCat("refusing plugin ", path, ": ");

  Elf64_Ehdr eh{};
  if (size < EI_NIDENT || !ReadAt(fd, eh.e_ident, EI_NIDENT, 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    return PluginError(StrCat(refusing, "not an ELF file (", size,
                              " bytes; a plugin is a shared object built with "
                              "tessel_add_plugin)"));
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64)
    return PluginError(StrCat(refusing, "a 32-bit ELF file; this host is 64-bit"));
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return PluginError(StrCat(refusing, "a big-endian ELF file"));
  if (size < sizeof eh || !ReadAt(fd, &eh, sizeof eh, 0)) {
    return PluginError(StrCat(refusing, "truncated: ", size, " bytes, less than an ELF header (", sizeof eh, ")"));
  }
  if (eh.e_type != ET_DYN) {
    return PluginError(StrCat(refusing, "an ELF file but not a shared object (e_type ", eh.e_type, ")"));
  }
  if (eh.e_machine != kMachine) {
    return PluginError(
        StrCat(refusing, "built for another machine (e_machine ", eh.e_machine, "; this host is ", kMachineName, ")"));
  }
  if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(Elf64_Phdr)) {
    return PluginError(
        StrCat(refusing, "corrupt ELF header: ", eh.e_phnum, " program headers of ", eh.e_phentsize, " bytes"));
  }
  const uint64_t ph_bytes = uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr);
  if (!Within(eh.e_phoff, ph_bytes, size)) {
    return PluginError(StrCat(refusing, "truncated or corrupt: its program headers end at byte ", eh.e_phoff + ph_bytes,
                              ", the file has ", size));
  }
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!ReadAt(fd, ph.data(), ph_bytes, eh.e_phoff)) {
    return PluginError(StrCat(refusing, "cannot read its program headers"));
  }
  bool loadable = false;
  for (size_t i = 0; i < ph.size(); ++i) {
    const Elf64_Phdr& p = ph[i];
    if (p.p_type == PT_LOAD) loadable = true;
    if (p.p_type == PT_NULL || p.p_filesz == 0) continue;
    if (!Within(p.p_offset, p.p_filesz, size)) {
      return PluginError(StrCat(refusing, "truncated or corrupt: program header ", i, " (", SegmentName(p.p_type),
                                " segment) ends at byte ", p.p_offset + p.p_filesz, ", the file has ", size,
                                " (a partial copy? rebuild or copy it again)"));
    }
  }
  if (!loadable) return PluginError(StrCat(refusing, "corrupt: no loadable segment"));
  if (eh.e_shnum > 0 && !Within(eh.e_shoff, uint64_t{eh.e_shnum} * eh.e_shentsize, size)) {
    return PluginError(StrCat(refusing, "truncated or corrupt: its section headers end at byte ",
                              eh.e_shoff + uint64_t{eh.e_shnum} * eh.e_shentsize, ", the file has ", size));
  }
  return Status();
}

}  // namespace tessel::workers
