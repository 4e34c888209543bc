// Why here and not in the ranks: a rank that fails stops at once (group abort), and a rank
// killed by the abort cannot write anything; only sparkrun outlives them all.
#include "trace_merge.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <system_error>
#include <vector>

namespace spark::launch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The per-rank file: {"traceEvents":[...]} or a bare array (both are valid Chrome traces).
bool read_events(const fs::path& file, json& events) {
  std::ifstream in(file);
  if (!in) return false;
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return false;
  if (doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array())
    events = std::move(doc["traceEvents"]);
  else if (doc.is_array())
    events = std::move(doc);
  else
    return false;
  return true;
}

json marker(int rank, double ts, const std::string& why) {
  return {{"name", "no trace from rank " + std::to_string(rank)},
          {"ph", "i"},
          {"s", "p"},
          {"pid", rank},
          {"tid", 0},
          {"ts", ts},
          {"args", {{"why", why}}}};
}

}  // namespace

TraceMergeResult merge_rank_traces(const std::string& path, int size,
                                   fs::file_time_type job_start) noexcept {
  TraceMergeResult r;
  try {
    json all = json::array();
    std::vector<std::pair<int, std::string>> missing;
    double last_ts = 0;
    for (int rank = 0; rank < size; ++rank) {
      const fs::path file = path + ".rank" + std::to_string(rank) + ".json";
      std::error_code ec;
      const auto mtime = fs::last_write_time(file, ec);
      json events;
      if (ec) {
        missing.emplace_back(rank, "the rank wrote no trace (stopped or killed before it could)");
      } else if (mtime < job_start) {
        missing.emplace_back(rank, "only a stale file from an earlier run");
      } else if (!read_events(file, events)) {
        missing.emplace_back(rank,
                             "the file is not valid JSON (the rank was killed while writing?)");
      } else {
        for (auto& e : events) {
          if (e.is_object() && e.contains("ts") && e["ts"].is_number())
            last_ts = std::max(last_ts, e["ts"].get<double>() + e.value("dur", 0.0));
          all.push_back(std::move(e));
        }
        ++r.merged;
      }
    }
    for (const auto& [rank, why] : missing) {
      all.push_back({{"name", "process_name"},
                     {"ph", "M"},
                     {"pid", rank},
                     {"args", {{"name", "rank " + std::to_string(rank) + " (no trace)"}}}});
      all.push_back(marker(rank, last_ts, why));
    }
    r.missing = static_cast<int>(missing.size());
    if (r.merged == 0) {
      r.message = "no rank wrote a trace to " + path + ".rank<R>.json; nothing merged";
      return r;
    }
    json doc = {{"traceEvents", std::move(all)},
                {"displayTimeUnit", "ms"},
                {"otherData", {{"ranks", size}, {"merged", r.merged}, {"missing", r.missing}}}};
    const std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << doc.dump() << '\n';
      if (!out) {
        r.message = "cannot write the merged trace " + path;
        return r;
      }
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
      r.message = "cannot write the merged trace " + path + ": " + ec.message();
      return r;
    }
    r.message = "trace of " + std::to_string(r.merged) + " of " + std::to_string(size) +
                " ranks written to " + path + " (open it in ui.perfetto.dev)";
  } catch (const std::exception& e) {
    r.message = std::string("merging the traces failed: ") + e.what();
  }
  return r;
}

TraceJob TraceJob::begin(const std::vector<std::pair<std::string, std::string>>& exports) {
  TraceJob t;
  t.start_ = fs::file_time_type::clock::now();
  for (const auto& [name, value] : exports)
    if (name == "SPARK_TRACE") t.path_ = value;
  if (!t.path_) {
    if (const char* v = std::getenv("SPARK_TRACE")) t.path_ = v;
  }
  if (t.path_ && t.path_->empty()) t.path_.reset();  // libspark refuses "" at init
  return t;
}

void TraceJob::finish(int size) const noexcept {
  if (!path_) return;
  const TraceMergeResult r = merge_rank_traces(*path_, size, start_);
  if (!r.message.empty()) std::fprintf(stderr, "sparkrun: %s\n", r.message.c_str());
}

}  // namespace spark::launch
