// How hellos (hello.hpp) are read and answered, the one rule for every listener of a job (tcp
// lanes and relays, fabric probes, the doctor's echo; docs/reliability.md):
// - accepted connections wait for their hello side by side (non-blocking reads, kHelloWait
//   each), so a silent stranger never holds up the connection that is expected;
// - whatever is not a whole hello of this job in time is dropped with one line under
//   SPARK_LOG=info:<subsystem>:
//       <subsystem>: dropped a connection from A:P: <why>
// - a probe is answered with the same hello from the other end (rank and dst swapped), so the
//   asking side knows the listener it reached belongs to the job (an echo server, or another
//   program on a reused port, never answers that).
#pragma once

#include <poll.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "net/hello.hpp"
#include "net/socket.hpp"

namespace spark::net::hello {

using Clock = std::chrono::steady_clock;
/// How long an accepted connection may take to send its whole hello: long enough for tcp to
/// retransmit a lost hello more than once on a lossy link (after a lost SYN its timer starts
/// at 3 s and doubles: 3, 9, 21 s). 2 s dropped a real peer's connection at 20 % loss in about
/// 1 job in 8, and its wire-up then waited for it until SPARK_JOIN_TIMEOUT_MS. A silent
/// stranger waits side by side with the expected connections and costs only a descriptor.
inline constexpr std::chrono::seconds kHelloWait{30};

/// A connection whose hello was this job's.
struct Greeted {
  Fd fd;  ///< still non-blocking
  Hello hello;
  std::string from;  ///< A:P of the peer
};

/// Accepted connections waiting for their hello. Owns them: the destructor closes what is
/// left, silently (drop_all() says why first).
class Waiting {
 public:
  /// Hellos must carry `token` and name ranks below `size`; drops are logged to `subsystem`
  /// when `log` (log::enabled(info, subsystem), decided once by the caller).
  Waiting(const Token& token, int size, std::string subsystem, bool log);

  /// Accepts one connection from `listener` when one is waiting (listener readable).
  void accept_from(int listener);
  /// Appends one pollfd per waiting connection to `pfds`; returns the earlier of `until` and
  /// the first connection's end of wait.
  Clock::time_point watch(std::vector<pollfd>& pfds, Clock::time_point until) const;
  /// After poll() on the pfds watch() appended from index `first`: reads what is ready and
  /// returns every connection whose whole hello is this job's; drops the rest that are done
  /// (closed, not this job's, or silent for kHelloWait).
  std::vector<Greeted> take(const std::vector<pollfd>& pfds, std::size_t first);
  /// Closes `fd` with the debug line (also for a hello of this job the caller does not want).
  void drop(int fd, const std::string& from, const std::string& why) const;
  /// Drops every connection still waiting, with `why`.
  void drop_all(const std::string& why);
  bool empty() const noexcept { return pending_.empty(); }

 private:
  struct Pending {
    Fd fd;
    std::string from;
    Clock::time_point until;
    std::array<std::byte, kSize> buf{};
    std::size_t got = 0;
  };
  Token token_;
  int size_;
  std::string subsystem_;
  bool log_;
  std::vector<Pending> pending_;
};

/// The asking end of a probe: sends `mine` (kind probe) on the connected `fd` and waits until
/// `deadline` for its answer (answer()). "" when it came, else why not: for the debug line or
/// the doctor's FAIL row.
std::string ask(int fd, const Hello& mine, const Token& token, int size,
                Clock::time_point deadline);
/// The answering end: sends the answer to the probe `asked` (taken by Waiting) on `fd`.
/// False when it could not be sent by `deadline`.
bool answer(int fd, const Hello& asked, const Token& token, Clock::time_point deadline);

}  // namespace spark::net::hello
