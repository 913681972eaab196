#include <canopy/server/transport/body_stream.hpp>

#include <utility>

namespace canopy::server {

void body_stream::push(std::string piece) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_ || piece.empty())
      return;
    waiting_ += piece;
    wake = wake_;
  }
  if (wake)
    wake();
}

void body_stream::end() {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_)
      return;
    ended_ = true;
    wake = wake_;
  }
  if (wake)
    wake();
}

void body_stream::on_ready(std::function<void()> wake) {
  bool ready;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_ = wake;
    ready = ended_ || !waiting_.empty();
  }
  if (ready && wake)
    wake();
}

body_stream::taken body_stream::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  taken out{std::move(waiting_), ended_};
  waiting_.clear();
  return out;
}

} // namespace canopy::server
