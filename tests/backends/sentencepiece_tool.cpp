// Test helper: SentencePiece itself, in a process of its own (no LibTorch, whose
// libprotobuf clashes with libsentencepiece's embedded copy). The SentencePiece test runs
// it to train a tiny model and to get SentencePiece's own encodings as the reference.
//
//   canopy_spm_tool train <corpus file> <model prefix>   -> <prefix>.model
//   canopy_spm_tool encode <model file> <text as hex>    -> "<id> <id> ...\n<Decode(ids)
//   as hex>\n"
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "train") {
    const auto status = sentencepiece::SentencePieceTrainer::Train(
        std::unordered_map<std::string, std::string>{
            {"input", argv[2]},
            {"model_prefix", argv[3]},
            {"model_type", "bpe"},
            {"vocab_size", "300"},
            {"byte_fallback", "true"},
            {"character_coverage", "1.0"},
            {"hard_vocab_limit", "false"},
            {"minloglevel", "2"},
        });
    if (!status.ok()) {
      std::fprintf(stderr, "train: %s\n", status.ToString().c_str());
      return 1;
    }
    return 0;
  }
  if (argc == 4 && std::string(argv[1]) == "encode") {
    sentencepiece::SentencePieceProcessor processor;
    if (const auto status = processor.Load(argv[2]); !status.ok()) {
      std::fprintf(stderr, "load: %s\n", status.ToString().c_str());
      return 1;
    }
    const std::string hex = argv[3];
    std::string text;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
      text += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    std::vector<int> ids;
    std::string decoded;
    if (!processor.Encode(text, &ids).ok() || !processor.Decode(ids, &decoded).ok())
      return 1;
    for (std::size_t i = 0; i < ids.size(); ++i)
      std::printf(i == 0 ? "%d" : " %d", ids[i]);
    std::printf("\n");
    for (unsigned char c : decoded)
      std::printf("%02x", c);
    std::printf("\n");
    return 0;
  }
  std::fprintf(stderr, "usage: %s train <corpus> <prefix> | encode <model> <hex>\n",
               argv[0]);
  return 2;
}
