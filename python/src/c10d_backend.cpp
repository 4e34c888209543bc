// sparkrun._c10d: the torch.distributed backend "spark" (c10d ProcessGroup over libspark),
// compiled against Debian's libtorch-dev (1.13). One translation unit on purpose: libtorch's
// headers cost most of the build time, so they are parsed once.
//
// Every group wires up over the c10d Store torch hands in (spark::init(store, rank, size)),
// so dist.new_group gets its own communicator as with Gloo and NCCL. Operations run at call
// time in the caller's thread (torch releases the GIL around them) and return a Work that is
// already complete, or carries the error: the one-line failure record. No progress thread, so
// a 1 KiB all_reduce costs what libspark costs.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spark/spark.hpp"

namespace py = pybind11;

// torch binds its classes with c10::intrusive_ptr holders (torch/csrc/utils/pybind.h says the
// same; that header pulls in much more).
PYBIND11_DECLARE_HOLDER_TYPE(T, c10::intrusive_ptr<T>, true);

namespace spark::python {
namespace {

// torch's c10d Store as libspark's KeyValueStore.
class TorchStore final : public KeyValueStore {
 public:
  explicit TorchStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<std::byte>& value) override {
    const auto* b = reinterpret_cast<const std::uint8_t*>(value.data());
    store_->set(key, std::vector<std::uint8_t>(b, b + value.size()));
  }
  std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) override {
    store_->wait({key}, timeout);
    const auto v = store_->get(key);
    const auto* b = reinterpret_cast<const std::byte*>(v.data());
    return {b, b + v.size()};
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return store_->add(key, delta);
  }
  bool contains(const std::string& key) override { return store_->check({key}); }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

DType dtype_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return DType::f32;
    case at::kDouble:
      return DType::f64;
    case at::kHalf:
      return DType::f16;
    case at::kBFloat16:
      return DType::bf16;
    case at::kInt:
      return DType::i32;
    case at::kLong:
      return DType::i64;
    case at::kByte:
      return DType::u8;
    default:
      TORCH_CHECK(false, "backend spark: tensor dtype ", t.scalar_type(),
                  " is not supported; use float32, float64, float16, bfloat16, int32, int64 or "
                  "uint8");
  }
}

const at::Tensor& checked(const at::Tensor& t) {
  // No device path in the backend (no copy to host behind the user's back either: a silent
  // device-host round trip per call would hide where the time goes).
  TORCH_CHECK(t.device().is_cpu(), "backend spark: ", t.device(),
              " tensors are not supported: backend spark takes CPU tensors (t.cpu(), and copy "
              "the result back), or give GPU tensors to a group of backend nccl, e.g. "
              "dist.new_group(backend=\"nccl\")");
  TORCH_CHECK(t.is_contiguous(),
              "backend spark: the tensor is not contiguous; pass "
              "t.contiguous()");
  (void)dtype_of(t);
  return t;
}

ReduceOp op_of(const c10d::ReduceOp& op) {
  switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::SUM:
      return ReduceOp::sum;
    case c10d::ReduceOp::PRODUCT:
      return ReduceOp::prod;
    case c10d::ReduceOp::MIN:
      return ReduceOp::min;
    case c10d::ReduceOp::MAX:
      return ReduceOp::max;
    case c10d::ReduceOp::AVG:
      return ReduceOp::avg;
    default:
      TORCH_CHECK(false, "backend spark: ReduceOp ", static_cast<int>(op.op_),
                  " is not supported; use SUM, PRODUCT, MIN, MAX or AVG");
  }
}

const at::Tensor& single(const std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(ts.size() == 1, "backend spark: ", op, " takes one tensor per call, got ", ts.size());
  return checked(ts[0]);
}

void same_shape_dtype(const at::Tensor& a, const at::Tensor& b, const char* op) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "backend spark: ", op,
              ": tensors of different dtypes (", a.scalar_type(), " vs ", b.scalar_type(), ")");
  TORCH_CHECK(a.numel() == b.numel(), "backend spark: ", op, ": tensors of ", a.numel(), " and ",
              b.numel(), " elements; they must match");
}

