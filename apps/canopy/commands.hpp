#pragma once
// The subcommands main dispatches to. Each takes the arguments after its name, returns
// the exit code, and throws usage_error or canopy::error for main to report.
// Thread contract: run on main's thread.

#include <string>
#include <vector>

namespace canopy::app {

int bench_command(const std::vector<std::string>& args);
int logprobs_command(const std::vector<std::string>& args);
int sample_command(const std::vector<std::string>& args);
int tokenize_command(const std::vector<std::string>& args);
int detokenize_command(const std::vector<std::string>& args);
int vocab_command(const std::vector<std::string>& args);
int make_model_command(const std::vector<std::string>& args);
int make_adapter_command(const std::vector<std::string>& args);
int serve_command(const std::vector<std::string>& args);
int worker_command(const std::vector<std::string>& args);

} // namespace canopy::app
