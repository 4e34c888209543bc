// The memory a one-kernel device collective shares with its host proxy: one pinned, mapped
// host allocation (on a Spark the NIC can write it and the GPU reads it in place), laid out as
//
//   ControlBlock | StageDesc + stage flag | peer flags [size x lanes] | stage | gathered
//
// stage     this rank's input, copied there by the kernel (capacity bytes)
// gathered  size blocks of the call's byte count: block r holds rank r's input, filled by
//           the proxy; peer flag [r][lane] = seq publishes that rank r's data is complete
//
// Pointers in a Channel are either host addresses (the proxy's view) or device addresses of
// the same memory (the kernel's view); make_channel() builds either from a base address.
#pragma once

#include <cstddef>
#include <cstdint>

#include "spark/kernels/control_block.hpp"
#include "spark/kernels/hd.hpp"

namespace spark::kernels {

/// What the kernel staged (written before the stage flag, read by the proxy after it).
struct StageDesc {
  std::uint64_t count;  ///< elements
  std::uint32_t dtype;  ///< spark::DType
  std::uint32_t op;     ///< spark::ReduceOp
};

struct Channel {
  ControlBlock* ctl = nullptr;
  StageDesc* desc = nullptr;
  std::uint64_t* stage_flag = nullptr;  ///< kernel -> proxy: seq whose input is staged
  std::uint64_t* peer_flags = nullptr;  ///< proxy -> kernel: [peer * lanes + lane] = seq
  std::byte* stage = nullptr;
  std::byte* gathered = nullptr;
  std::int32_t rank = 0;
  std::int32_t size = 1;
  std::uint32_t lanes = 1;
  std::uint64_t capacity = 0;  ///< largest call in bytes
};

struct ChannelLayout {
  std::size_t desc, stage_flag, peer_flags, stage, gathered, total;
};

inline constexpr std::size_t align_up(std::size_t v, std::size_t a) {
  return (v + a - 1) / a * a;
}

inline ChannelLayout channel_layout(int size, std::uint32_t lanes, std::size_t capacity) {
  ChannelLayout l{};
  l.desc = align_up(sizeof(ControlBlock), 128);
  l.stage_flag = l.desc + sizeof(StageDesc);
  l.peer_flags = align_up(l.stage_flag + sizeof(std::uint64_t), 128);
  l.stage =
      align_up(l.peer_flags + sizeof(std::uint64_t) * static_cast<std::size_t>(size) * lanes, 256);
  l.gathered = align_up(l.stage + capacity, 256);
  l.total = align_up(l.gathered + capacity * static_cast<std::size_t>(size), 4096);
  return l;
}

/// A view of the allocation at `base` (host or device address of the same memory).
inline Channel make_channel(void* base, int rank, int size, std::uint32_t lanes,
                            std::size_t capacity) {
  const ChannelLayout l = channel_layout(size, lanes, capacity);
  auto* b = static_cast<std::byte*>(base);
  Channel c;
  c.ctl = reinterpret_cast<ControlBlock*>(b);
  c.desc = reinterpret_cast<StageDesc*>(b + l.desc);
  c.stage_flag = reinterpret_cast<std::uint64_t*>(b + l.stage_flag);
  c.peer_flags = reinterpret_cast<std::uint64_t*>(b + l.peer_flags);
  c.stage = b + l.stage;
  c.gathered = b + l.gathered;
  c.rank = rank;
  c.size = size;
  c.lanes = lanes;
  c.capacity = capacity;
  return c;
}

}  // namespace spark::kernels
