// canopy worker: lends this machine's devices to fronts on other machines
// (docs/across-machines.md). It loads the model as an engine would (one worker per
// device) and publishes a gate through CAF's network layer; fronts name it in
// remote_workers.

#include "cli_args.hpp"
#include "commands.hpp"

#include <canopy/worker_node.hpp>

#include <csignal>
#include <iostream>
#include <stdexcept>
#include <unistd.h>

namespace canopy::app {

namespace {

const char* const usage =
    "Usage: canopy worker [--listen HOST:PORT] [engine settings]\n\n"
    "Loads the model (one worker per device: --devices, --workers) and serves it to\n"
    "fronts that name HOST:PORT in their remote_workers (docs/across-machines.md: "
    "\"Across machines\").\n"
    "Binds 127.0.0.1 unless told otherwise; any other address needs\n"
    "--cluster_token_file (the fronts use the same file). --tls_cert, --tls_key and\n"
    "--tls_ca turn on TLS. Prints 'canopy worker: listening on HOST:PORT, model NAME,\n"
    "devices [...]' once it accepts fronts. SIGTERM or SIGINT: tells the fronts it\n"
    "leaves, finishes the passes it holds, exits 0.\n";

std::vector<flag_spec> worker_flags() {
  return {
      {"listen", "HOST:PORT",
       "address to serve fronts on (default 127.0.0.1:7101; port 0: any "
       "free port, printed)"},
  };
}

listen_address parse_listen(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw usage_error("--listen " + text + ": expected HOST:PORT");
  listen_address out;
  out.host = text.substr(0, colon);
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']')
    out.host = out.host.substr(1, out.host.size() - 2);
  const auto port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) > 65535)
    throw usage_error("--listen " + text + ": the port must be in 0..65535");
  out.port = static_cast<std::uint16_t>(std::stoul(port));
  return out;
}

// Signals are received through a pipe: libraries start threads before main (OpenBLAS's
// pool), so blocking the signals for sigwait cannot cover every thread, while a
// handler runs on whichever thread the signal lands on.
int stop_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int signal) {
  const char byte = static_cast<char>(signal);
  [[maybe_unused]] auto ignored = ::write(stop_pipe[1], &byte, 1);
}

/// Blocks until SIGTERM or SIGINT; returns which.
int wait_for_stop_signal() {
  char byte = 0;
  while (::read(stop_pipe[0], &byte, 1) != 1) {
  }
  return byte;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items)
    out += (out.empty() ? "" : ", ") + item;
  return out;
}

} // namespace

int worker_command(const std::vector<std::string>& argv) {
  const auto args = parse_command_line(argv, usage, worker_flags());
  if (args.help)
    return 0;
  const auto listen = parse_listen(args.text("listen", "127.0.0.1:7101"));
  std::signal(SIGPIPE, SIG_IGN);
  worker_node node{args.config, listen, [](const std::string& line) {
                     std::cerr << "canopy worker: " << line << std::endl;
                   }};
  // After loading the model: LibTorch installs handlers of its own while it loads.
  if (::pipe(stop_pipe) != 0)
    throw std::runtime_error("cannot make a pipe for the stop signals");
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  std::cout << "canopy worker: listening on " << node.address() << ", model "
            << node.model().name << ", devices [" << joined(node.devices()) << "]"
            << std::endl;
  const int received = wait_for_stop_signal();
  std::cerr << "canopy worker: " << (received == SIGTERM ? "SIGTERM" : "SIGINT")
            << ": finishing the passes it holds" << std::endl;
  node.drain();
  std::cerr << "canopy worker: stopped" << std::endl;
  return 0;
}

} // namespace canopy::app
