// `sparkrun doctor` across the ranks of a job: the pure parts of the probe program
// (spark_doctor_probe, libspark/tools/doctor_probe). Which lane pairs are tested between two ranks,
// the order of the tests, the per-peer route table built from their results, and the one
// table printed at the end (host / rank / check / lane / peer / result / latency / detail).
// Kept free of sockets and verbs so that the unit tests feed it made-up results.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "fabric/fabric_map.hpp"
#include "host_checks.hpp"

namespace spark::doctor {

/// One row of the job table. `rank` -1 prints "-".
struct JobRow {
  std::string host;
  int rank = -1;
  std::string check;
  std::string lane = "-";
  std::string peer = "-";
  Status status = Status::ok;
  double latency_us = -1;  ///< median round trip; < 0: none ("-")
  std::string detail;
  bool operator==(const JobRow&) const = default;
};

/// A host check row (from evaluate()) placed in the job table.
JobRow host_row(const std::string& host, int rank, const Row& row);

/// What a rank publishes: its rows, one line each (fields separated by 0x1f). Strict decode:
/// a malformed line throws spark::Error.
std::string encode_rows(const std::vector<JobRow>& rows);
std::vector<JobRow> decode_rows(const std::string& text);

/// Every rank's published lanes: RDMA lanes (device name, port 1, the IPv4 of its RoCE v2 GID
/// and the prefix of that address) and tcp lanes (interfaces).
struct RankLanes {
  std::string host;
  std::vector<fabric::Lane> rdma;
  std::vector<fabric::Lane> tcp;
};

enum class LinkKind { rdma, tcp };

/// One round trip to test: rank a (the initiator, a < b) from its lane `la` to rank b's lane
/// `lb` (indices into RankLanes::rdma or ::tcp as `kind` says). `index` numbers the links of
/// one pair (0, 1, ...) and names the bootstrap keys of their endpoints.
struct Link {
  int a = 0, b = 0;
  LinkKind kind = LinkKind::tcp;
  int la = 0, lb = 0;
  int index = 0;
  bool operator==(const Link&) const = default;
};

/// True when lanes x (of a rank on host hx) and y (host hy) can reach each other directly:
/// one subnet, or the same address on the same host (two ranks of one node share a device).
bool lanes_pair(const fabric::Lane& x, const std::string& hx, const fabric::Lane& y,
                const std::string& hy);

/// Every link of the job, pair by pair (a < b): RDMA lane pairs when both ranks have RDMA
/// lanes, else tcp lane pairs ("marked tcp"). Deterministic: every rank computes the same list.
std::vector<Link> plan_links(const std::vector<RankLanes>& ranks);

/// Pairs grouped into rounds in which no rank appears twice (greedy, in pair order): a rank
/// tests one peer at a time, and a round ends with a fence, so no test waits on another.
std::vector<std::vector<std::pair<int, int>>> plan_rounds(int size);

/// "rxe0" / "tcp:eth0": how a lane is named in the table.
std::string lane_label(const RankLanes& r, LinkKind kind, int lane);

/// The route table over ranks from the links that passed: direct (every passing lane pair),
/// relay via the lowest-numbered neighbour on a shortest path, or unreachable. Lane indices
/// in the routes refer to `combined_lanes` (RDMA lanes first, then tcp lanes).
fabric::FabricMap rank_map(const std::vector<RankLanes>& ranks, const std::vector<Link>& passed);
std::vector<fabric::Lane> combined_lanes(const RankLanes& r);

/// One "reach" row per pair a < b from the map: which lanes serve the peer, the relay when
/// none does (info: a ring needs it), FAIL when the peer cannot be reached at all.
std::vector<JobRow> reach_rows(const std::vector<RankLanes>& ranks, const fabric::FabricMap& map);

/// The fixed-width table plus its verdict line; the exit status is verdict(rows).exit_code().
std::string render_job(const std::vector<JobRow>& rows);

/// "12.3 us" / "1.25 ms" for a latency given in microseconds.
std::string format_latency(double us);

}  // namespace spark::doctor
