#include "slurm_allocation.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <numeric>

#include "spark/protocol/number.hpp"

extern char** environ;

namespace spark::launch::slurm {
namespace {

const std::string* find(const std::map<std::string, std::string>& env, const std::string& key) {
  const auto it = env.find(key);
  return it == env.end() ? nullptr : &it->second;
}

int positive_int(const std::string& text, std::string_view name) {
  std::int64_t value = 0;
  if (protocol::parse_integer(text, 1, INT32_MAX, value) != protocol::Integer::ok) {
    throw SlurmError(std::string(name) + "='" + text +
                     "' is not a positive integer; is the SLURM environment intact? "
                     "(unset SLURM_JOB_ID to run sparkrun outside the allocation)");
  }
  return static_cast<int>(value);
}

std::string short_name(std::string_view host) {
  return std::string(host.substr(0, host.find('.')));
}

}  // namespace

std::vector<std::string> Allocation::host_names() const {
  std::vector<std::string> names;
  names.reserve(nodes.size());
  for (const NodeSlots& n : nodes) names.push_back(n.name);
  return names;
}

bool Allocation::only_node_is(std::string_view hostname) const {
  if (nodes.size() != 1) return false;
  const std::string& node = nodes.front().name;
  if (!this_node.empty()) return node == this_node;
  return node == hostname || short_name(node) == short_name(hostname);
}

std::optional<Allocation> read_allocation(const std::map<std::string, std::string>& env,
                                          std::vector<int> cpus) {
  const std::string* job = find(env, "SLURM_JOB_ID");
  if (job == nullptr) job = find(env, "SLURM_JOBID");  // older SLURM releases
  if (job == nullptr) return std::nullopt;

  Allocation a;
  a.job_id = *job;
  if (a.job_id.empty() ||
      !std::all_of(a.job_id.begin(), a.job_id.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    throw SlurmError("SLURM_JOB_ID='" + a.job_id + "' is not a job number");
  }

  std::string list_name = "SLURM_JOB_NODELIST";
  const std::string* list = find(env, list_name);
  if (list == nullptr) list = find(env, list_name = "SLURM_NODELIST");
  const std::string* tasks = find(env, "SLURM_TASKS_PER_NODE");
  if (list == nullptr || tasks == nullptr) {
    throw SlurmError("SLURM_JOB_ID=" + a.job_id + " is set but " +
                     (list == nullptr ? "SLURM_JOB_NODELIST" : "SLURM_TASKS_PER_NODE") +
                     " is not: sparkrun cannot tell which nodes the allocation has "
                     "(run it from salloc or an sbatch script, or unset SLURM_JOB_ID)");
  }
  const std::vector<std::string> names = expand_hostlist(*list, list_name);
  const std::vector<int> counts = expand_counts(*tasks, "SLURM_TASKS_PER_NODE");
  if (names.size() != counts.size()) {
    throw SlurmError(list_name + "='" + *list + "' names " + std::to_string(names.size()) +
                     " nodes but SLURM_TASKS_PER_NODE='" + *tasks + "' gives counts for " +
                     std::to_string(counts.size()));
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(i), names[i]) !=
        names.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw SlurmError(list_name + "='" + *list + "' names node '" + names[i] + "' twice");
    }
    a.nodes.push_back(NodeSlots{names[i], counts[i]});
  }

  if (const std::string* n = find(env, "SLURM_NTASKS")) {
    a.ntasks = positive_int(*n, "SLURM_NTASKS");
  } else if (const std::string* np = find(env, "SLURM_NPROCS")) {
    a.ntasks = positive_int(*np, "SLURM_NPROCS");
  } else {
    a.ntasks = std::accumulate(counts.begin(), counts.end(), 0);
  }
  if (const std::string* c = find(env, "SLURM_CPUS_ON_NODE")) {
    a.cpus_on_node = positive_int(*c, "SLURM_CPUS_ON_NODE");
  }
  if (const std::string* s = find(env, "SLURM_STEP_ID")) a.step_id = *s;
  if (const std::string* node = find(env, "SLURMD_NODENAME")) a.this_node = *node;
  a.cpus = std::move(cpus);
  return a;
}

std::map<std::string, std::string> slurm_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (!entry.starts_with("SLURM_") && !entry.starts_with("SLURMD_")) continue;
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

std::vector<int> process_cpus() {
  // Sized for machines with many cpus; CPU_ALLOC grows as needed.
  for (int ncpus = 1024; ncpus <= (1 << 16); ncpus *= 4) {
    cpu_set_t* set = CPU_ALLOC(ncpus);
    if (set == nullptr) break;
    const std::size_t size = CPU_ALLOC_SIZE(ncpus);
    CPU_ZERO_S(size, set);
    if (sched_getaffinity(0, size, set) != 0) {
      const int err = errno;
      CPU_FREE(set);
      if (err == EINVAL) continue;  // the kernel's mask is larger than ours
      throw SlurmError(std::string("sched_getaffinity failed: ") + std::strerror(err));
    }
    std::vector<int> cpus;
    for (int c = 0; c < ncpus; ++c) {
      if (CPU_ISSET_S(c, size, set)) cpus.push_back(c);
    }
    CPU_FREE(set);
    return cpus;
  }
  throw SlurmError("sched_getaffinity failed: cpu mask larger than 65536 cpus");
}

std::optional<Allocation> read_allocation_from_process() {
  const std::map<std::string, std::string> env = slurm_environment();
  if (env.count("SLURM_JOB_ID") == 0 && env.count("SLURM_JOBID") == 0) return std::nullopt;
  return read_allocation(env, process_cpus());
}

}  // namespace spark::launch::slurm
