// CheckElfFile: a real plugin passes; copies cut short at every kind of place, a text file, an ELF file of
// another kind and one whose program headers point past its end are refused with a PluginError that
// names the file and the cause. And the loader never gets to dlopen them (no SIGBUS).
#include "workers/plugin_host/elf_check.h"

#include <elf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "test_dirs.h"
#include "workers/plugin_host/kernel_registry.h"

namespace tessel::workers {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

std::vector<char> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string WriteFile(const TempDir& dir, const std::string& name, const std::vector<char>& bytes) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

TEST(ElfCheck, ABuiltPluginPasses) {
  const Status st = CheckElfFile(testing::ExamplePlugin());
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(ElfCheck, EveryTruncationIsRefusedAndNeverLoaded) {
  const std::vector<char> whole = ReadAll(testing::ExamplePlugin());
  ASSERT_GT(whole.size(), 8192u);
  TempDir dir;
  // Inside the ELF header, inside the program headers, inside the first segments, near the end.
  for (const size_t cut :
       {size_t{0}, size_t{10}, size_t{40}, size_t{100}, size_t{3000}, whole.size() / 2, whole.size() - 1}) {
    const std::string path = WriteFile(dir, "libtessel_cut" + std::to_string(cut) + ".so",
                                       std::vector<char>(whole.begin(), whole.begin() + cut));
    const Status st = CheckElfFile(path);
    ASSERT_EQ(st.code(), Code::kPlugin) << "cut at " << cut << ": " << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr(path));
    if (cut >= sizeof(Elf64_Ehdr)) {
      EXPECT_THAT(st.message(), HasSubstr("truncated")) << cut;
    }
    KernelRegistry registry(Logger("test", LogLevel::kError));
    const Status load = registry.LoadPlugin(path);
    EXPECT_EQ(load.code(), Code::kPlugin) << "cut at " << cut;
  }
}

TEST(ElfCheck, NotElfOtherKindsAndBadHeadersAreNamed) {
  TempDir dir;
  const std::string text = WriteFile(dir, "libtessel_text.so", {'h', 'e', 'l', 'l', 'o', '\n'});
  EXPECT_THAT(CheckElfFile(text).message(), HasSubstr("not an ELF file"));

  std::vector<char> whole = ReadAll(testing::ExamplePlugin());
  Elf64_Ehdr eh;
  std::memcpy(&eh, whole.data(), sizeof eh);

  std::vector<char> exec = whole;
  reinterpret_cast<Elf64_Ehdr*>(exec.data())->e_type = ET_EXEC;
  EXPECT_THAT(CheckElfFile(WriteFile(dir, "libtessel_exec.so", exec)).message(), HasSubstr("not a shared object"));

  std::vector<char> arm = whole;
  reinterpret_cast<Elf64_Ehdr*>(arm.data())->e_machine = EM_RISCV;
  EXPECT_THAT(CheckElfFile(WriteFile(dir, "libtessel_riscv.so", arm)).message(), HasSubstr("another machine"));

  std::vector<char> ilp32 = whole;
  ilp32[EI_CLASS] = ELFCLASS32;
  EXPECT_THAT(CheckElfFile(WriteFile(dir, "libtessel_32.so", ilp32)).message(), HasSubstr("32-bit"));

  // The size is right but a segment claims bytes past the end: a corrupt header, not a short copy.
  std::vector<char> far = whole;
  auto* ph = reinterpret_cast<Elf64_Phdr*>(far.data() + eh.e_phoff);
  for (int i = 0; i < eh.e_phnum; ++i) {
    if (ph[i].p_type == PT_LOAD) {
      ph[i].p_filesz = whole.size() * 4;
      break;
    }
  }
  const Status st = CheckElfFile(WriteFile(dir, "libtessel_far.so", far));
  EXPECT_THAT(st.message(), HasSubstr("PT_LOAD segment"));
  EXPECT_THAT(st.message(), HasSubstr("the file has " + std::to_string(whole.size())));
}

}  // namespace
}  // namespace tessel::workers
