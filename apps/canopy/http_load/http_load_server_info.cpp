#include "http_load/http_load_server_info.hpp"

#include "http_load/http_load_connection.hpp"
#include "http_load/http_load_request.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace canopy::app {

namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

constexpr std::chrono::seconds answer_limit{10};

} // namespace

served_model fetch_served_model(const http_load_options& options) {
  asio::io_context io;
  boost::beast::tcp_stream stream(
      std::move(connect_all(io, options.target, 1, answer_limit).front()));
  const auto request = get_request(options, "/v1/model");
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> response;
  boost::system::error_code failure;
  stream.expires_after(answer_limit);
  asio::async_write(stream, asio::buffer(request),
                    [&](boost::system::error_code ec, std::size_t) {
                      if (ec) {
                        failure = ec;
                        return;
                      }
                      http::async_read(stream, buffer, response,
                                       [&](boost::system::error_code ec, std::size_t) {
                                         failure = ec;
                                       });
                    });
  io.restart();
  io.run();
  const std::string what = "GET " + options.target.url + "/v1/model: ";
  if (failure)
    throw std::runtime_error(what + failure.message());
  if (response.result_int() == 401)
    throw std::runtime_error(what + "HTTP 401 unauthorized (" +
                             (options.auth_token.empty()
                                  ? "the server wants a token: --auth-token-file F"
                                  : "the server refused the token of --auth-token-file") +
                             ")");
  if (response.result_int() != 200)
    throw std::runtime_error(what + "HTTP " + std::to_string(response.result_int()) +
                             ": " + response.body().substr(0, 200));
  try {
    const auto doc = nlohmann::json::parse(response.body());
    served_model model{doc.at("name").get<std::string>(),
                       doc.at("vocab_size").get<std::size_t>(),
                       doc.at("context_length").get<std::size_t>()};
    if (model.vocab_size == 0 || model.context_length == 0)
      throw std::runtime_error("vocab_size and context_length must be positive");
    return model;
  } catch (const std::exception& e) {
    throw std::runtime_error(what + "not the model's description (" + e.what() + ")");
  }
}

} // namespace canopy::app
