// The hwloc topology of this machine, loaded once with only what PMIx needs (cores and
// caches; no PCI/I/O scan, no GPU plugins) and handed to the PMIx server, which would
// otherwise run its own, much slower, discovery. (The topology part will later hand over
// the topology it loads for binding instead.)
#pragma once

namespace spark::launch {

class LocalTopology {
 public:
  LocalTopology();  // never throws: on failure get() is null and PMIx discovers by itself
  ~LocalTopology();
  LocalTopology(const LocalTopology&) = delete;
  LocalTopology& operator=(const LocalTopology&) = delete;
  void* get() const { return topo_; }  // hwloc_topology_t or null

 private:
  void* topo_ = nullptr;
};

}  // namespace spark::launch
