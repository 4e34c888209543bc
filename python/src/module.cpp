// libspark._core: libspark's Communicator for Python (pybind11). Thin: argument checks that
// give Python exceptions, the GIL released while a collective waits, errors translated to
// the libspark.* exception classes. The pure-Python package (libspark/__init__.py) re-exports.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "buffer_view.hpp"
#include "spark/cuda.hpp"
#include "spark/spark.hpp"

namespace py = pybind11;

namespace spark::python {
namespace {

// Exception classes (set once at import; module state, not mutable afterwards).
struct Exceptions {
  py::handle error, invalid_usage, config_error, bootstrap_error, comm_failure;
};
Exceptions& exceptions() {
  static Exceptions e;
  return e;
}

const char* cause_name(FailureCause c) {
  switch (c) {
    case FailureCause::timeout:
      return "timeout";
    case FailureCause::peer_closed:
      return "peer_closed";
    case FailureCause::peer_error:
      return "peer_error";
    case FailureCause::remote_abort:
      return "remote_abort";
    case FailureCause::mismatch:
      return "mismatch";
  }
  return "unknown";
}

std::string field(const char* data, std::size_t capacity) {
  return {data, strnlen(data, capacity)};
}

// A Python object with torch.distributed.Store's methods (set, get, add, check, wait): a
// torch TCPStore / FileStore / PrefixStore, or anything shaped like them.
class PythonStore final : public KeyValueStore {
 public:
  explicit PythonStore(py::object store) : store_(std::move(store)) {}
  ~PythonStore() override {
    py::gil_scoped_acquire gil;
    store_ = py::object();
  }
  void set(const std::string& key, const std::vector<std::byte>& value) override {
    py::gil_scoped_acquire gil;
    store_.attr("set")(key, py::bytes(reinterpret_cast<const char*>(value.data()), value.size()));
  }
  std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) override {
    py::gil_scoped_acquire gil;
    store_.attr("wait")(py::list(py::make_tuple(key)), timeout);  // raises after timeout
    const auto v = store_.attr("get")(key).cast<std::string>();
    const auto* b = reinterpret_cast<const std::byte*>(v.data());
    return {b, b + v.size()};
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    py::gil_scoped_acquire gil;
    return store_.attr("add")(key, delta).cast<std::int64_t>();
  }
  bool contains(const std::string& key) override {
    py::gil_scoped_acquire gil;
    return store_.attr("check")(py::list(py::make_tuple(key))).cast<bool>();
  }

 private:
  py::object store_;
};

// Device allreduces in flight in one family of communicators (a world and its splits and
// dups share connections, so a host collective on any of them must wait for the device work
// of all of them: the proxy threads use those connections).
class DeviceWork {
 public:
  void enqueued(const std::shared_ptr<cuda::DeviceComm>& d) {
    std::lock_guard lock(mu_);
    for (const auto& w : pending_)
      if (w.lock() == d) return;
    pending_.push_back(d);
  }
  // Waits for all of it (GIL released by the caller). On an error the devices not yet waited
  // for stay pending.
  void finish() {
    std::vector<std::weak_ptr<cuda::DeviceComm>> todo;
    {
      std::lock_guard lock(mu_);
      todo.swap(pending_);
    }
    for (std::size_t i = 0; i < todo.size(); ++i) {
      try {
        if (auto d = todo[i].lock()) d->synchronize();
      } catch (...) {
        std::lock_guard lock(mu_);
        pending_.insert(pending_.end(), todo.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                        todo.end());
        throw;
      }
    }
  }

