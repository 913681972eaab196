#include <canopy/backends/backend_factory.hpp>

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/model_fingerprint.hpp>
#include <canopy/backends/models/torch_backend.hpp>

#include <filesystem>
#include <stdexcept>

namespace canopy::backends {

namespace {

[[noreturn]] void unknown_kind(const backend_spec& spec) {
  throw std::invalid_argument("unknown backend '" + spec.kind + "' (known: mock, torch)");
}

} // namespace

synthetic_spec builtin_model() {
  synthetic_spec spec;
  spec.arch = architecture::llama;
  spec.hidden = 256;
  spec.layers = 4;
  spec.heads = 8;
  spec.kv_heads = 4;
  spec.vocab = 4096;
  spec.context = 2048;
  spec.seed = 1;
  return spec;
}

std::unique_ptr<backend_i> make_backend(const backend_spec& spec) {
  if (spec.kind == "mock") {
    // The mock computes on the host; accepting "cuda:N" would let a configuration
    // look as if it exercised a device when it does not.
    if (spec.device != "cpu")
      throw std::invalid_argument("backend 'mock' runs on the CPU only; device '" +
                                  spec.device + "' is not supported (use \"cpu\")");
    return make_mock_backend(spec.mock);
  }
  if (spec.kind == "torch")
    return make_torch_backend(spec.model.empty()
                                  ? make_synthetic_checkpoint(builtin_model())
                                  : load_checkpoint(spec.model),
                              spec.device, spec.torch);
  unknown_kind(spec);
}

model_info describe_model(const backend_spec& spec) {
  model_info info;
  if (spec.kind == "mock") {
    info.name = info.architecture = "mock";
    info.vocab_size = spec.mock.vocab_size;
    info.context_length = spec.mock.context_length;
    info.kv_window = spec.mock.kv_window;
    info.dtype = "float32";
    info.fingerprint = mock_fingerprint(spec.mock);
    return info;
  }
  if (spec.kind != "torch")
    unknown_kind(spec);
  const auto builtin = builtin_model();
  const model_config config = served_config(
      spec.model.empty() ? synthetic_config(builtin) : load_model_config(spec.model),
      spec.torch);
  info.architecture = to_string(config.arch);
  info.name = info.architecture + " " +
              (spec.model.empty() ? "synthetic " + info.architecture + " seed " +
                                        std::to_string(builtin.seed)
                                  : spec.model);
  info.vocab_size = config.vocab_size;
  info.context_length = config.context_length;
  info.kv_window = config.sliding_window;
  info.dtype = spec.torch.dtype;
  info.kv_dtype = served_kv_dtype(spec.torch);
  info.weight_kernels = weight_kernels_here(spec.torch); // what make_backend's would say
  return info;
}

void backend_i::add_adapter(const std::string& name, const lora_adapter_files& files) {
  (void)files;
  throw std::invalid_argument("adapter '" + name + "': the " + info().architecture +
                              " backend has no adapters");
}

std::string public_name(const model_info& info) {
  const auto space = info.name.find(' ');
  if (space == std::string::npos)
    return info.name;
  return info.name.substr(0, space + 1) +
         std::filesystem::path(info.name.substr(space + 1)).filename().string();
}

} // namespace canopy::backends
