// `sparkrun status`'s channel: the node runner listens on a unix socket in its job dir
// (the dir is 0700, the socket 0600, and every connection's SO_PEERCRED uid must be the job's
// user). One request line ("status", "stacks" or "metrics"), one reply (JSON; OpenMetrics text
// for "metrics"), then the connection closes.
// Both ends are here, so the wire rule exists once.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "net/socket.hpp"

namespace spark::launch {

inline constexpr const char* kStatusSocketName = "status.sock";

class StatusSocket {
 public:
  /// Listens on JOB_DIR/status.sock. Throws std::system_error when it cannot.
  explicit StatusSocket(const std::string& job_dir);
  ~StatusSocket();
  StatusSocket(const StatusSocket&) = delete;
  StatusSocket& operator=(const StatusSocket&) = delete;
  int fd() const noexcept { return listen_.get(); }

  struct Request {
    net::Fd conn;
    std::string what;  ///< "status", "stacks"
  };
  /// Accepts one connection and reads its request line (at most 200 ms); nullopt when the
  /// peer is another user, sent nothing, or went away.
  std::optional<Request> accept_request();
  /// Writes the reply (blocking, bounded to 2 s) and closes the connection.
  static void reply(Request& req, const std::string& text);

 private:
  std::string path_;
  net::Fd listen_;
};

/// A job this user runs on this machine: its job dir and the launcher (or daemon) pid.
struct LocalJob {
  std::string dir;
  int pid = 0;
};
/// The live job dirs of this user that serve a status socket (job_dir.hpp's bases).
std::vector<LocalJob> local_jobs();
/// Sends `what` to the job dir's socket and returns the reply; throws std::runtime_error with
/// the reason when there is none within `timeout`.
std::string ask_job(const std::string& job_dir, const std::string& what,
                    std::chrono::milliseconds timeout);

}  // namespace spark::launch