 private:
  std::mutex mu_;
  std::vector<std::weak_ptr<cuda::DeviceComm>> pending_;
};

// The Python-side communicator. close() may run while another thread still waits in a
// collective: every call holds its own reference, so the communicator is destroyed when the
// last call returns. A sub-communicator (split, dup) borrows its parent's connections and must
// be destroyed before it: its shared_ptr's deleter holds the parent, so the parent lives until
// the last reference to the child is gone, whichever Python object is dropped or closed first.
class PyComm {
 public:
  explicit PyComm(Communicator comm)
      : PyComm(std::make_shared<Communicator>(std::move(comm)), std::make_shared<DeviceWork>()) {}
  PyComm(Communicator sub, std::shared_ptr<Communicator> parent, const PyComm& of)
      : PyComm(std::shared_ptr<Communicator>(new Communicator(std::move(sub)),
                                             [parent = std::move(parent)](Communicator* c) mutable {
                                               delete c;        // the child first,
                                               parent.reset();  // then (maybe) the parent
                                             }),
               of.device_work_) {}

  std::shared_ptr<Communicator> get() const {
    std::lock_guard lock(mu_);
    if (!comm_)
      throw InvalidUsage(
          "the communicator is closed (close() was called); make a new one with "
          "libspark.init()");
    return comm_;
  }
  void close() {
    std::shared_ptr<Communicator> last;
    std::shared_ptr<cuda::DeviceComm> device;
    {
      std::lock_guard lock(mu_);
      last = std::move(comm_);
      device = std::move(device_);
    }
    py::gil_scoped_release nogil;  // destroying them may wait for the GPU and the transports
    device.reset();
    last.reset();
  }

  // The device path (allreduce of GPU buffers), made on first use: libspark's DeviceComm on
  // this communicator. Its deleter keeps the communicator alive until it is gone.
  std::shared_ptr<cuda::DeviceComm> device() const {
    auto comm = get();
    std::lock_guard lock(mu_);
    if (!device_) {
      Communicator* raw = comm.get();
      device_ = std::shared_ptr<cuda::DeviceComm>(new cuda::DeviceComm(*raw),
                                                  [comm](cuda::DeviceComm* d) mutable {
                                                    delete d;      // the device side first,
                                                    comm.reset();  // then (maybe) the communicator
                                                  });
    }
    device_work_->enqueued(device_);
    return device_;
  }
  // Host collectives share the connections with the device path's proxy threads: one at a
  // time, in program order. So a host call (and a split or dup) first waits for the device
  // allreduces enqueued before it in this family (GIL released by the caller).
  void finish_device_work() const { device_work_->finish(); }
  std::optional<FailureRecord> failure() const {
    std::shared_ptr<cuda::DeviceComm> device;
    {
      std::lock_guard lock(mu_);
      device = device_;
    }
    return device ? device->failure() : get()->failure();  // the GPU side's record first
  }
  bool closed() const {
    std::lock_guard lock(mu_);
    return !comm_;
  }

  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string name_;

 private:
  PyComm(std::shared_ptr<Communicator> comm, std::shared_ptr<DeviceWork> work)
      : comm_(std::move(comm)), device_work_(std::move(work)) {
    rank_ = comm_->rank();
    size_ = comm_->size();
    local_rank_ = comm_->local_rank();
    local_size_ = comm_->local_size();
    name_ = comm_->name();
  }

