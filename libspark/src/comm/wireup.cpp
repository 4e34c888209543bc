// Transport wire-up: publish node identity and the settings every rank must share (checked
// right after the first fence, before anything can wait on a peer), pick a transport per peer
// (transport/registry.hpp: shm on the same node; across nodes roce where the fabric map's RDMA
// lanes reach the peer, else tcp with a note; SPARK_TRANSPORT forces one), let each transport
// publish its endpoint, fence, connect each from its peers' bytes, then a CPU-side barrier so that
// every rank is connected before init() returns. No concrete transport is named here.

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "bootstrap/job_token.hpp"
#include "bootstrap/node_layout.hpp"
#include "comm/communicator_impl.hpp"
#include "comm/settings_digest.hpp"
#include "log/log.hpp"
#include "spark/error.hpp"
#include "spark/protocol/number.hpp"
#include "transport/registry.hpp"

namespace spark {
namespace {

// Where a rank publishes the smallest slot of its transports (bytes, decimal).
constexpr const char* kSlotKey = "spark.slot";

// Every rank reads every rank's settings record after the same fence, so every rank reaches the
// same verdict here; a difference ends the job now, naming the setting, instead of hanging in a
// transport's set-up or in init's barrier until a timeout blames an innocent rank.
void check_settings(bootstrap::Bootstrap& boot, const CommOptions& options,
                    std::chrono::milliseconds join) {
  std::vector<settings_digest::Settings> all;
  for (int r = 0; r < boot.size(); ++r) {
    std::vector<std::byte> bytes;
    try {
      bytes = boot.get(r, settings_digest::kKey);
    } catch (const BootstrapError&) {  // a libspark from before the settings record
      all.push_back({{settings_digest::kVersion, "(older, without a settings record)"}});
      continue;
    }
    all.push_back(settings_digest::decode(r, bytes));
  }
  std::vector<std::string> nodes;  // published with the records: name the hosts in the line
  for (int r = 0; r < boot.size(); ++r)
    nodes.push_back(bootstrap::to_string(boot.get(r, "spark.node")));
  const auto differ = settings_digest::verdict(all, nodes);
  if (!differ) return;
  // Every rank has read every record before any leaves: rank 0 may host the store (torch's
  // TCPStore, the rendezvous), and its exit must not cut off a rank still reading the records,
  // which would then fail with a store error instead of this line.
  try {
    boot.fence(join);
  } catch (const std::exception&) {
  }
  if (options.report_failures) {
    // One report: rank 0's abort (sparkrun prints its line and stops the group). The others
    // throw only after it: rank 0 never reaches this fence, which fails once rank 0 has
    // aborted (PMIx, rank 0's rendezvous or store closing) or after 5 s at the latest, so the
    // launcher's first failure is rank 0's report, not another rank's exit status.
    if (boot.rank() == 0) boot.abort(1, *differ);
    try {
      boot.fence(std::min(join, std::chrono::milliseconds(5000)));
    } catch (const std::exception&) {
    }
  }
  throw ConfigError(*differ);
}

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A bootstrap fence, timed for SPARK_LOG=trace (bootstrap).
void fence(bootstrap::Bootstrap& boot, std::chrono::milliseconds join, std::string_view what) {
  const auto t0 = Clock::now();
  boot.fence(join);
  if (log::enabled(log::Level::trace, "bootstrap"))
    log::line("bootstrap", fmt::format("fence ({}) done in {:.1f} ms", what, ms_since(t0)));
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

}  // namespace

// A peer that the fabric map gave roce but that no RDMA WRITE probe reached (both ends agree:
// Transport::unreachable) is reached over tcp instead, with one note from rank 0 naming the
// pair and the reason (docs/roce.md). Whether that can happen is known alike on every rank,
// so all of them take the fence (and, when some pair fell back, the second one) or none.
// The lost peers get a tcp instance of their own (Setup::fallback): the job's tcp transport,
// where there is one, is connected already and may have taken the fabric map's fence, which
// the ranks of a fallback pair alone cannot take again.
bool CommunicatorImpl::fall_back_to_tcp(const transport::Setup& base,
                                        std::chrono::milliseconds join) {
  if (!transport::may_fall_back(base)) return false;
  std::vector<std::pair<int, std::string>> lost;  // (peer, why), by peer
  for (auto& t : transports_)
    for (auto& peer : t->unreachable()) lost.push_back(std::move(peer));
  std::sort(lost.begin(), lost.end());
  std::string published;  // "peer why\n" per lost peer
  for (const auto& [r, why] : lost) published += std::to_string(r) + ' ' + why + '\n';
  boot_->put("spark.fallback", bootstrap::as_bytes(published));
  boot_->commit();
  fence(*boot_, join, "RDMA probe results");
  bool any = false;
  for (int r = 0; r < size_; ++r) {
    const auto text = bootstrap::to_string(boot_->get(r, "spark.fallback"));
    any = any || !text.empty();
    if (rank_ != 0) continue;
    for (std::size_t at = 0; at < text.size();) {  // one note per pair: from its lower rank
      const auto end = std::min(text.find('\n', at), text.size());
      const auto sp = text.find(' ', at);
      const int peer = std::stoi(text.substr(at, sp - at));
      if (r < peer)
        log::write(
            log::Level::warn, "wireup",
            fmt::format("note: {} -> {}: tcp, {}", nodes_[static_cast<std::size_t>(r)],
                        nodes_[static_cast<std::size_t>(peer)], text.substr(sp + 1, end - sp - 1)));
      at = end + 1;
    }
  }
  if (!any) return false;
  transport::Setup s = base;
  s.fallback = true;
  for (const auto& [r, why] : lost) s.peers.push_back(r);
  transport::Transport* tcp = nullptr;
  if (!lost.empty()) {
    transports_.push_back(transport::choose_transport("tcp", false).make(s));
    tcp = transports_.back().get();
    boot_->put("spark.tcp.fallback", bootstrap::as_bytes(tcp->endpoint()));
  }
  boot_->commit();
  fence(*boot_, join, "tcp endpoints of the fallback");
  if (tcp == nullptr) return true;
  std::vector<std::string> endpoints(static_cast<std::size_t>(size_));
  for (const auto& [r, why] : lost) {
    endpoints[static_cast<std::size_t>(r)] =
        bootstrap::to_string(boot_->get(r, "spark.tcp.fallback"));
    by_peer_[static_cast<std::size_t>(r)] = tcp;
    if (log::enabled(log::Level::info, "wireup"))
      log::line("wireup", fmt::format("rank {} -> rank {}: tcp [{} -> {}: tcp, {}]", rank_, r,
                                      node_id_, nodes_[static_cast<std::size_t>(r)], why));
  }
  tcp->connect(s, endpoints);
  return true;
}

void CommunicatorImpl::wire_up() {
  rank_ = boot_->rank();
  size_ = boot_->size();
  local_rank_ = boot_->local_rank();
  local_size_ = boot_->local_size();
  node_id_ = boot_->node_id();
  by_peer_.assign(static_cast<std::size_t>(size_), nullptr);
  p2p_send_seq_.assign(static_cast<std::size_t>(size_), 0);
  p2p_recv_seq_.assign(static_cast<std::size_t>(size_), 0);
  nodes_.assign(1, node_id_);
  if (size_ == 1) {
    log::write(log::Level::info, "wireup", "one rank: nothing to connect");
    return;
  }

  const auto t0 = Clock::now();
  const std::chrono::milliseconds join(options_.join_timeout_ms);
  boot_->put("spark.node", bootstrap::as_bytes(node_id_));
  boot_->put(bootstrap::kMachineIdKey, bootstrap::as_bytes(bootstrap::local_machine_id()));
  boot_->put(settings_digest::kKey, settings_digest::encode(rank_, settings_digest::of(options_)));
  transport::publish_choice_facts(*boot_, options_, local_size_ < size_);  // with the node id
  // The job's token for the data plane (net/hello.hpp): in every tcp hello and fabric probe.
  bootstrap::publish_job_token(*boot_);
  boot_->commit();
  fence(*boot_, join, "node ids, job token and settings");
  check_settings(*boot_, options_, join);
  transport::Setup base{
      .rank = rank_,
      .size = size_,
      .options = &options_,
      .boot = boot_.get(),
      .join = join,
      .on_failure = [this](const FailureRecord& r) { fail_external(r); },
      .timeout_ms = [this] { return timeout_ms_.load(std::memory_order_relaxed); }};
  for (int r = 0; r < size_; ++r)
    base.nodes.push_back(bootstrap::to_string(boot_->get(r, "spark.node")));
  nodes_ = base.nodes;
  std::vector<std::string> machines;
  for (int r = 0; r < size_; ++r) {
    try {
      machines.push_back(bootstrap::to_string(boot_->get(r, bootstrap::kMachineIdKey)));
    } catch (const BootstrapError&) {  // a libspark from before the machine id: unknown
      machines.emplace_back();
    }
  }
  machine_ranks_ = bootstrap::ranks_sharing_machine(machines, base.nodes, rank_);
  base.token = bootstrap::job_token(*boot_);

  // The allreduce crossover (one-shot up to this size, docs/collectives.md) must be the same
  // on every rank, so it depends only on what every rank knows: the node ids and the knob.
  const bool forced_network = options_.transport != "auto" &&
                              !transport::choose_transport(options_.transport, false).node_local;
  const bool network = forced_network || !base.one_node();
  one_shot_max_ = one_shot_crossover(network, size_);

  // Per peer its transport; then one instance per transport kind, in registry order.
  std::map<const transport::TransportKind*, std::vector<int>> peers_of;
  std::vector<std::string> notes, report;
  const auto chosen = transport::choose_transports(base, rank_ == 0 ? &notes : nullptr, &report);
  for (const auto& n : notes) log::write(log::Level::warn, "wireup", "note: " + n);
  // One line per peer: its transport and why (sparkrun -v and --report-bindings set
  // SPARK_LOG=info:wireup).
  if (log::enabled(log::Level::info, "wireup"))
    for (const auto& l : report) log::line("wireup", l);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const auto& node = base.nodes[static_cast<std::size_t>(r)];
    const auto& kind = *chosen[static_cast<std::size_t>(r)];
    if (kind.node_local && node != node_id_)
      throw ConfigError("SPARK_TRANSPORT=" + options_.transport + ", but rank " +
                        std::to_string(r) + " is on node '" + node + "' and rank " +
                        std::to_string(rank_) + " on '" + node_id_ +
                        "': " + std::string(kind.name) +
                        " only reaches ranks of the same node; use SPARK_TRANSPORT=auto");
    peers_of[&kind].push_back(r);
  }
  std::vector<transport::Setup> setups;
  for (const auto& kind : transport::transport_kinds()) {
    auto it = peers_of.find(&kind);
    if (it == peers_of.end()) continue;
    setups.push_back(base);
    setups.back().peers = it->second;
    transports_.push_back(kind.make(setups.back()));
    const std::string endpoint = transports_.back()->endpoint();
    boot_->put("spark." + std::string(kind.name), bootstrap::as_bytes(endpoint));
    if (log::enabled(log::Level::trace, kind.name))
      log::line(kind.name, fmt::format("set up for ranks {}: endpoint of {} bytes published",
                                       rank_list(it->second), endpoint.size()));
  }
  // Every rank cuts messages into pieces of one size (a peer's take() checks it): the
  // smallest slot of any rank's transports, published with the endpoints. Ranks use different
  // transports where some pairs lack an RDMA lane or fell back to tcp (tcp's slots are
  // smaller than roce's), so a rank's own transports alone do not say it.
  std::size_t slot = SIZE_MAX;
  for (const auto& t : transports_) slot = std::min(slot, t->slot_bytes());
  boot_->put(kSlotKey, bootstrap::as_bytes(std::to_string(slot)));
  boot_->commit();
  fence(*boot_, join, "endpoints");
  piece_ = SIZE_MAX;
  for (int r = 0; r < size_; ++r) {
    const std::string text = bootstrap::to_string(boot_->get(r, kSlotKey));
    std::uint64_t v = 0;
    if (protocol::parse_unsigned(text, 64, SIZE_MAX, v) != protocol::Integer::ok)
      throw BootstrapError("wire-up: rank " + std::to_string(r) + " published slot size '" + text +
                           "' (" + kSlotKey + "); every rank must run the same libspark");
    piece_ = std::min<std::size_t>(piece_, v);
  }

