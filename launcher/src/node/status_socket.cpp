#include "status_socket.hpp"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "job_dir.hpp"

namespace spark::launch {
namespace {

sockaddr_un address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path)
    throw std::runtime_error("status socket path too long: " + path);
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

// Waits for `fd` to be ready for `events` until `deadline`; false on timeout.
bool ready(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

}  // namespace

StatusSocket::StatusSocket(const std::string& job_dir) : path_(job_dir + "/" + kStatusSocketName) {
  listen_ = net::Fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listen_) throw std::system_error(errno, std::generic_category(), "status socket");
  const sockaddr_un a = address(path_);
  // 0600 from the start: no moment in which another user could connect.
  const mode_t old = ::umask(0177);
  const int rc = ::bind(listen_.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a);
  ::umask(old);
  if (rc != 0 || ::listen(listen_.get(), 8) != 0)
    throw std::system_error(errno, std::generic_category(), "status socket " + path_);
}

StatusSocket::~StatusSocket() {
  ::unlink(path_.c_str());
}

std::optional<StatusSocket::Request> StatusSocket::accept_request() {
  net::Fd conn(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!conn) return std::nullopt;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
      (cred.uid != ::geteuid() && cred.uid != 0))
    return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  std::string line;
  char c = 0;
  while (line.size() < 64 && ready(conn.get(), POLLIN, deadline)) {
    const ssize_t n = ::read(conn.get(), &c, 1);
    if (n <= 0 || c == '\n') break;
    line += c;
  }
  if (line.empty()) return std::nullopt;
  return Request{std::move(conn), line};
}

void StatusSocket::reply(Request& req, const std::string& text) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  std::size_t off = 0;
  while (off < text.size() && ready(req.conn.get(), POLLOUT, deadline)) {
    const ssize_t n = ::send(req.conn.get(), text.data() + off, text.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
  req.conn.reset();
}

std::vector<LocalJob> local_jobs() {
  std::vector<LocalJob> jobs;
  for (const auto& base : job_dir_bases()) {
    DIR* dir = ::opendir(base.c_str());
    if (dir == nullptr) continue;
    while (const dirent* e = ::readdir(dir)) {
      const pid_t owner = job_dir_owner(e->d_name);
      if (owner == 0 || (::kill(owner, 0) != 0 && errno == ESRCH)) continue;
      const std::string path = base + "/" + e->d_name;
      struct stat st {};
      if (::stat((path + "/" + kStatusSocketName).c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
          st.st_uid == ::geteuid())
        jobs.push_back({path, static_cast<int>(owner)});
    }
    ::closedir(dir);
  }
  return jobs;
}

std::string ask_job(const std::string& job_dir, const std::string& what,
                    std::chrono::milliseconds timeout) {
  const std::string path = job_dir + "/" + kStatusSocketName;
  net::Fd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_un a = address(path);
  if (!s || ::connect(s.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0)
    throw std::runtime_error("cannot reach the job at " + path + ": " + std::strerror(errno) +
                             " (did it end?)");
  const std::string line = what + "\n";
  if (::send(s.get(), line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size()))
    throw std::runtime_error("cannot ask the job at " + path + ": " + std::strerror(errno));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string out;
  char buf[65536];
  for (;;) {
    if (!ready(s.get(), POLLIN, deadline))
      throw std::runtime_error("the job at " + path + " did not answer within " +
                               std::to_string(timeout.count()) + " ms");
    const ssize_t n = ::read(s.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  if (out.empty()) throw std::runtime_error("the job at " + path + " sent no answer");
  return out;
}

}  // namespace spark::launch