  mutable std::mutex mu_;
  std::shared_ptr<Communicator> comm_;
  mutable std::shared_ptr<cuda::DeviceComm> device_;
  std::shared_ptr<DeviceWork> device_work_;  ///< shared with the family (splits, dups)
};

void same_dtype(const BufferView& a, const BufferView& b) {
  if (a.dtype() != b.dtype())
    throw py::type_error("send and recv have different dtypes (" +
                         std::string(to_string(a.dtype())) + " vs " +
                         std::string(to_string(b.dtype())) + "); pass arrays of one dtype");
}

[[noreturn]] void count_error(const char* op, const std::string& what) {
  throw py::value_error(std::string(op) + ": " + what);
}

// Runs a libspark call with the GIL released (the views stay alive in the caller's frame).
template <class F>
void call(const PyComm& pc, F&& f) {
  auto comm = pc.get();
  py::gil_scoped_release nogil;
  pc.finish_device_work();
  f(*comm);
}

std::vector<std::size_t> sizes(const std::vector<std::size_t>& v, int n, const char* op,
                               const char* name) {
  if (static_cast<int>(v.size()) != n)
    count_error(op, std::string(name) + " has " + std::to_string(v.size()) +
                        " entries; it needs one per rank (" + std::to_string(n) + ")");
  return v;
}

py::object record_object(const FailureRecord& r) {
  return py::cast(r);
}

void translate(std::exception_ptr p) {
  auto& ex = exceptions();
  try {
    if (p) std::rethrow_exception(p);
  } catch (const CommFailure& e) {
    py::object exc = py::reinterpret_borrow<py::object>(ex.comm_failure)(e.what());
    exc.attr("record") = record_object(e.record());
    PyErr_SetObject(ex.comm_failure.ptr(), exc.ptr());
  } catch (const InvalidUsage& e) {
    PyErr_SetString(ex.invalid_usage.ptr(), e.what());
  } catch (const ConfigError& e) {
    PyErr_SetString(ex.config_error.ptr(), e.what());
  } catch (const BootstrapError& e) {
    PyErr_SetString(ex.bootstrap_error.ptr(), e.what());
  } catch (const Error& e) {
    PyErr_SetString(ex.error.ptr(), e.what());
  }
}

py::handle new_exception(py::module_& m, const char* name, py::handle bases, const char* doc) {
  const std::string full = std::string("libspark.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(full.c_str(), doc, bases.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(type));
  return type;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "libspark collectives with fail-stop timeouts (see docs/python.md)";

  // --- exceptions ---
  auto& ex = exceptions();
  ex.error = new_exception(m, "Error", PyExc_RuntimeError, "Any error raised by libspark.");
  ex.invalid_usage = new_exception(m, "InvalidUsage",
                                   py::make_tuple(ex.error, py::handle(PyExc_ValueError)).release(),
                                   "Wrong arguments or calls in the wrong order.");
  ex.config_error = new_exception(m, "ConfigError", ex.error,
                                  "A SPARK_* / SPARKNET_* variable with a refused value.");
  ex.bootstrap_error =
      new_exception(m, "BootstrapError", ex.error, "Ranks could not find each other.");
  ex.comm_failure = new_exception(
      m, "CommFailure", ex.error,
      "The communicator failed (fail-stop). str() is the one-line record; .record holds it.");
  py::register_exception_translator(&translate);

  // --- constants ---
  py::enum_<ReduceOp>(m, "ReduceOp")
      .value("SUM", ReduceOp::sum)
      .value("PROD", ReduceOp::prod)
      .value("MIN", ReduceOp::min)
      .value("MAX", ReduceOp::max)
      .value("AVG", ReduceOp::avg)
      .export_values();

  // --- failure record ---
  py::class_<FailureRecord>(m, "FailureRecord", "Who waited on whom, where, and for how long.")
      .def_readonly("rank", &FailureRecord::rank)
      .def_readonly("peer", &FailureRecord::peer)
      .def_readonly("seq", &FailureRecord::seq)
      .def_readonly("step", &FailureRecord::step)
      .def_readonly("waited_ms", &FailureRecord::waited_ms)
      .def_readonly("timeout_ms", &FailureRecord::timeout_ms)
      .def_property_readonly("cause", [](const FailureRecord& r) { return cause_name(r.cause); })
      .def_property_readonly("lane",
                             [](const FailureRecord& r) { return field(r.lane, sizeof r.lane); })
      .def_property_readonly("op", [](const FailureRecord& r) { return field(r.op, sizeof r.op); })
      .def_property_readonly(
          "detail", [](const FailureRecord& r) { return field(r.detail, sizeof r.detail); })
      .def_property_readonly(
          "time", [](const FailureRecord& r) { return static_cast<double>(r.time_unix_ns) * 1e-9; },
          "wall-clock time of detection, seconds since the epoch")
      .def("__str__", [](const FailureRecord& r) { return to_string(r); })
      .def("__repr__",
           [](const FailureRecord& r) { return "<libspark.FailureRecord " + to_string(r) + ">"; });

  // --- communicator ---
  py::class_<PyComm>(m, "Communicator",
                     "A group of ranks; every collective is called by every rank in the same "
                     "order. Made by libspark.init(), split() and dup().")
      .def_property_readonly("rank", [](const PyComm& c) { return c.rank_; })
      .def_property_readonly("size", [](const PyComm& c) { return c.size_; })
      .def_property_readonly("local_rank", [](const PyComm& c) { return c.local_rank_; })
      .def_property_readonly("local_size", [](const PyComm& c) { return c.local_size_; })
      .def_property_readonly("closed", &PyComm::closed)
      .def(
          "allreduce",
          [](const PyComm& c, py::handle send, py::object recv, ReduceOp op,
             std::optional<std::uintptr_t> stream) -> py::object {
            const bool in_place = recv.is_none();
            BufferView s(send, "send", in_place, true);
            std::optional<BufferView> r;
            if (!in_place) {
              r.emplace(recv, "recv", true, true);
              same_dtype(s, *r);
              if (s.count() != r->count())
                count_error("allreduce", "send has " + std::to_string(s.count()) +
                                             " elements, recv " + std::to_string(r->count()) +
                                             "; they must be equal");
              if (s.on_device() != r->on_device())
                throw py::type_error(
                    "allreduce: send and recv must both be GPU memory or both host memory; "
                    "move one (x.cuda() / x.cpu())");
            }
            void* out = in_place ? s.data() : r->data();
            if (s.on_device()) {
              // Enqueued on the stream (the argument, else the producer's, else the legacy
              // default): returns at once; the result is ready in stream order.
              const std::uintptr_t on = stream.value_or(s.stream().value_or(0));
              auto device = c.device();
              py::gil_scoped_release nogil;
              device->allreduce(s.data(), out, s.count(), s.dtype(), op,
                                reinterpret_cast<cuda::Stream>(on == 1 ? 0 : on));
            } else {
              if (stream)
                throw py::value_error(
                    "allreduce: stream= is for GPU buffers; these are host memory");
              call(c,
                   [&](Communicator& k) { k.allreduce(s.data(), out, s.count(), s.dtype(), op); });
            }
            return in_place ? py::reinterpret_borrow<py::object>(send) : recv;
          },
          py::arg("send"), py::arg("recv") = py::none(), py::arg("op") = ReduceOp::sum,
          py::arg("stream") = py::none(),
          "Reduces over every rank; recv=None: in place. Returns the result array. GPU buffers "
          "(CUDA tensors, __cuda_array_interface__ arrays) take libspark's device path: "
          "enqueued on `stream` (a cudaStream_t as int; default: the tensor's current torch "
          "stream or the array's own, else the legacy default stream), returning at once.")
      .def(
          "reduce_scatter",
          [](const PyComm& c, py::handle send, py::object recv, ReduceOp op) -> py::object {
            BufferView s(send, "send", false), r(recv, "recv", true);
            same_dtype(s, r);
            if (s.count() != r.count() * static_cast<std::size_t>(c.size_))
              count_error("reduce_scatter", "send has " + std::to_string(s.count()) +
                                                " elements; it needs size * len(recv) = " +
                                                std::to_string(r.count() * c.size_));
            call(c, [&](Communicator& k) {
              k.reduce_scatter(s.data(), r.data(), r.count(), s.dtype(), op);
            });
            return recv;
          },
          py::arg("send"), py::arg("recv"), py::arg("op") = ReduceOp::sum,
          "send holds size blocks of len(recv); rank r receives block r reduced.")
      .def(
          "allgather",
          [](const PyComm& c, py::handle send, py::object recv) -> py::object {
            BufferView s(send, "send", false), r(recv, "recv", true);
            same_dtype(s, r);
            if (r.count() != s.count() * static_cast<std::size_t>(c.size_))
              count_error("allgather", "recv has " + std::to_string(r.count()) +
                                           " elements; it needs size * len(send) = " +
                                           std::to_string(s.count() * c.size_));
            call(c,
                 [&](Communicator& k) { k.allgather(s.data(), r.data(), s.count(), s.dtype()); });
            return recv;
          },
          py::arg("send"), py::arg("recv"), "recv receives block r from rank r.")
      .def(
          "broadcast",
          [](const PyComm& c, py::object buffer, int root) -> py::object {
            if (root < 0 || root >= c.size_)
              count_error("broadcast", "root " + std::to_string(root) + " is out of range 0.." +
                                           std::to_string(c.size_ - 1));
            BufferView b(buffer, "buffer", true);
            call(c, [&](Communicator& k) { k.broadcast(b.data(), b.count(), b.dtype(), root); });
            return buffer;
          },
          py::arg("buffer"), py::arg("root") = 0)
      .def(
          "alltoall",
          [](const PyComm& c, py::handle send, py::object recv) -> py::object {
            BufferView s(send, "send", false), r(recv, "recv", true);
            same_dtype(s, r);
            const auto n = static_cast<std::size_t>(c.size_);
            if (s.count() != r.count() || s.count() % n != 0)
              count_error("alltoall", "send and recv need the same length, a multiple of size (" +
                                          std::to_string(n) + "); got " +
                                          std::to_string(s.count()) + " and " +
                                          std::to_string(r.count()));
            call(c, [&](Communicator& k) {
              k.alltoall(s.data(), r.data(), s.count() / n, s.dtype());
            });
            return recv;
          },
          py::arg("send"), py::arg("recv"), "Block r of send goes to rank r.")
      .def(
          "alltoallv",
          [](const PyComm& c, py::handle send, std::vector<std::size_t> send_counts,
             std::vector<std::size_t> send_displs, py::object recv,
             std::vector<std::size_t> recv_counts,
             std::vector<std::size_t> recv_displs) -> py::object {
            BufferView s(send, "send", false), r(recv, "recv", true);
            same_dtype(s, r);
            const int n = c.size_;
            sizes(send_counts, n, "alltoallv", "send_counts");
            sizes(send_displs, n, "alltoallv", "send_displs");
            sizes(recv_counts, n, "alltoallv", "recv_counts");
            sizes(recv_displs, n, "alltoallv", "recv_displs");
            for (int p = 0; p < n; ++p) {
              const auto i = static_cast<std::size_t>(p);
              if (send_displs[i] + send_counts[i] > s.count())
                count_error("alltoallv",
                            "block for rank " + std::to_string(p) + " runs past the end of send");
              if (recv_displs[i] + recv_counts[i] > r.count())
                count_error("alltoallv",
                            "block from rank " + std::to_string(p) + " runs past the end of recv");
            }
            call(c, [&](Communicator& k) {
              k.alltoallv(s.data(), send_counts.data(), send_displs.data(), r.data(),
                          recv_counts.data(), recv_displs.data(), s.dtype());
            });
            return recv;
          },
          py::arg("send"), py::arg("send_counts"), py::arg("send_displs"), py::arg("recv"),
          py::arg("recv_counts"), py::arg("recv_displs"),
          "Counts and displacements in elements, one per rank.")
      .def(
          "send",
          [](const PyComm& c, py::handle buffer, int peer) {
            BufferView b(buffer, "buffer", false);
            call(c, [&](Communicator& k) { k.send(b.data(), b.count(), b.dtype(), peer); });
          },
          py::arg("buffer"), py::arg("peer"))
      .def(
          "recv",
          [](const PyComm& c, py::object buffer, int peer) -> py::object {
            BufferView b(buffer, "buffer", true);
            call(c, [&](Communicator& k) { k.recv(b.data(), b.count(), b.dtype(), peer); });
            return buffer;
          },
          py::arg("buffer"), py::arg("peer"))
      .def(
          "barrier", [](const PyComm& c) { call(c, [](Communicator& k) { k.barrier(); }); },
          "Waits for every rank (SPARK_BARRIER_TIMEOUT_MS); call it after long preparation.")
      .def(
          "failure", [](const PyComm& c) -> std::optional<FailureRecord> { return c.failure(); },
          "The failure record, or None while the communicator is healthy.")
      .def(
          "check_health",
          [](const PyComm& c) {
            if (auto r = c.failure()) throw CommFailure(*r);
          },
          "Raises libspark.CommFailure (with .record) if the communicator has failed.")
      .def(
          "set_timeout_ms",
          [](const PyComm& c, std::uint32_t ms) {
            if (ms == 0)
              throw py::value_error("set_timeout_ms: 0 ms would fail every wait; give >= 1");
            c.get()->set_timeout_ms(ms);
          },
          py::arg("ms"), "Deadline of every following wait on a peer; safe from any thread.")
      .def_property_readonly("timeout_ms", [](const PyComm& c) { return c.get()->timeout_ms(); })
      .def(
          "split",
          [](const PyComm& c, int color, std::optional<int> key) -> std::unique_ptr<PyComm> {
            auto parent = c.get();
            std::optional<Communicator> sub;
            {
              py::gil_scoped_release nogil;
              c.finish_device_work();
              sub = parent->split(color, key.value_or(c.rank_));
            }
            if (!sub) return nullptr;
            return std::make_unique<PyComm>(std::move(*sub), std::move(parent), c);
          },
          py::arg("color"), py::arg("key") = py::none(),
          "MPI_Comm_split, collective over this communicator: ranks passing the same color >= 0 "
          "form a new Communicator, ranked by key (default: the rank here, keeping this order), "
          "then by rank here; a negative color (libspark.UNDEFINED) gets None. The new one "
          "reuses these connections, has its own sequence numbers and timeout (this one's, then "
          "settable) and keeps this one alive; a failure in either fails both.")
      .def(
          "dup",
          [](const PyComm& c) {
            auto parent = c.get();
            std::optional<Communicator> sub;
            {
              py::gil_scoped_release nogil;
              c.finish_device_work();
              sub = parent->dup();
            }
            return std::make_unique<PyComm>(std::move(*sub), std::move(parent), c);
          },
          "The same ranks in the same order as a separate Communicator (collective); e.g. for a "
          "library that must not mix its calls with the caller's.")
      .def_property_readonly(
          "name", [](const PyComm& c) { return c.name_; },
          "\"world\", or e.g. \"comm 1 (color 0, size 2)\", \"comm 1.2 (dup, size 2)\" (as "
          "failure records name it)")
      .def("close", &PyComm::close,
           "Closes this communicator: every call on it afterwards raises. The connections "
           "close with the last communicator that uses them (its splits and dups keep them).")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyComm& c, py::args) { c.close(); })
      .def("__repr__", [](const PyComm& c) {
        return "<libspark.Communicator " + c.name_ + " rank " + std::to_string(c.rank_) + " of " +
               std::to_string(c.size_) + (c.closed() ? " (closed)>" : ">");
      });