  for (std::size_t i = 0; i < transports_.size(); ++i) {
    auto& t = *transports_[i];
    std::vector<std::string> endpoints(static_cast<std::size_t>(size_));
    for (int r : setups[i].peers) {
      endpoints[static_cast<std::size_t>(r)] =
          bootstrap::to_string(boot_->get(r, "spark." + std::string(t.name())));
      by_peer_[static_cast<std::size_t>(r)] = &t;
    }
    const auto tc = Clock::now();
    t.connect(setups[i], endpoints);
    if (log::enabled(log::Level::info, t.name()))
      log::line(t.name(), fmt::format("connected to ranks {} in {:.1f} ms (slots of {} bytes)",
                                      rank_list(setups[i].peers), ms_since(tc), t.slot_bytes()));
    if (auto ring = t.direct_ring(); !ring.empty()) ring_ = std::move(ring);
  }
  // Some pair of the job fell back (known alike on every rank): its tcp slots count too. A
  // message fits every transport's slots (set_piece_bytes goes no higher).
  if (fall_back_to_tcp(base, join)) piece_ = std::min(piece_, options_.tcp_slot_bytes);
  max_piece_ = piece_;
  all_peers_shm_ = every_peer_over_shm();  // by_peer_ is final here (after the tcp fallback)
  // Every rank connected (and every shm segment mapped) before init returns.
  barrier();
  for (auto& t : transports_) t->connected();
  if (log::enabled(log::Level::info, "wireup"))
    log::line("wireup", fmt::format("{} peers connected over {} transport(s) in {:.1f} ms",
                                    size_ - 1, transports_.size(), ms_since(t0)));
}

}  // namespace spark
