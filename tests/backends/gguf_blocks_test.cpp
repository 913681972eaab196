// Block records as llama.cpp lays them out: the tensors of gguf/blocks.gguf, which
// llama.cpp's gguf-py quantized and wrote, read back to exactly the values gguf-py's
// own dequantizer gives (blocks.json), both as load_weight dequantizes them and as a
// block_matrix built from the records holds them (taken, not requantized).
#include <canopy/backends/checkpoints/gguf_file.hpp>

#include "models/torch_weights.hpp"
#include "models/weight_blocks.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace {

using namespace canopy::backends;

const std::filesystem::path fixture_dir = CANOPY_GGUF_FIXTURE_DIR;

struct fixture {
  gguf_file file{fixture_dir / "blocks.gguf"};
  checkpoint ckpt;
  nlohmann::json expected;

  fixture() {
    ckpt.source = file.source();
    for (const auto& t : file.tensors())
      ckpt.tensors.emplace(t.name, tensor_view{*value_of(weight_dtype_names, t.type_name),
                                               t.shape, t.data});
    ckpt.storage = file.storage();
    std::ifstream in(fixture_dir / "blocks.json");
    expected = nlohmann::json::parse(in);
  }
  std::vector<float> values(const std::string& name) const {
    return expected.at(name).at("values").get<std::vector<float>>();
  }
};

TEST(gguf_blocks, every_type_loads_to_gguf_pys_values) {
  const fixture f;
  for (const char* name : {"q8", "q4", "f16", "bf16", "f32"}) {
    const auto got = load_weight(f.ckpt, name, at::kFloat, at::kCPU).contiguous();
    const auto want = f.values(name);
    ASSERT_EQ(static_cast<std::size_t>(got.numel()), want.size()) << name;
    EXPECT_EQ(got.sizes().vec(), f.ckpt.tensors.at(name).shape) << name;
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got.data_ptr<float>()[i], want[i]) << name << " value " << i;
  }
}

TEST(gguf_blocks, a_block_matrix_of_records_holds_them_exactly) {
  const fixture f;
  for (const auto& [name, format] :
       {std::pair{"q8", block_format::q8_0}, std::pair{"q4", block_format::q4_0}}) {
    const auto& view = f.ckpt.tensors.at(name);
    const auto rows = view.shape[0], inputs = view.shape[1];
    std::vector<const std::byte*> records;
    for (std::int64_t r = 0; r < rows; ++r)
      records.push_back(view.data + r * (inputs / 32) * record_bytes(view.dtype));
    const block_matrix m(format, records, inputs);
    const auto want = f.values(name);
    std::vector<float> row(static_cast<std::size_t>(inputs));
    for (std::int64_t r = 0; r < rows; ++r) {
      m.dequantize_row(r, row.data());
      for (std::int64_t j = 0; j < inputs; ++j)
        ASSERT_EQ(row[static_cast<std::size_t>(j)],
                  want[static_cast<std::size_t>(r * inputs + j)])
            << name << " row " << r << " value " << j;
    }
  }
}

} // namespace
