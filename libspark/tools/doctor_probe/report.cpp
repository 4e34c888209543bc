#include "report.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

namespace spark::doctor {

namespace {

using nlohmann::json;

// "-" is how the table says "none"; JSON says null.
json text_or_null(const std::string& s) {
  return s == "-" || s.empty() ? json(nullptr) : json(s);
}

json number_or_null(double v, bool known) {
  return known ? json(v) : json(nullptr);
}

}  // namespace

std::string cable_summary(const std::vector<CableResult>& cables) {
  if (cables.empty()) return "";
  std::vector<std::vector<std::string>> cells;
  for (const CableResult& c : cables) {
    char pct[32] = "-";
    if (c.reference_gbps > 0) std::snprintf(pct, sizeof pct, "%.0f %%", c.percent);
    cells.push_back(
        {status_text(c.status), c.from + " -> " + c.to, c.lane, format_rate(c.gbps),
         c.reference_gbps > 0 ? std::string(pct) + " of " + format_rate(c.reference_gbps) : "-"});
  }
  std::vector<std::size_t> w(cells[0].size(), 0);
  for (const auto& row : cells)
    for (std::size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  std::string out = "cables (a stream each way, bytes checked on both interfaces):\n";
  for (const auto& row : cells) {
    out += " ";
    for (std::size_t i = 0; i < row.size(); ++i)
      out += " " + row[i] + (i + 1 < row.size() ? std::string(w[i] - row[i].size(), ' ') : "");
    out += "\n";
  }
  return out;
}

std::string json_report(const ReportHead& head, const std::vector<JobRow>& rows,
                        const std::vector<CableResult>& cables) {
  const Verdict v = verdict(rows);
  json doc;
  doc["schema"] = "sparkrun-doctor/1";
  doc["mode"] = head.mode;
  doc["ranks"] = head.ranks;
  doc["rows"] = json::array();
  for (const JobRow& r : rows)
    doc["rows"].push_back({{"host", r.host},
                           {"rank", r.rank < 0 ? json(nullptr) : json(r.rank)},
                           {"check", r.check},
                           {"lane", text_or_null(r.lane)},
                           {"peer", text_or_null(r.peer)},
                           {"result", status_text(r.status)},
                           {"latency_us", number_or_null(r.latency_us, r.latency_us >= 0)},
                           {"detail", r.detail}});
  doc["cables"] = json::array();
  for (const CableResult& c : cables)
    doc["cables"].push_back(
        {{"from", c.from},
         {"to", c.to},
         {"lane", c.lane},
         {"tx_netdev", c.tx_netdev},
         {"rx_netdev", c.rx_netdev},
         {"gbps", c.gbps},
         {"reference_gbps", number_or_null(c.reference_gbps, c.reference_gbps > 0)},
         {"reference", c.reference},
         {"percent", number_or_null(c.percent, c.reference_gbps > 0)},
         {"payload_bytes", c.payload},
         {"tx_bytes", c.tx_bytes < 0 ? json(nullptr) : json(c.tx_bytes)},
         {"rx_bytes", c.rx_bytes < 0 ? json(nullptr) : json(c.rx_bytes)},
         {"tx_port_bytes", c.tx_port_bytes < 0 ? json(nullptr) : json(c.tx_port_bytes)},
         {"rx_port_bytes", c.rx_port_bytes < 0 ? json(nullptr) : json(c.rx_port_bytes)},
         {"tx_mtu", c.tx_mtu},
         {"rx_mtu", c.rx_mtu},
         {"striped", c.striped},
         {"result", status_text(c.status)},
         {"detail", c.detail}});
  doc["summary"] = {{"fails", v.fails},
                    {"warnings", v.warns},
                    {"verdict", v.line().substr(0, v.line().size() - 1)}};
  doc["exit_code"] = v.exit_code();
  return doc.dump() + "\n";
}

}  // namespace spark::doctor
