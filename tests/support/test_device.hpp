#pragma once
// The device that the device-parametrised tests (model fidelity, KV formats, the host
// tier, the torch backend's passes) run their torch backends on: CANOPY_TEST_DEVICE, else
// "cpu". tests/CMakeLists.txt runs those tests a second time with
// CANOPY_TEST_DEVICE=cuda:0 and the ctest label `cuda` when configured with
// -DCANOPY_TEST_CUDA=ON (scripts/gpu/device-run.sh does), so one source checks both
// devices against the oracle. Thread contract: pure functions (read the environment).

#include <cstdlib>
#include <string>

namespace canopy::testing {

inline std::string test_device() {
  const char* device = std::getenv("CANOPY_TEST_DEVICE");
  return device != nullptr && *device != '\0' ? std::string(device) : std::string("cpu");
}

inline bool testing_on_cuda() {
  return test_device().rfind("cuda", 0) == 0;
}

} // namespace canopy::testing
