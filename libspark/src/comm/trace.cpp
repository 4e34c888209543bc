#include "comm/trace.hpp"

#include <cstdio>

namespace spark {

namespace {
constexpr std::size_t kMaxEvents = 1 << 20;  // bounded memory: ~100 MB at most

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}
}  // namespace

Trace::Trace(const std::string& path, int rank)
    : file_(path + ".rank" + std::to_string(rank) + ".json"),
      rank_(rank),
      origin_(Clock::now()),
      origin_unix_us_(std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count()) {
  char meta[160];
  std::snprintf(meta, sizeof meta,
                R"({"name":"process_name","ph":"M","pid":%d,"args":{"name":"rank %d"}})", rank,
                rank);
  events_.emplace_back(meta);
  for (int tid = 0; tid < 2; ++tid) {
    std::snprintf(meta, sizeof meta,
                  R"({"name":"thread_name","ph":"M","pid":%d,"tid":%d,"args":{"name":"%s"}})", rank,
                  tid, tid == 0 ? "ops" : "waits");
    events_.emplace_back(meta);
  }
}

Trace::~Trace() {
  flush();
}

// Timestamps are wall-clock microseconds, so traces of different ranks line up when merged.
double Trace::us(Clock::time_point t) const noexcept {
  return static_cast<double>(origin_unix_us_) +
         std::chrono::duration<double, std::micro>(t - origin_).count();
}

void Trace::add(std::string event) noexcept {
  try {
    std::lock_guard lock(mu_);
    if (events_.size() >= kMaxEvents) {
      ++dropped_;
      return;
    }
    events_.push_back(std::move(event));
  } catch (...) {
  }
}

void Trace::op(const char* name, std::uint64_t seq, std::uint64_t bytes, Clock::time_point begin,
               Clock::time_point end, bool failed) noexcept {
  char e[256];
  std::snprintf(
      e, sizeof e,
      R"({"name":"%s","ph":"X","pid":%d,"tid":0,"ts":%.3f,"dur":%.3f,"args":{"seq":%llu,"bytes":%llu%s}})",
      name, rank_, us(begin), std::chrono::duration<double, std::micro>(end - begin).count(),
      static_cast<unsigned long long>(seq), static_cast<unsigned long long>(bytes),
      failed ? R"(,"failed":true)" : "");
  add(e);
}

void Trace::wait(const char* op, std::uint64_t seq, std::uint32_t step, int peer,
                 const std::string& lane, const char* what, Clock::time_point begin,
                 Clock::time_point end) noexcept {
  char e[320];
  std::snprintf(
      e, sizeof e,
      R"({"name":"wait %s rank %d","ph":"X","pid":%d,"tid":1,"ts":%.3f,"dur":%.3f,"args":{"op":"%s","seq":%llu,"step":%u,"peer":%d,"lane":"%s"}})",
      what, peer, rank_, us(begin), std::chrono::duration<double, std::micro>(end - begin).count(),
      op, static_cast<unsigned long long>(seq), step, peer, escape(lane).c_str());
  add(e);
}

void Trace::failure(const std::string& line) noexcept {
  try {
    add(R"({"name":"failure","ph":"i","s":"p","pid":)" + std::to_string(rank_) +
        R"(,"tid":1,"ts":)" + std::to_string(us(Clock::now())) + R"(,"args":{"record":")" +
        escape(line) + "\"}}");
  } catch (...) {
  }
}

void Trace::flush() noexcept {
  std::lock_guard lock(mu_);
  std::FILE* f = std::fopen(file_.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "spark: rank %d: cannot write the trace %s (SPARK_TRACE)\n", rank_,
                 file_.c_str());
    return;
  }
  std::fputs("{\"traceEvents\":[\n", f);
  for (std::size_t i = 0; i < events_.size(); ++i) {
    std::fputs(events_[i].c_str(), f);
    std::fputs(i + 1 < events_.size() ? ",\n" : "\n", f);
  }
  std::fprintf(f, "],\"otherData\":{\"rank\":%d,\"dropped_events\":%zu}}\n", rank_, dropped_);
  std::fclose(f);
}

}  // namespace spark