// A completed Work: the operation ran before it was made.
class SparkWork final : public c10d::Work {
 public:
  SparkWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
            std::exception_ptr error)
      : Work(rank, type, title), outputs_(std::move(outputs)) {
    future_ =
        c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
    finish(error);
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupSpark final : public c10d::ProcessGroup {
 public:
  ProcessGroupSpark(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size)
      : ProcessGroup(rank, size),
        comm_(spark::init(std::make_shared<TorchStore>(store), rank, size)) {}

  const std::string getBackendName() const override { return "spark"; }
  Communicator& comm() noexcept { return comm_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    return run(c10d::OpType::BROADCAST, "spark:broadcast", tensors, [&] {
      const auto& t = single(tensors, "broadcast");
      comm_.broadcast(t.data_ptr(), numel(t), dtype_of(t), static_cast<int>(opts.rootRank));
    });
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    return run(c10d::OpType::ALLREDUCE, "spark:all_reduce", tensors, [&] {
      const auto op = op_of(opts.reduceOp);
      for (auto& t : tensors) {
        checked(t);
        comm_.allreduce(t.data_ptr(), t.data_ptr(), numel(t), dtype_of(t), op);
      }
    });
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override {
    return allreduce(tensors, opts);
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    return run(c10d::OpType::REDUCE, "spark:reduce", tensors, [&] {
      const auto& t = single(tensors, "reduce");
      const auto op = op_of(opts.reduceOp);
      if (getRank() == opts.rootRank) {
        comm_.allreduce(t.data_ptr(), t.data_ptr(), numel(t), dtype_of(t), op);
      } else {  // only the root's tensor changes
        auto scratch = at::empty_like(t);
        comm_.allreduce(t.data_ptr(), scratch.data_ptr(), numel(t), dtype_of(t), op);
      }
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions&) override {
    std::vector<at::Tensor> flat_out;
    for (auto& list : outputs) flat_out.insert(flat_out.end(), list.begin(), list.end());
    return run(c10d::OpType::ALLGATHER, "spark:all_gather", flat_out, [&] {
      const auto& in = single(inputs, "all_gather");
      TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                  "backend spark: all_gather needs one output list of ", getSize(), " tensors");
      for (auto& o : outputs[0]) same_shape_dtype(checked(o), in, "all_gather");
      auto flat = at::empty({static_cast<std::int64_t>(numel(in)) * getSize()}, in.options());
      comm_.allgather(in.data_ptr(), flat.data_ptr(), numel(in), dtype_of(in));
      for (int r = 0; r < getSize(); ++r)
        outputs[0][static_cast<std::size_t>(r)].view({-1}).copy_(
            flat.narrow(0, static_cast<std::int64_t>(numel(in)) * r, numel(in)));
    });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions&) override {
    return run(c10d::OpType::_ALLGATHER_BASE, "spark:_all_gather_base", {output}, [&] {
      checked(input);
      checked(output);
      TORCH_CHECK(output.scalar_type() == input.scalar_type() &&
                      output.numel() == input.numel() * getSize(),
                  "backend spark: all_gather_into_tensor needs an output of size * ", input.numel(),
                  " elements of the input's dtype");
      comm_.allgather(input.data_ptr(), output.data_ptr(), numel(input), dtype_of(input));
    });
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    return run(c10d::OpType::REDUCE_SCATTER, "spark:reduce_scatter", outputs, [&] {
      const auto& out = single(outputs, "reduce_scatter");
      TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                  "backend spark: reduce_scatter needs one input list of ", getSize(), " tensors");
      for (auto& i : inputs[0]) same_shape_dtype(checked(i), out, "reduce_scatter");
      auto flat = at::cat(inputs[0]).contiguous();
      comm_.reduce_scatter(flat.data_ptr(), out.data_ptr(), numel(out), dtype_of(out),
                           op_of(opts.reduceOp));
    });
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    return run(c10d::OpType::_REDUCE_SCATTER_BASE, "spark:_reduce_scatter_base", {output}, [&] {
      checked(input);
      checked(output);
      TORCH_CHECK(output.scalar_type() == input.scalar_type() &&
                      input.numel() == output.numel() * getSize(),
                  "backend spark: reduce_scatter_tensor needs an input of size * ", output.numel(),
                  " elements of the output's dtype");
      comm_.reduce_scatter(input.data_ptr(), output.data_ptr(), numel(output), dtype_of(output),
                           op_of(opts.reduceOp));
    });
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<std::int64_t>& out_splits,
                                               std::vector<std::int64_t>& in_splits,
                                               const c10d::AllToAllOptions&) override {
    return run(c10d::OpType::ALLTOALL_BASE, "spark:all_to_all_single", {output}, [&] {
      checked(input);
      checked(output);
      TORCH_CHECK(input.scalar_type() == output.scalar_type(),
                  "backend spark: all_to_all_single: input and output dtypes differ");
      const auto n = static_cast<std::size_t>(getSize());
      if (out_splits.empty() && in_splits.empty()) {
        TORCH_CHECK(input.numel() == output.numel() && numel(input) % n == 0,
                    "backend spark: all_to_all_single needs input and output of equal size, a "
                    "multiple of the group size");
        comm_.alltoall(input.data_ptr(), output.data_ptr(), numel(input) / n, dtype_of(input));
        return;
      }
      std::vector<std::size_t> sc, sd, rc, rd;
      counts(input, in_splits, sc, sd, "input");
      counts(output, out_splits, rc, rd, "output");
      comm_.alltoallv(input.data_ptr(), sc.data(), sd.data(), output.data_ptr(), rc.data(),
                      rd.data(), dtype_of(input));
    });
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions&) override {
    return run(c10d::OpType::ALLTOALL, "spark:all_to_all", outputs, [&] {
      const auto n = static_cast<std::size_t>(getSize());
      TORCH_CHECK(inputs.size() == n && outputs.size() == n, "backend spark: all_to_all needs ", n,
                  " input and ", n, " output tensors");
      std::vector<std::size_t> sc(n), sd(n), rc(n), rd(n);
      std::size_t s = 0, r = 0;
      for (std::size_t p = 0; p < n; ++p) {
        checked(inputs[p]);
        checked(outputs[p]);
        TORCH_CHECK(inputs[p].scalar_type() == inputs[0].scalar_type() &&
                        outputs[p].scalar_type() == inputs[0].scalar_type(),
                    "backend spark: all_to_all: tensors of different dtypes");
        sc[p] = numel(inputs[p]), sd[p] = s, s += sc[p];
        rc[p] = numel(outputs[p]), rd[p] = r, r += rc[p];
      }
      auto in = at::cat(inputs).contiguous();
      auto out = at::empty({static_cast<std::int64_t>(r)}, outputs[0].options());
      comm_.alltoallv(in.data_ptr(), sc.data(), sd.data(), out.data_ptr(), rc.data(), rd.data(),
                      dtype_of(in));
      for (std::size_t p = 0; p < n; ++p)
        outputs[p].view({-1}).copy_(
            out.narrow(0, static_cast<std::int64_t>(rd[p]), static_cast<std::int64_t>(rc[p])));
    });
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    std::vector<at::Tensor> flat_out;
    for (auto& list : outputs) flat_out.insert(flat_out.end(), list.begin(), list.end());
    return run(c10d::OpType::GATHER, "spark:gather", flat_out, [&] {
      const auto& in = single(inputs, "gather");
      const int root = static_cast<int>(opts.rootRank);
      if (getRank() != root) {
        comm_.send(in.data_ptr(), numel(in), dtype_of(in), root);
        return;
      }
      TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                  "backend spark: gather needs one output list of ", getSize(), " tensors");
      for (int r = 0; r < getSize(); ++r) {
        auto& o = outputs[0][static_cast<std::size_t>(r)];
        same_shape_dtype(checked(o), in, "gather");
        if (r == root) {
          o.copy_(in);
        } else {
          comm_.recv(o.data_ptr(), numel(o), dtype_of(o), r);
        }
      }
    });
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    return run(c10d::OpType::SCATTER, "spark:scatter", outputs, [&] {
      const auto& out = single(outputs, "scatter");
      const int root = static_cast<int>(opts.rootRank);
      if (getRank() != root) {
        comm_.recv(out.data_ptr(), numel(out), dtype_of(out), root);
        return;
      }
      TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                  "backend spark: scatter needs one input list of ", getSize(), " tensors");
      for (int r = 0; r < getSize(); ++r) {
        const auto& i = inputs[0][static_cast<std::size_t>(r)];
        same_shape_dtype(checked(i), out, "scatter");
        if (r == root) {
          out.copy_(i);
        } else {
          comm_.send(i.data_ptr(), numel(i), dtype_of(i), r);
        }
      }
    });
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int) override {
    return run(c10d::OpType::SEND, "spark:send", tensors, [&] {
      const auto& t = single(tensors, "send");
      comm_.send(t.data_ptr(), numel(t), dtype_of(t), dst);
    });
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int) override {
    return run(c10d::OpType::RECV, "spark:recv", tensors, [&] {
      const auto& t = single(tensors, "recv");
      comm_.recv(t.data_ptr(), numel(t), dtype_of(t), src);
    });
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    return run(c10d::OpType::BARRIER, "spark:barrier", {}, [&] { comm_.barrier(); });
  }

 private:
  static std::size_t numel(const at::Tensor& t) { return static_cast<std::size_t>(t.numel()); }

  // Splits along dim 0 -> element counts and displacements.
  void counts(const at::Tensor& t, const std::vector<std::int64_t>& splits,
              std::vector<std::size_t>& c, std::vector<std::size_t>& d, const char* what) const {
    const auto n = static_cast<std::size_t>(getSize());
    const auto rows = t.dim() == 0 ? 1 : t.size(0);
    const auto per_row = rows == 0 ? 0 : static_cast<std::size_t>(t.numel() / rows);
    c.assign(n, 0);
    d.assign(n, 0);
    std::size_t off = 0;
    for (std::size_t p = 0; p < n; ++p) {
      const auto k = splits.empty() ? static_cast<std::size_t>(rows) / n
                                    : static_cast<std::size_t>(splits.at(p));
      c[p] = k * per_row;
      d[p] = off;
      off += c[p];
    }
    TORCH_CHECK(splits.empty() || splits.size() == n, "backend spark: all_to_all_single: ", what,
                " split sizes need one entry per rank");
    TORCH_CHECK(off <= static_cast<std::size_t>(t.numel()),
                "backend spark: all_to_all_single: ", what,
                " split sizes add up to more rows than the tensor has");
  }

  template <class F>
  c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, const char* title,
                                     std::vector<at::Tensor> outputs, F&& f) {
    std::exception_ptr error;
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
    return c10::make_intrusive<SparkWork>(getRank(), type, title, std::move(outputs), error);
  }

  Communicator comm_;
};

