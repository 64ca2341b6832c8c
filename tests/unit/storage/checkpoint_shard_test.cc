// Checkpoint shards (storage/checkpoint_shard.*): round trip, atomic replacement, and damage on disk
// detected by the Fletcher32 checksums rather than read back as numbers.
#include "storage/checkpoint_shard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "tests/unit/storage/test_util.h"

namespace tessel::storage {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;

template <typename T>
Tensor Filled(DType dtype, std::vector<int64_t> shape, T first) {
  Tensor t = Tensor::Empty(dtype, std::move(shape)).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(first + static_cast<T>(i));
  return t;
}

std::vector<char> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(CheckpointShard, RoundTripsEveryDtypeAndShape) {
  ScratchDir dir;
  const std::vector<NamedTensor> in = {
      {"param/h0.qkvw", Filled<float>(DType::kF32, {3, 5}, 0.25f)},
      {"adam/step", Filled<int64_t>(DType::kI64, {1}, 41)},
      {"runtime/loss", Filled<double>(DType::kF64, {4}, 1.5)},
      {"scalar", Filled<int32_t>(DType::kI32, {}, 7)},
      {"mask", Filled<uint8_t>(DType::kU8, {2, 2, 2}, 1)},
      {"llm/val_loss", Tensor::Empty(DType::kF64, {0, 2}).value()},
  };
  const std::string path = dir.File("worker-0.h5");
  ASSERT_TRUE(WriteCheckpointShard(path, in).ok());
  auto out = ReadCheckpointShard(path);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ((*out)[i].name, in[i].name);
    EXPECT_EQ((*out)[i].tensor.dtype(), in[i].tensor.dtype()) << in[i].name;
    EXPECT_EQ((*out)[i].tensor.shape(), in[i].tensor.shape()) << in[i].name;
    ASSERT_EQ((*out)[i].tensor.nbytes(), in[i].tensor.nbytes());
    EXPECT_EQ(0, std::memcmp((*out)[i].tensor.raw(), in[i].tensor.raw(), in[i].tensor.nbytes())) << in[i].name;
  }
}

TEST(CheckpointShard, RewriteReplacesTheFileAndLeavesNoTemporary) {
  ScratchDir dir;
  const std::string path = dir.File("worker-0.h5");
  ASSERT_TRUE(WriteCheckpointShard(path, {{"a", Filled<float>(DType::kF32, {4}, 1.0f)}}).ok());
  ASSERT_TRUE(WriteCheckpointShard(path, {{"b", Filled<float>(DType::kF32, {2}, 9.0f)}}).ok());
  EXPECT_EQ(dir.List(), std::vector<std::string>{"worker-0.h5"});
  auto out = ReadCheckpointShard(path);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].name, "b");
  EXPECT_EQ((*out)[0].tensor.data<float>()[1], 10.0f);
}

// Issue 32 (safe creation): a link planted at the shard's name is refused (exit 6 naming it), and the
// file it points at is untouched.
TEST(CheckpointShard, ALinkPlantedAtTheShardIsRefusedAndNotFollowed) {
  ScratchDir dir;
  const std::string victim = dir.File("victim.txt");
  std::ofstream(victim) << "keep me";
  const std::string path = dir.File("worker-0.h5");
  std::filesystem::create_symlink(victim, path);
  const Status st = WriteCheckpointShard(path, {{"a", Filled<float>(DType::kF32, {4}, 1.0f)}});
  EXPECT_EQ(st.exit_code(), 6) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr(path));
  EXPECT_EQ(ReadBytes(victim), (std::vector<char>{'k', 'e', 'e', 'p', ' ', 'm', 'e'}));
  EXPECT_TRUE(std::filesystem::is_symlink(path));
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"victim.txt", "worker-0.h5"}));
}

TEST(CheckpointShard, AFlippedDataByteIsAChecksumErrorNamingTheTensor) {
  ScratchDir dir;
  const std::string path = dir.File("worker-1.h5");
  // A pattern that occurs once in the file, to find the tensor's bytes there.
  Tensor t = Filled<float>(DType::kF32, {50000}, 1000.0f);
  ASSERT_TRUE(WriteCheckpointShard(path, {{"param/wte", t}}).ok());
  std::vector<char> bytes = ReadBytes(path);
  const char* needle = static_cast<const char*>(t.raw()) + 4 * 20000;
  auto at = std::search(bytes.begin(), bytes.end(), needle, needle + 64);
  ASSERT_NE(at, bytes.end());
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(at - bytes.begin() + 2);
    const char flipped = static_cast<char>(*(at + 2) ^ 0x10);
    f.write(&flipped, 1);
  }
  auto out = ReadCheckpointShard(path);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Code::kStorage);
  EXPECT_THAT(out.status().message(), HasSubstr("checksum"));
  EXPECT_THAT(out.status().message(), HasSubstr("param/wte"));
  EXPECT_THAT(out.status().message(), HasSubstr(path));
}

TEST(CheckpointShard, MissingTruncatedOrForeignFilesAreStorageErrors) {
  ScratchDir dir;
  auto missing = ReadCheckpointShard(dir.File("nope.h5"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kStorage);
  const std::string path = dir.File("w.h5");
  ASSERT_TRUE(WriteCheckpointShard(path, {{"a", Filled<float>(DType::kF32, {100000}, 1.0f)}}).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  auto truncated = ReadCheckpointShard(path);
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().code(), Code::kStorage);
  EXPECT_THAT(truncated.status().message(), HasSubstr(path));
  std::ofstream(dir.File("text.h5")) << "not hdf5";
  auto foreign = ReadCheckpointShard(dir.File("text.h5"));
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.status().code(), Code::kStorage);
}

TEST(CheckpointShard, AnUnwritableDirectoryIsAStorageErrorNamingThePath) {
  ScratchDir dir;
  std::ofstream(dir.File("file")) << "x";
  const Status st =
      WriteCheckpointShard(dir.File("file") + "/worker-0.h5", {{"a", Filled<float>(DType::kF32, {1}, 1.0f)}});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kStorage);
  EXPECT_THAT(st.message(), HasSubstr("file/worker-0.h5"));
}

TEST(DigestFile, IsZlibCrc32AndSize) {
  ScratchDir dir;
  std::ofstream(dir.File("check")) << "123456789";
  auto d = DigestFile(dir.File("check"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->bytes, 9);
  EXPECT_EQ(d->crc32, 0xCBF43926u);  // the CRC-32 check value
  EXPECT_FALSE(DigestFile(dir.File("absent")).ok());
}

TEST(CheckpointPaths, NameStepsAndWorkers) {
  EXPECT_EQ(CheckpointStepDir("/ck", 12), "/ck/step-12");
  EXPECT_EQ(CheckpointShardPath("/ck/step-12", 3), "/ck/step-12/worker-3.h5");
}

}  // namespace
}  // namespace tessel::storage
