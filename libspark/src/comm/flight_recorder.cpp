#include "comm/flight_recorder.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace spark {

namespace flight = protocol::flight;

namespace {
std::int64_t ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
}  // namespace

FlightRecorder::FlightRecorder(const std::string& job_id, int rank, std::uint32_t capacity)
    : capacity_(capacity), bytes_(flight::segment_bytes(capacity)) {
  void* mem = MAP_FAILED;
  if (!job_id.empty()) {
    name_ = flight::segment_name(job_id, rank);
    // O_EXCL: the process's first world communicator takes the name; another one (torch
    // makes one per process group) keeps its ring to itself.
    const int fd = ::shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) {
      if (::ftruncate(fd, static_cast<off_t>(bytes_)) == 0)
        mem = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      ::close(fd);
      if (mem == MAP_FAILED) ::shm_unlink(name_.c_str());
    }
    if (mem == MAP_FAILED) name_.clear();  // taken, or no /dev/shm: private, unseen outside
  }
  if (mem == MAP_FAILED)
    mem = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED)
    throw std::system_error(errno, std::generic_category(),
                            "flight recorder: mmap (set SPARK_FLIGHT_RECORDER=0 to go without)");
  std::memset(mem, 0, bytes_);
  header_ = static_cast<flight::Header*>(mem);
  slots_ = flight::entries(header_);
  header_->capacity = capacity_;
  lane_rows_ = flight::lane_rows(header_);  // placed after the ring: the capacity first
  header_->rank = rank;
  header_->pid = static_cast<std::int32_t>(::getpid());
  add_comm("world");
  // The magic last: a reader that sees it sees a complete header.
  std::atomic_thread_fence(std::memory_order_release);
  std::memcpy(header_->magic, flight::kMagic, sizeof flight::kMagic);
}

FlightRecorder::~FlightRecorder() {
  // A rank that ends normally takes its ring with it; one that dies leaves it for sparkrun,
  // which reads it for the failure report and removes it with the job's other segments.
  if (!name_.empty() && !keep_) ::shm_unlink(name_.c_str());
  ::munmap(header_, bytes_);
}

std::uint16_t FlightRecorder::add_comm(std::string_view name) noexcept {
  const std::uint32_t n = header_->comm_count;
  if (n >= flight::kMaxComms) return flight::kMaxComms - 1;
  flight::set_text(header_->comms[n], n + 1 == flight::kMaxComms ? "(later communicators)" : name);
  header_->comm_count = n + 1;
  return static_cast<std::uint16_t>(n);
}

void FlightRecorder::add_lanes(int peer, const std::vector<std::string>& names) {
  if (peer < 0 || names.empty()) return;
  const std::uint32_t first = header_->lane_count.load(std::memory_order_relaxed);
  if (first + names.size() > flight::kMaxLanes) return;  // not counted (status says nothing)
  for (std::size_t i = 0; i < names.size(); ++i) {
    flight::LaneRow& row = lane_rows_[first + i];
    row.peer = peer;
    row.index = static_cast<std::uint32_t>(i);
    flight::set_text(row.name, names[i]);
  }
  if (lanes_.size() <= static_cast<std::size_t>(peer))
    lanes_.resize(static_cast<std::size_t>(peer) + 1);
  lanes_[static_cast<std::size_t>(peer)] = {first, static_cast<std::uint32_t>(names.size())};
  header_->lane_count.store(first + static_cast<std::uint32_t>(names.size()),
                            std::memory_order_release);
}

void FlightRecorder::wait_blocked(int peer, std::uint8_t kind, std::string_view lane,
                                  std::uint32_t lane_row,
                                  std::chrono::steady_clock::time_point since) noexcept {
  if (current_ == nullptr) return;
  blocked_row_ = lane_row;
  flight::Entry& e = *current_;
  flight::WriteGuard g(e);
  e.wait_peer = peer;
  e.wait_kind = kind;
  e.wait_ns = ns(since);
  e.waiting = 1;
  if (e.start_ns == 0) e.start_ns = e.wait_ns;
  if (e.waits != UINT16_MAX) ++e.waits;
  char* text = flight::lane_of(header_, static_cast<std::size_t>(&e - slots_));
  const std::size_t n = std::min(lane.size(), flight::kLaneBytes - 1);
  std::memcpy(text, lane.data(), n);
  text[n] = 0;
}

void FlightRecorder::wait_unblocked(std::chrono::steady_clock::time_point ended) noexcept {
  flight::Entry& e = *current_;
  {
    flight::WriteGuard g(e);
    e.end_ns = ns(ended);
    e.waiting = 0;
  }
  // The histogram of blocked waits (sparkrun --metrics-port); single writer: plain adds.
  const std::int64_t waited = e.end_ns - e.wait_ns;
  std::size_t b = 0;
  while (b + 1 < flight::kWaitBucketCount &&
         static_cast<double>(waited) > flight::kWaitBuckets[b] * 1e9)
    ++b;
  auto& bucket = header_->wait_buckets[b];
  bucket.store(bucket.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  header_->wait_sum_ns.store(
      header_->wait_sum_ns.load(std::memory_order_relaxed) + static_cast<std::uint64_t>(waited),
      std::memory_order_relaxed);
  if (blocked_row_ != kNoRow) {
    auto& lane = lane_rows_[blocked_row_].blocked_ns;
    lane.store(lane.load(std::memory_order_relaxed) + static_cast<std::uint64_t>(waited),
               std::memory_order_relaxed);
    blocked_row_ = kNoRow;
  }
}

void FlightRecorder::fail_current() noexcept {
  if (current_ == nullptr) return;
  flight::Entry& e = *current_;
  flight::WriteGuard g(e);
  e.failed = 1;
}

std::uint8_t FlightRecorder::op_index_of(const char* op) noexcept {
  std::size_t i = 0;
  while (i < op_names_.size() && op_names_[i] != op) ++i;
  if (i == op_names_.size()) {
    if (i + 1 >= flight::kMaxOps) {  // the table is full: the last row says so
      i = flight::kMaxOps - 1;
      flight::set_text(header_->ops[i], "(other)");
    } else {
      try {
        op_names_.push_back(op);
      } catch (...) {
        return 0;
      }
      flight::set_text(header_->ops[i], op);
      header_->op_count = static_cast<std::uint32_t>(op_names_.size());
    }
  }
  last_op_ = op;
  last_op_index_ = static_cast<std::uint8_t>(i);
  return last_op_index_;
}

}  // namespace spark
