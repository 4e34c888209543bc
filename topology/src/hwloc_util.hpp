// Small RAII and conversion helpers around hwloc bitmaps (internal).
#pragma once

#include <hwloc.h>

#include <memory>
#include <vector>

namespace spark::topo::detail {

struct BitmapFree {
  void operator()(hwloc_bitmap_s* b) const noexcept { hwloc_bitmap_free(b); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapFree>;

inline Bitmap make_bitmap() {
  return Bitmap(hwloc_bitmap_alloc());
}

inline std::vector<int> to_cpus(hwloc_const_bitmap_t set) {
  std::vector<int> cpus;
  if (set == nullptr || hwloc_bitmap_iszero(set)) return cpus;
  int i = -1;
  while ((i = hwloc_bitmap_next(set, i)) != -1) cpus.push_back(i);
  return cpus;
}

// set ∩ allowed as a cpu list.
inline std::vector<int> allowed_cpus(hwloc_const_bitmap_t set, hwloc_const_bitmap_t allowed) {
  Bitmap both = make_bitmap();
  hwloc_bitmap_and(both.get(), set, allowed);
  return to_cpus(both.get());
}

}  // namespace spark::topo::detail
