// One C++ runtime per process. LibTorch, CAF and libsentencepiece use the shared
// libstdc++; an executable that carries a static copy of its own (-static-libstdc++ in
// LDFLAGS, or a toolchain that links it so) hands objects made by one copy to the other
// to free: on a GPU machine that build crashed (free(): invalid pointer) in std::locale,
// under SentencePiece, and in std::filesystem, in tests that had nothing else wrong. This
// test names the build configuration instead of leaving it to crash elsewhere.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <locale>
#include <string>

namespace {

TEST(cxx_runtime, the_program_uses_the_shared_libstdcxx) {
  // The classic locale is an object inside libstdc++ itself (not one the program could
  // hold a copy of): the file it lies in is the runtime this program runs on.
  const void* inside_the_runtime = &std::locale::classic();
  Dl_info info{};
  ASSERT_NE(::dladdr(inside_the_runtime, &info), 0);
  const std::string file = info.dli_fname != nullptr ? info.dli_fname : "";
  EXPECT_NE(file.find("libstdc++.so"), std::string::npos)
      << "std::locale::classic() lies in " << file
      << ": this program carries a static libstdc++ beside the shared one its libraries "
         "use. "
         "Link it dynamically (no -static-libstdc++ in LDFLAGS or CMAKE_*_LINKER_FLAGS; "
         "g++ "
         "must find libstdc++.so, from its libstdc++-N-dev package).";
}

} // namespace
