#include "http_load/http_load_server_info.hpp"

#include "http_load/http_load_connection.hpp"
#include "http_load/http_load_request.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace canopy::app {

namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

constexpr std::chrono::seconds answer_limit{10};

} // namespace

namespace {

/// GET `path`'s JSON body; throws naming the target and what failed.
nlohmann::json get_json(const http_load_options& options, const std::string& path) {
  asio::io_context io;
  boost::beast::tcp_stream stream(
      std::move(connect_all(io, options.target, 1, answer_limit).front()));
  const auto request = get_request(options, path);
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
  const std::string what = "GET " + options.target.url + path + ": ";
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
  auto doc = nlohmann::json::parse(response.body(), nullptr, false);
  if (doc.is_discarded())
    throw std::runtime_error(what + "the answer is not JSON");
  return doc;
}

} // namespace

served_model fetch_served_model(const http_load_options& options) {
  served_model model;
  const auto& p = options.payloads;
  const bool openai =
      std::find(p.begin(), p.end(), http_payload::completions) != p.end() ||
      std::find(p.begin(), p.end(), http_payload::prefill) != p.end();
  if (options.vocab_size > 0) {
    // Another server: its context is not known here, so it judges the lengths.
    model = {"(vocabulary from --vocab-size)", options.vocab_size,
             std::numeric_limits<std::size_t>::max(), ""};
  } else {
    const auto doc = get_json(options, "/v1/model");
    try {
      model = {doc.at("name").get<std::string>(), doc.at("vocab_size").get<std::size_t>(),
               doc.at("context_length").get<std::size_t>(), ""};
      if (model.vocab_size == 0 || model.context_length == 0)
        throw std::runtime_error("vocab_size and context_length must be positive");
    } catch (const std::exception& e) {
      throw std::runtime_error("GET " + options.target.url +
                               "/v1/model: not the model's " + "description (" +
                               e.what() + ")");
    }
  }
  // The id OpenAI's routes answer to (Canopy has them only with a tokenizer).
  if (openai) {
    const auto models = get_json(options, "/v1/models");
    try {
      model.openai_id = models.at("data").at(0).at("id").get<std::string>();
    } catch (const std::exception& e) {
      throw std::runtime_error("GET " + options.target.url + "/v1/models: no model id (" +
                               e.what() + ")");
    }
  }
  return model;
}

} // namespace canopy::app
