// Sub-communicators (MPI_Comm_split, MPI_Comm_dup): a split is one allgather of (color, key)
// over the parent; the new communicator gets a rank map into the world and a 16-bit tag, and
// borrows the world's transports, so a split opens no sockets, segments or QPs
// (docs/collectives.md, "Sub-communicators").
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "comm/communicator_impl.hpp"
#include "spark/error.hpp"

namespace spark {

namespace {
/// FNV-1a of the split path, folded to 16 bits, never 0 (the world's tag): every member
/// computes the same tag from the same path, and two communicators a pair shares differ
/// unless their 16-bit hashes collide (then only the cross-communicator check is weaker).
std::uint64_t tag_of(const std::string& path) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : path) h = (h ^ c) * 16777619u;
  std::uint32_t t = (h ^ (h >> 16)) & 0xffffu;
  if (t == 0) t = 1;
  return std::uint64_t{t} << 48;
}
}  // namespace

CommunicatorImpl::CommunicatorImpl(CommunicatorImpl& parent, std::vector<int> members, int rank,
                                   std::string path, std::string label, std::string name)
    : options_(parent.options_), timeout_ms_(parent.timeout_ms()) {
  world_ = parent.world_;
  members_ = std::move(members);
  tag_ = tag_of(path);
  path_ = std::move(path);
  label_ = std::move(label);
  name_ = std::move(name);
  if (world_->recorder_) recorder_comm_ = world_->recorder_->add_comm(name_);
  rank_ = rank;
  size_ = static_cast<int>(members_.size());
  node_id_ = parent.node_id_;
  by_peer_.resize(members_.size(), nullptr);
  nodes_.resize(members_.size());
  local_size_ = 0;
  for (std::size_t i = 0; i < members_.size(); ++i) {
    const auto w = static_cast<std::size_t>(members_[i]);
    by_peer_[i] = world_->by_peer_[w];
    nodes_[i] = world_->nodes_[w];
    if (nodes_[i] == node_id_) {
      if (static_cast<int>(i) == rank_) local_rank_ = local_size_;
      ++local_size_;
    }
  }
  p2p_send_seq_.assign(members_.size(), 0);
  p2p_recv_seq_.assign(members_.size(), 0);
  // Settings every rank shares stay the same as the parent's; the ring of direct links is the
  // world's (ring_ stays empty: collectives relay where links are missing).
  piece_ = parent.piece_;
  max_piece_ = parent.max_piece_;
  algo_ = parent.algo_;
  one_shot_max_ = parent.one_shot_max_;
  single_copy_min_ = parent.single_copy_min_;
  all_peers_shm_ = every_peer_over_shm();  // the members' transports: a subset of the world's
  ring_min_bytes_ = parent.ring_min_bytes_;
  ring_bcast_min_bytes_ = parent.ring_bcast_min_bytes_;
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::split(int color, int key) {
  return make_sub(color, key, false);
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::dup() {
  return make_sub(0, rank_, true);
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::make_sub(int color, int key, bool dup) {
  const std::int32_t mine[2] = {color, key};
  std::vector<std::int32_t> all(2 * static_cast<std::size_t>(size_));
  allgather(mine, all.data(), 2, DType::i32);  // collective, bounded by this timeout
  const std::uint32_t index = ++splits_;       // the same on every rank of this communicator
  if (color < 0) return nullptr;
  std::vector<int> order;  // ranks of this communicator with my color, by (key, rank)
  for (int r = 0; r < size_; ++r)
    if (all[2 * static_cast<std::size_t>(r)] == color) order.push_back(r);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return all[2 * static_cast<std::size_t>(a) + 1] < all[2 * static_cast<std::size_t>(b) + 1];
  });
  const int rank = static_cast<int>(std::find(order.begin(), order.end(), rank_) - order.begin());
  std::vector<int> members;
  members.reserve(order.size());
  for (int r : order) members.push_back(world_rank(r));
  // The path tells communicators apart: the parent's path, the split's index and the color
  // (two colors of one split share no rank, but naming it helps the record's reader).
  std::string label = (label_.empty() ? "" : label_ + ".") + std::to_string(index);
  std::string path = (path_.empty() ? "" : path_ + ".") + std::to_string(index) + "/" +
                     (dup ? "dup" : std::to_string(color));
  const std::string what = dup ? "dup" : "color " + std::to_string(color);
  std::string name = "comm " + label + " (" + what + ", size " + std::to_string(order.size()) + ")";
  return std::unique_ptr<CommunicatorImpl>(new CommunicatorImpl(
      *this, std::move(members), rank, std::move(path), std::move(label), std::move(name)));
}

}  // namespace spark