  m.def(
      "init",
      [](py::object store, py::object rank, py::object size) {
        if (store.is_none()) {
          if (!rank.is_none() || !size.is_none())
            throw py::value_error(
                "init: rank and size are only for init(store=..., rank=..., "
                "size=...); without a store they come from the launcher");
          py::gil_scoped_release nogil;
          return std::make_unique<PyComm>(init());
        }
        if (rank.is_none() || size.is_none())
          throw py::value_error("init(store=...): give rank= and size= as well");
        const int r = rank.cast<int>(), n = size.cast<int>();
        auto kv = std::make_shared<PythonStore>(store);
        py::gil_scoped_release nogil;
        return std::make_unique<PyComm>(init(std::move(kv), r, n));
      },
      py::arg("store") = py::none(), py::arg("rank") = py::none(), py::arg("size") = py::none(),
      "Finds the other ranks (PMIx, SPARK_RANK/... or torchrun's RANK/WORLD_SIZE/MASTER_ADDR/"
      "MASTER_PORT, singleton) or wires up over `store` (a torch.distributed.Store), connects "
      "and returns after a barrier.");
  m.def("built_with_cuda", &cuda::built_with_cuda,
        "Whether this libspark has the device path (allreduce of GPU buffers).");
  m.attr("UNDEFINED") = -1;  // MPI_UNDEFINED: split(UNDEFINED) returns None
  m.attr("__version__") = SPARK_PYTHON_VERSION;
}

}  // namespace spark::python
