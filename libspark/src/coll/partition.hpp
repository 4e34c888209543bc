// How the collectives cut a vector: blocks per rank, slot-sized pieces, and the order in which
// a rank visits its peers. One place for every algorithm file (collectives.cpp, single_copy.cpp).
#pragma once

#include <algorithm>
#include <cstddef>

namespace spark::coll {

struct Range {
  std::size_t begin, len;
};
/// Block r of `count` elements split as evenly as possible over n ranks.
inline Range block(std::size_t count, int n, int r) {
  const auto un = static_cast<std::size_t>(n), ur = static_cast<std::size_t>(r);
  const std::size_t base = count / un, rem = count % un;
  return {ur * base + std::min(ur, rem), base + (ur < rem ? 1 : 0)};
}
/// Pieces of at most `per_piece` elements in `count` (at least one, for a count of 0 too).
inline std::size_t pieces(std::size_t count, std::size_t per_piece) {
  return std::max<std::size_t>(1, (count + per_piece - 1) / per_piece);
}
/// Piece k of a range of `len` elements.
inline Range piece(std::size_t len, std::size_t per_piece, std::size_t k) {
  const std::size_t b = std::min(len, k * per_piece);
  return {b, std::min(per_piece, len - b)};
}
/// The i-th peer (i = 1..size-1) a rank visits: every rank starts with its right neighbour.
inline int peer_at(int rank, int size, int i) {
  return (rank + i) % size;
}

}  // namespace spark::coll
