#include "hostfile.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "strict_parse.hpp"
#include "usage_error.hpp"

namespace spark::launch {
namespace {

constexpr int kMaxSlots = 1 << 16;

bool valid_host_name(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

std::vector<HostSlots> parse_host_list(std::string_view spec) {
  std::vector<HostSlots> out;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    std::string_view item = spec.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty()) {
      throw UsageError("--host: empty host name in '" + std::string(spec) + "'");
    }
    HostSlots h;
    size_t colon = item.find(':');
    h.name = std::string(item.substr(0, colon));
    if (!valid_host_name(h.name)) {
      throw UsageError("--host: '" + h.name + "' is not a valid host name");
    }
    if (colon != std::string_view::npos) {
      h.slots = parse_int(item.substr(colon + 1), 1, kMaxSlots,
                          "--host " + std::string(item) + ": slots");
      h.slots_given = true;
    }
    out.push_back(std::move(h));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<HostSlots> parse_hostfile(std::string_view text, const std::string& source) {
  std::vector<HostSlots> out;
  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    const std::string where = source + ":" + std::to_string(line_no) + ": ";
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;

    std::istringstream words{std::string(line)};
    std::string word;
    words >> word;
    HostSlots h;
    h.name = word;
    if (size_t colon = word.find(':'); colon != std::string::npos) {  // Hydra's "host:N"
      h.name = word.substr(0, colon);
      h.slots = parse_int(std::string_view(word).substr(colon + 1), 1, kMaxSlots, where + "slots");
      h.slots_given = true;
    }
    if (!valid_host_name(h.name)) {
      throw UsageError(where + "'" + h.name + "' is not a valid host name");
    }
    while (words >> word) {
      size_t eq = word.find('=');
      std::string key = word.substr(0, eq);
      if (eq == std::string::npos || (key != "slots" && key != "max_slots" && key != "max-slots")) {
        throw UsageError(where + "unknown entry '" + word +
                         "' (expected: host [slots=N] [max_slots=N])");
      }
      int value = parse_int(std::string_view(word).substr(eq + 1), 1, kMaxSlots, where + key);
      if (key == "slots") {
        h.slots = value;
        h.slots_given = true;
      }
      // max_slots is accepted for Open MPI compatibility; sparkrun's limit is `slots`.
    }
    out.push_back(std::move(h));
  }
  if (out.empty()) throw UsageError(source + ": no hosts in the hostfile");
  return out;
}

std::vector<HostSlots> read_hostfile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw UsageError("--hostfile " + path + ": cannot open: " + std::strerror(errno));
  }
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw UsageError("--hostfile " + path + ": cannot read: " + std::strerror(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return parse_hostfile(text, path);
}

std::vector<HostSlots> merge_hosts(const std::vector<HostSlots>& hosts) {
  std::vector<HostSlots> out;
  for (const auto& h : hosts) {
    bool merged = false;
    for (auto& o : out) {
      if (o.name == h.name) {
        o.slots += h.slots;
        o.slots_given = o.slots_given || h.slots_given;
        merged = true;
        break;
      }
    }
    if (!merged) out.push_back(h);
  }
  return out;
}

}  // namespace spark::launch