c10::intrusive_ptr<c10d::ProcessGroup> create(const c10::intrusive_ptr<c10d::Store>& store,
                                              int rank, int size, py::object /*timeout*/) {
  // torch's timeout is not used: SPARKNET_ROCE_TIMEOUT_MS bounds every wait on a peer,
  // SPARK_JOIN_TIMEOUT_MS the wire-up (docs/python.md).
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  {
    py::gil_scoped_release nogil;  // the wire-up waits for every rank of the group
    pg = c10::make_intrusive<ProcessGroupSpark>(store, rank, size);
  }
  return pg;
}

ProcessGroupSpark& spark_group(const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
  auto* g = dynamic_cast<ProcessGroupSpark*>(pg.get());
  if (g == nullptr)
    throw py::type_error("not a process group of backend \"spark\" (backend " +
                         pg->getBackendName() + ")");
  return *g;
}

}  // namespace

PYBIND11_MODULE(_c10d, m) {
  m.doc() = "torch.distributed backend \"spark\" (registered by sparkrun.torch)";
  m.def("create_process_group", &create, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout") = py::none(),
        "The creator torch.distributed.Backend.register_backend is given.");
  m.def(
      "failure",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) -> std::optional<std::string> {
        auto f = spark_group(pg).comm().failure();
        if (!f) return std::nullopt;
        return to_string(*f);
      },
      py::arg("group"), "The group's one-line failure record, or None.");
  m.def(
      "set_timeout_ms",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg, std::uint32_t ms) {
        if (ms == 0) throw py::value_error("set_timeout_ms: give >= 1 ms");
        spark_group(pg).comm().set_timeout_ms(ms);
      },
      py::arg("group"), py::arg("ms"));
}

}  // namespace spark::python
