#include "line_forwarder.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace spark::launch {

LineForwarder::LineForwarder(int rank, OutputFormat format, Sink sink)
    : rank_(rank), format_(format), sink_(std::move(sink)) {}

std::string LineForwarder::prefix(int rank, OutputFormat format) {
  std::string p;
  if (format.timestamp) {
    using namespace std::chrono;
    auto now = system_clock::now();
    std::time_t t = system_clock::to_time_t(now);
    auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[48];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03lldZ ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<long long>(ms));
    p += buf;
  }
  if (format.tag) p += "[" + std::to_string(rank) + "] ";
  return p;
}

void LineForwarder::emit(std::string_view line) {
  if (!format_.tag && !format_.timestamp) {
    sink_(line);
    return;
  }
  out_ = prefix(rank_, format_);
  out_.append(line);
  sink_(out_);
}

void LineForwarder::feed(std::string_view data) {
  while (!data.empty()) {
    size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      pending_.append(data);
      if (pending_.size() >= kMaxLine) {
        pending_.push_back('\n');
        emit(pending_);
        pending_.clear();
      }
      return;
    }
    if (pending_.empty()) {
      emit(data.substr(0, nl + 1));  // common case: no copy
    } else {
      pending_.append(data.substr(0, nl + 1));
      emit(pending_);
      pending_.clear();
    }
    data.remove_prefix(nl + 1);
  }
}

void LineForwarder::finish() {
  if (pending_.empty()) return;
  pending_.push_back('\n');
  emit(pending_);
  pending_.clear();
}

}  // namespace spark::launch
