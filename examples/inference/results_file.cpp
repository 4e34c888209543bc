#include "results_file.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

namespace spark::example {
namespace {

std::string sys_error(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1)
      throw std::runtime_error("SHA-256 is not available (OpenSSL)");
  }
  void add(const void* p, std::size_t n) { EVP_DigestUpdate(ctx_.get(), p, n); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &n);
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (unsigned i = 0; i < n; ++i) s += {digits[md[i] >> 4], digits[md[i] & 15]};
    return s;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

// The folder of path, for fsync after a rename or unlink in it.
std::string folder_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

void fsync_folder(const std::string& path) {
  const std::string dir = folder_of(path);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw std::invalid_argument(sys_error("cannot open the folder", dir));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw std::invalid_argument(sys_error("cannot fsync the folder", dir));
}

void write_all(int fd, const char* p, std::size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw std::runtime_error(sys_error("cannot write", path));
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::invalid_argument("cannot read '" + path + "'");
  return {std::istreambuf_iterator<char>(f), {}};
}

// Writes the job record so that it is either absent or complete: temporary file, fsync,
// rename, fsync of the folder.
void write_record(const std::string& path, const JobRecord& job) {
  const std::string tmp = path + ".tmp";
  const std::string text = job.to_json().dump() + "\n";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::invalid_argument(sys_error("cannot create", tmp));
  try {
    write_all(fd, text.data(), text.size(), tmp);
    if (::fsync(fd) != 0) throw std::runtime_error(sys_error("cannot fsync", tmp));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::invalid_argument(sys_error("cannot rename to", path));
  fsync_folder(path);
}

// Every field in which the recorded job differs from this one, as "FIELD is A there, B here"
// joined by "; "; empty when they match.
std::string differences(const nlohmann::json& recorded, const nlohmann::json& now) {
  std::string out;
  const auto add = [&](const std::string& text) { out += (out.empty() ? "" : "; ") + text; };
  for (const auto& [key, value] : now.items()) {
    const auto it = recorded.find(key);
    if (it == recorded.end())
      add(key + " is missing there");
    else if (*it != value)
      add(key + " is " + it->dump() + " there, " + value.dump() + " here");
  }
  for (const auto& [key, value] : recorded.items())
    if (!now.contains(key)) add(key + " is " + value.dump() + " there, absent here");
  return out;
}

}  // namespace

nlohmann::json JobRecord::to_json() const {
  return {{"format", "spark-batch-results/1"},
          {"program", program},
          {"model_sha256", model_sha256},
          {"input_sha256", input_sha256},
          {"requests", requests},
          {"new_tokens", new_tokens},
          {"reduce", reduce},
          {"ranks", ranks}};
}

std::string sha256_hex(const std::string& bytes) {
  Sha256 h;
  h.add(bytes.data(), bytes.size());
  return h.hex();
}

std::string sha256_file_hex(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::invalid_argument("cannot read '" + path + "'");
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.add(buf.data(), static_cast<std::size_t>(f.gcount()));
  }
  if (f.bad()) throw std::invalid_argument("cannot read '" + path + "'");
  return h.hex();
}

ResultsFile::ResultsFile(const std::string& path, const JobRecord& job, ExistingOutput existing,
                         const LineCheck& is_result,
                         const std::function<void(const std::string&)>& note)
    : path_(path) {
  const std::string record_path = path + ".job";
  const std::string fix =
      "; pass --restart-output to discard it and start over, or choose another --output";
  bool fresh = true;
  if (exists(record_path)) {
    nlohmann::json recorded;
    try {
      recorded = nlohmann::json::parse(read_file(record_path));
    } catch (const nlohmann::json::exception&) {
      recorded = nlohmann::json::object();
    }
    const std::string diff =
        recorded.is_object() ? differences(recorded, job.to_json()) : "it is not JSON";
    if (existing == ExistingOutput::resume && !diff.empty())
      throw std::invalid_argument("'" + path + "' holds the results of another job (" +
                                  record_path + ": " + diff + ")" + fix);
    fresh = existing == ExistingOutput::start_over || !diff.empty();
  } else if (existing == ExistingOutput::resume && exists(path)) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && st.st_size > 0)
      throw std::invalid_argument("'" + path + "' exists but has no job record (" + record_path +
                                  "), so it cannot be resumed" + fix);
  }
  if (fresh) {
    // Record first gone, then the results emptied, then the new record: a crash in between
    // leaves no record and an empty file, or a record over an empty file, never a record
    // over another job's results.
    if (::unlink(record_path.c_str()) != 0 && errno != ENOENT)
      throw std::invalid_argument(sys_error("cannot remove", record_path));
    fd_.fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd_.fd < 0) throw std::invalid_argument(sys_error("cannot create", path));
    if (::fsync(fd_.fd) != 0) throw std::invalid_argument(sys_error("cannot fsync", path));
    fsync_folder(path);
    write_record(record_path, job);
    return;
  }
  fd_.fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_.fd < 0) throw std::invalid_argument(sys_error("cannot open", path));
  const std::string text = read_file(path);
  std::size_t keep = 0;  // bytes of complete, valid lines
  while (keep < text.size()) {
    const auto nl = text.find('\n', keep);
    const bool last = nl == std::string::npos || nl + 1 == text.size();
    const bool valid = nl != std::string::npos && done_ < job.requests &&
                       is_result(done_, text.substr(keep, nl - keep));
    if (!valid) {
      if (!last)
        throw std::invalid_argument("'" + path + "' line " + std::to_string(done_ + 1) +
                                    " is not request " + std::to_string(done_) +
                                    "'s result, and more lines follow: the file was changed "
                                    "after it was written" +
                                    fix);
      note("'" + path + "': removed a torn last line (" + std::to_string(text.size() - keep) +
           " bytes) left by an interrupted run");
      if (::ftruncate(fd_.fd, static_cast<off_t>(keep)) != 0 || ::fsync(fd_.fd) != 0)
        throw std::invalid_argument(sys_error("cannot repair", path));
      break;
    }
    keep = nl + 1;
    ++done_;
  }
}

ResultsFile::Fd::~Fd() {
  if (fd >= 0) ::close(fd);
}

void ResultsFile::append(const std::string& lines, std::size_t count) {
  write_all(fd_.fd, lines.data(), lines.size(), path_);
  done_ += count;
}

void ResultsFile::commit(bool durable) {
  if (durable && ::fdatasync(fd_.fd) != 0)
    throw std::runtime_error(sys_error("cannot fsync", path_));
}

}  // namespace spark::example
