#include "topology_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

namespace spark::topo::cache {

namespace {

// The file's first line: what the XML was made under; then hwloc's XML.
constexpr char kFormat[] = "spark-topology-cache/1";

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::optional<std::string> read(const std::filesystem::path& file, const std::string& key) {
  Fd f{::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)};
  if (f.fd < 0) return std::nullopt;
  struct stat st {};
  // Someone else's file (a shared /tmp) could describe CPUs that are not there.
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 || st.st_size > (16 << 20))
    return std::nullopt;
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(f.fd, text.data() + got, text.size() - got);
    if (n <= 0) return std::nullopt;
    got += static_cast<std::size_t>(n);
  }
  const std::string header = std::string(kFormat) + " " + key + "\n";
  if (text.compare(0, header.size(), header) != 0) return std::nullopt;
  return text.substr(header.size());
}

void write(const std::filesystem::path& file, const std::string& key, hwloc_topology_t topo) {
  char* xml = nullptr;
  int len = 0;
  if (hwloc_topology_export_xmlbuffer(topo, &xml, &len, 0) != 0) return;
  std::string text = std::string(kFormat) + " " + key + "\n";
  text.append(xml, static_cast<std::size_t>(len > 0 ? len - 1 : 0));  // len counts the NUL
  hwloc_free_xmlbuffer(topo, xml);
  std::error_code ec;
  if (file.has_parent_path()) {
    std::filesystem::create_directories(file.parent_path(), ec);
    if (ec) return;
  }
  const std::string tmp = file.string() + ".tmp." + std::to_string(::getpid());
  {
    Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600)};
    if (f.fd < 0) return;
    std::size_t put = 0;
    while (put < text.size()) {
      const ssize_t n = ::write(f.fd, text.data() + put, text.size() - put);
      if (n <= 0) {
        ::unlink(tmp.c_str());
        return;
      }
      put += static_cast<std::size_t>(n);
    }
  }
  if (std::rename(tmp.c_str(), file.c_str()) != 0) ::unlink(tmp.c_str());
}

}  // namespace spark::topo::cache
