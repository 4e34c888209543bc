// libspark._c10d: the torch.distributed backend "spark", a c10d::Backend over libspark for
// torch 2.x (docs/python.md). One translation unit on purpose: libtorch's headers cost most
// of the build time, so they are parsed once.
//
// Every group wires up over the c10d Store torch hands in (spark::init(store, rank, size)),
// so dist.new_group gets its own communicator as with Gloo and NCCL. Each call returns a Work
// at once; the operation runs on the group's OpQueue (op_queue.hpp): on its progress thread
// when the caller goes on (async_op=True), in the caller's thread when it waits at once. A
// failure (timeout, a peer that left) finishes the Work and its future with the one-line
// record.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "op_queue.hpp"
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

// The dtypes libspark reduces. Operations that only move data take any dtype, as bytes.
DType reduce_dtype_of(const at::Tensor& t) {
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
      TORCH_CHECK(false, "backend spark: cannot reduce ", t.scalar_type(),
                  " tensors; reductions take float32, float64, float16, bfloat16, int32, int64 "
                  "or uint8 (convert with t.to(torch.float32), or use gloo for this group)");
  }
}

const at::Tensor& checked(const at::Tensor& t) {
  // No copy to host behind the user's back: a silent device-host round trip per call would
  // hide where the time goes.
  TORCH_CHECK(t.device().is_cpu(), "backend spark: ", t.device(),
              " tensors are not supported: backend spark takes CPU tensors; map CUDA tensors to "
              "nccl with init_process_group(\"cpu:spark,cuda:nccl\")");
  TORCH_CHECK(t.is_contiguous(),
              "backend spark: the tensor is not contiguous; pass t.contiguous()");
  return t;
}

std::size_t elements(const at::Tensor& t) {
  return static_cast<std::size_t>(t.numel());
}
std::size_t byte_size(const at::Tensor& t) {
  return elements(t) * t.element_size();
}

// torch's reduce op; PREMUL_SUM carries its factor, applied to the input before a sum.
struct Reduction {
  ReduceOp op = ReduceOp::sum;
  std::optional<at::Tensor> premul;  // 0-d factor, in the tensor's dtype
};

Reduction reduction_of(const c10d::ReduceOp& op, const at::Tensor& like) {
  switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::SUM:
      return {ReduceOp::sum, std::nullopt};
    case c10d::ReduceOp::PRODUCT:
      return {ReduceOp::prod, std::nullopt};
    case c10d::ReduceOp::MIN:
      return {ReduceOp::min, std::nullopt};
    case c10d::ReduceOp::MAX:
      return {ReduceOp::max, std::nullopt};
    case c10d::ReduceOp::AVG:
      return {ReduceOp::avg, std::nullopt};
    case c10d::ReduceOp::PREMUL_SUM: {
      const auto* s = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(s != nullptr, "backend spark: PREMUL_SUM without its factor");
      at::Tensor f = s->tensor_factor.defined()
                         ? s->tensor_factor.to(like.options()).reshape({})
                         : at::scalar_tensor(s->double_factor, like.options());
      return {ReduceOp::sum, std::move(f)};
    }
    default:
      TORCH_CHECK(false, "backend spark: ReduceOp ", static_cast<int>(op.op_),
                  " is not supported; use SUM, AVG, PRODUCT, MIN, MAX or PREMUL_SUM");
  }
}

void same_shape_dtype(const at::Tensor& a, const at::Tensor& b, const char* op) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "backend spark: ", op,
              ": tensors of different dtypes (", a.scalar_type(), " vs ", b.scalar_type(), ")");
  TORCH_CHECK(a.numel() == b.numel(), "backend spark: ", op, ": tensors of ", a.numel(), " and ",
              b.numel(), " elements; they must match");
}

// The tensors' elements one after another (any shapes, 0-d too).
at::Tensor flat_cat(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  flat.reserve(ts.size());
  for (const auto& t : ts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

const at::Tensor& single(const std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(ts.size() == 1, "backend spark: ", op, " takes one tensor per call, got ", ts.size());
  return checked(ts[0]);
}

const c10::TypePtr& tensor_list_type() {
  static const c10::TypePtr type = c10::ListType::create(c10::TensorType::get());
  return type;
}

// A Work whose operation runs on the group's queue. wait() first runs what is queued when
// the progress thread has not started it (a synchronous call), then waits as torch's Work does
// (rethrowing the operation's error).
class SparkWork final : public c10d::Work {
 public:
  SparkWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
            std::shared_ptr<OpQueue> queue)
      : Work(rank, type, title),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(tensor_list_type())),
        queue_(std::move(queue)) {}

  void set_ticket(OpQueue::Ticket t) noexcept { ticket_ = t; }

  // Called once, after the operation ran. The future first: once the Work says it is
  // completed, its future's value is there.
  void complete(std::exception_ptr error) {
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
    finish(error);
  }

  bool wait(std::chrono::milliseconds timeout) override {
    if (timeout == kNoTimeout) queue_->wait(ticket_);
    return Work::wait(timeout);
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<OpQueue> queue_;
  OpQueue::Ticket ticket_ = 0;
};

class SparkBackend final : public c10d::Backend {
 public:
  SparkBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
               std::uint32_t timeout_ms)
      : Backend(rank, size),
        comm_(spark::init(std::make_shared<TorchStore>(store), rank, size)),
        queue_(OpQueue::make()) {
    if (timeout_ms > 0) comm_.set_timeout_ms(timeout_ms);
  }

  ~SparkBackend() override { drain(); }

  // Runs every operation submitted so far (they use comm_). Their futures' callbacks may take
  // the GIL, so it must not be held here.
  void drain() {
    if (Py_IsInitialized() && PyGILState_Check()) {
      py::gil_scoped_release nogil;
      queue_->wait(queue_->last());
    } else {
      queue_->wait(queue_->last());
    }
  }

  const std::string getBackendName() const override { return "spark"; }
  Communicator& comm() noexcept { return comm_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    const auto& t = single(tensors, "broadcast");
    const int root = static_cast<int>(opts.rootRank);
    return enqueue(c10d::OpType::BROADCAST, "spark:broadcast", tensors, [this, t, root] {
      comm_.broadcast(t.data_ptr(), byte_size(t), DType::u8, root);
    });
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    for (const auto& t : tensors) reduce_dtype_of(checked(t));
    std::vector<Reduction> rs;
    for (const auto& t : tensors) rs.push_back(reduction_of(opts.reduceOp, t));
    return enqueue(c10d::OpType::ALLREDUCE, "spark:all_reduce", tensors, [this, tensors, rs] {
      for (std::size_t i = 0; i < tensors.size(); ++i) {
        const auto& t = tensors[i];
        if (rs[i].premul) t.mul_(*rs[i].premul);
        comm_.allreduce(t.data_ptr(), t.data_ptr(), elements(t), reduce_dtype_of(t), rs[i].op);
      }
    });
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override {
    return allreduce(tensors, opts);
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    const auto& t = single(tensors, "reduce");
    reduce_dtype_of(t);
    auto r = reduction_of(opts.reduceOp, t);
    const bool root = getRank() == opts.rootRank;
    return enqueue(c10d::OpType::REDUCE, "spark:reduce", tensors, [this, t, r, root] {
      // Only the root's tensor changes.
      at::Tensor in = r.premul ? t.mul(*r.premul) : t;
      at::Tensor out = root ? t : at::empty_like(t);
      comm_.allreduce(in.data_ptr(), out.data_ptr(), elements(t), reduce_dtype_of(t), r.op);
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions&) override {
    const auto& in = single(inputs, "all_gather");
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                "backend spark: all_gather needs one output list of ", getSize(), " tensors");
    for (auto& o : outputs[0]) same_shape_dtype(checked(o), in, "all_gather");
    auto outs = outputs[0];
    return enqueue(c10d::OpType::ALLGATHER, "spark:all_gather", outs,
                   [this, in, outs] { gather_into_list(in, outs); });
  }

  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions&) override {
    TORCH_CHECK(outputs.size() == inputs.size(),
                "backend spark: all_gather_coalesced needs one output list per input");
    std::vector<at::Tensor> flat;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      TORCH_CHECK(static_cast<int>(outputs[i].size()) == getSize(),
                  "backend spark: all_gather_coalesced needs output lists of ", getSize(),
                  " tensors");
      for (auto& o : outputs[i]) same_shape_dtype(checked(o), checked(inputs[i]), "all_gather");
      flat.insert(flat.end(), outputs[i].begin(), outputs[i].end());
    }
    return enqueue(c10d::OpType::ALLGATHER_COALESCED, "spark:all_gather_coalesced", flat,
                   [this, inputs, outputs] {
                     for (std::size_t i = 0; i < inputs.size(); ++i)
                       gather_into_list(inputs[i], outputs[i]);
                   });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions&) override {
    check_gather_base(output, input);
    return enqueue(c10d::OpType::_ALLGATHER_BASE, "spark:all_gather_into_tensor", {output},
                   [this, output, input] {
                     comm_.allgather(input.data_ptr(), output.data_ptr(), byte_size(input),
                                     DType::u8);
                   });
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions&) override {
    TORCH_CHECK(outputs.size() == inputs.size(),
                "backend spark: all_gather_into_tensor_coalesced needs one output per input");
    for (std::size_t i = 0; i < inputs.size(); ++i) check_gather_base(outputs[i], inputs[i]);
    return enqueue(c10d::OpType::COALESCED, "spark:all_gather_into_tensor_coalesced", outputs,
                   [this, outputs, inputs] {
                     for (std::size_t i = 0; i < inputs.size(); ++i)
                       comm_.allgather(inputs[i].data_ptr(), outputs[i].data_ptr(),
                                       byte_size(inputs[i]), DType::u8);
                   });
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    const auto& out = single(outputs, "reduce_scatter");
    reduce_dtype_of(out);
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                "backend spark: reduce_scatter needs one input list of ", getSize(), " tensors");
    for (auto& i : inputs[0]) same_shape_dtype(checked(i), out, "reduce_scatter");
    auto ins = inputs[0];
    auto r = reduction_of(opts.reduceOp, out);
    return enqueue(c10d::OpType::REDUCE_SCATTER, "spark:reduce_scatter", outputs,
                   [this, out, ins, r] {
                     auto flat = flat_cat(ins);
                     scatter_reduced(flat, out, r);
                   });
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    check_scatter_base(output, input);
    auto r = reduction_of(opts.reduceOp, output);
    return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, "spark:reduce_scatter_tensor", {output},
                   [this, output, input, r] { scatter_reduced(input, output, r); });
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(),
                "backend spark: reduce_scatter_tensor_coalesced needs one output per input");
    std::vector<Reduction> rs;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      check_scatter_base(outputs[i], inputs[i]);
      rs.push_back(reduction_of(opts.reduceOp, outputs[i]));
    }
    return enqueue(c10d::OpType::COALESCED, "spark:reduce_scatter_tensor_coalesced", outputs,
                   [this, outputs, inputs, rs] {
                     for (std::size_t i = 0; i < inputs.size(); ++i)
                       scatter_reduced(inputs[i], outputs[i], rs[i]);
                   });
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<std::int64_t>& out_splits,
                                               std::vector<std::int64_t>& in_splits,
                                               const c10d::AllToAllOptions&) override {
    checked(input);
    checked(output);
    TORCH_CHECK(input.scalar_type() == output.scalar_type(),
                "backend spark: all_to_all_single: input and output dtypes differ");
    const auto n = static_cast<std::size_t>(getSize());
    if (out_splits.empty() && in_splits.empty()) {
      TORCH_CHECK(input.numel() == output.numel() && input.dim() > 0 && input.size(0) % n == 0 &&
                      output.dim() > 0 && output.size(0) % n == 0,
                  "backend spark: all_to_all_single without split sizes needs input and output "
                  "of equal size whose dim 0 divides by the group size (",
                  n, ")");
      return enqueue(c10d::OpType::ALLTOALL_BASE, "spark:all_to_all_single", {output},
                     [this, output, input, n] {
                       comm_.alltoall(input.data_ptr(), output.data_ptr(), byte_size(input) / n,
                                      DType::u8);
                     });
    }
    auto in = byte_layout(input, in_splits, "input");
    auto out = byte_layout(output, out_splits, "output");
    return enqueue(c10d::OpType::ALLTOALL_BASE, "spark:all_to_all_single", {output},
                   [this, output, input, in, out] {
                     comm_.alltoallv(input.data_ptr(), in.counts.data(), in.displs.data(),
                                     output.data_ptr(), out.counts.data(), out.displs.data(),
                                     DType::u8);
                   });
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions&) override {
    const auto n = static_cast<std::size_t>(getSize());
    TORCH_CHECK(inputs.size() == n && outputs.size() == n, "backend spark: all_to_all needs ", n,
                " input and ", n, " output tensors");
    Layout in, out;
    for (std::size_t p = 0; p < n; ++p) {
      checked(inputs[p]);
      checked(outputs[p]);
      TORCH_CHECK(inputs[p].scalar_type() == inputs[0].scalar_type() &&
                      outputs[p].scalar_type() == inputs[0].scalar_type(),
                  "backend spark: all_to_all: tensors of different dtypes");
      in.append(byte_size(inputs[p]));
      out.append(byte_size(outputs[p]));
    }
    return enqueue(
        c10d::OpType::ALLTOALL, "spark:all_to_all", outputs, [this, outputs, inputs, in, out] {
          auto packed = flat_cat(inputs);
          auto received = at::empty({static_cast<std::int64_t>(out.total)},
                                    at::TensorOptions().dtype(at::kByte));
          comm_.alltoallv(packed.data_ptr(), in.counts.data(), in.displs.data(),
                          received.data_ptr(), out.counts.data(), out.displs.data(), DType::u8);
          for (std::size_t p = 0; p < outputs.size(); ++p)
            std::memcpy(outputs[p].data_ptr(),
                        static_cast<std::byte*>(received.data_ptr()) + out.displs[p],
                        out.counts[p]);
        });
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    const auto& in = single(inputs, "gather");
    const int root = static_cast<int>(opts.rootRank);
    std::vector<at::Tensor> outs;
    if (getRank() == root) {
      TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                  "backend spark: gather needs one output list of ", getSize(), " tensors");
      for (auto& o : outputs[0]) same_shape_dtype(checked(o), in, "gather");
      outs = outputs[0];
    }
    return enqueue(c10d::OpType::GATHER, "spark:gather", outs, [this, in, outs, root] {
      if (getRank() != root) {
        comm_.send(in.data_ptr(), byte_size(in), DType::u8, root);
        return;
      }
      for (int r = 0; r < getSize(); ++r) {
        const auto& o = outs[static_cast<std::size_t>(r)];
        if (r == root) {
          o.copy_(in);
        } else {
          comm_.recv(o.data_ptr(), byte_size(o), DType::u8, r);
        }
      }
    });
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    const auto& out = single(outputs, "scatter");
    const int root = static_cast<int>(opts.rootRank);
    std::vector<at::Tensor> ins;
    if (getRank() == root) {
      TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                  "backend spark: scatter needs one input list of ", getSize(), " tensors");
      for (auto& i : inputs[0]) same_shape_dtype(checked(i), out, "scatter");
      ins = inputs[0];
    }
    return enqueue(c10d::OpType::SCATTER, "spark:scatter", outputs, [this, out, ins, root] {
      if (getRank() != root) {
        comm_.recv(out.data_ptr(), byte_size(out), DType::u8, root);
        return;
      }
      for (int r = 0; r < getSize(); ++r) {
        const auto& i = ins[static_cast<std::size_t>(r)];
        if (r == root) {
          out.copy_(i);
        } else {
          comm_.send(i.data_ptr(), byte_size(i), DType::u8, r);
        }
      }
    });
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int) override {
    const auto& t = single(tensors, "send");
    return enqueue(c10d::OpType::SEND, "spark:send", tensors,
                   [this, t, dst] { comm_.send(t.data_ptr(), byte_size(t), DType::u8, dst); });
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int) override {
    const auto& t = single(tensors, "recv");
    return enqueue(c10d::OpType::RECV, "spark:recv", tensors,
                   [this, t, src] { comm_.recv(t.data_ptr(), byte_size(t), DType::u8, src); });
  }

  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>&, int) override {
    TORCH_CHECK(false,
                "backend spark: recv without a source rank is not supported; name the sender "
                "(dist.recv(t, src=R))");
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    return enqueue(c10d::OpType::BARRIER, "spark:barrier", {}, [this] { comm_.barrier(); });
  }

  // torch's _coalescing_manager: the operations issued in between run in order as always;
  // the Work of endCoalescing finishes after the last of them.
  void startCoalescing() override { coalescing_ = true; }
  c10::intrusive_ptr<c10d::Work> endCoalescing() override {
    TORCH_CHECK(coalescing_, "backend spark: endCoalescing without startCoalescing");
    coalescing_ = false;
    return enqueue(c10d::OpType::COALESCED, "spark:coalesced", {}, [this] {
      if (auto f = comm_.failure()) throw CommFailure(*f);
    });
  }

 private:
  // Element counts and displacements in bytes, one per rank.
  struct Layout {
    std::vector<std::size_t> counts, displs;
    std::size_t total = 0;
    void append(std::size_t bytes) {
      counts.push_back(bytes);
      displs.push_back(total);
      total += bytes;
    }
  };

  template <class F>
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* title,
                                         std::vector<at::Tensor> outputs, F op) {
    auto work = c10::make_intrusive<SparkWork>(getRank(), type, title, outputs, queue_);
    // The operation holds its Work (and, through its captures, its tensors) until it has run.
    auto error = std::make_shared<std::exception_ptr>();
    auto ticket = queue_->submit(
        [error, op = std::move(op)]() mutable noexcept {
          try {
            op();
          } catch (...) {
            *error = std::current_exception();
          }
        },
        // After the communicator is free again: then() callbacks may issue collectives.
        [work, error]() noexcept {
          try {
            work->complete(*error);
          } catch (...) {  // a future callback that threw: torch logs those itself
          }
        });
    work->set_ticket(ticket);
    return work;
  }

  void gather_into_list(const at::Tensor& in, const std::vector<at::Tensor>& outs) {
    auto flat = at::empty({static_cast<std::int64_t>(byte_size(in)) * getSize()},
                          at::TensorOptions().dtype(at::kByte));
    comm_.allgather(in.data_ptr(), flat.data_ptr(), byte_size(in), DType::u8);
    for (int r = 0; r < getSize(); ++r)
      std::memcpy(outs[static_cast<std::size_t>(r)].data_ptr(),
                  static_cast<std::byte*>(flat.data_ptr()) + byte_size(in) * r, byte_size(in));
  }

  void check_gather_base(const at::Tensor& output, const at::Tensor& input) const {
    checked(input);
    checked(output);
    TORCH_CHECK(
        output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * getSize(),
        "backend spark: all_gather_into_tensor needs an output of ", getSize(), " * ",
        input.numel(), " elements of the input's dtype");
  }

  void check_scatter_base(const at::Tensor& output, const at::Tensor& input) const {
    checked(input);
    checked(output);
    reduce_dtype_of(output);
    TORCH_CHECK(
        output.scalar_type() == input.scalar_type() && input.numel() == output.numel() * getSize(),
        "backend spark: reduce_scatter_tensor needs an input of ", getSize(), " * ", output.numel(),
        " elements of the output's dtype");
  }

  // The caller's input is never changed: PREMUL_SUM scales a copy.
  void scatter_reduced(const at::Tensor& input, const at::Tensor& output, const Reduction& r) {
    at::Tensor in = r.premul ? input.mul(*r.premul) : input;
    comm_.reduce_scatter(in.data_ptr(), output.data_ptr(), elements(output),
                         reduce_dtype_of(output), r.op);
  }

  // all_to_all_single's splits (rows along dim 0) -> bytes per rank.
  Layout byte_layout(const at::Tensor& t, const std::vector<std::int64_t>& splits,
                     const char* what) const {
    const auto n = static_cast<std::size_t>(getSize());
    TORCH_CHECK(splits.empty() || splits.size() == n, "backend spark: all_to_all_single: ", what,
                " split sizes need one entry per rank, got ", splits.size());
    const auto rows = t.dim() == 0 ? 1 : t.size(0);
    const auto row_bytes = rows == 0 ? 0 : byte_size(t) / static_cast<std::size_t>(rows);
    TORCH_CHECK(!splits.empty() || static_cast<std::size_t>(rows) % n == 0,
                "backend spark: all_to_all_single: the ", what,
                " has no split sizes and its dim 0 (", rows,
                ") does not divide by the group size (", n, "); give ", what, "_split_sizes");
    Layout l;
    for (std::size_t p = 0; p < n; ++p) {
      TORCH_CHECK(splits.empty() || splits[p] >= 0, "backend spark: all_to_all_single: ", what,
                  " split sizes must not be negative");
      const auto k =
          splits.empty() ? static_cast<std::size_t>(rows) / n : static_cast<std::size_t>(splits[p]);
      l.append(k * row_bytes);
    }
    TORCH_CHECK(l.total <= byte_size(t), "backend spark: all_to_all_single: ", what,
                " split sizes add up to more rows than the tensor has");
    return l;
  }

  Communicator comm_;
  std::shared_ptr<OpQueue> queue_;
  bool coalescing_ = false;
};

c10::intrusive_ptr<c10d::Backend> create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                         int size, std::uint32_t timeout_ms) {
  py::gil_scoped_release nogil;  // the wire-up waits for every rank of the group
  return c10::make_intrusive<SparkBackend>(store, rank, size, timeout_ms);
}

SparkBackend& spark_backend(const c10::intrusive_ptr<c10d::Backend>& b) {
  auto* s = dynamic_cast<SparkBackend*>(b.get());
  if (s == nullptr)
    throw py::type_error("not a backend \"spark\" (backend " + b->getBackendName() + ")");
  return *s;
}

}  // namespace

PYBIND11_MODULE(_c10d, m) {
  m.doc() = "torch.distributed backend \"spark\" (registered by libspark.torch)";
  // The Python type derives from torch's Backend, so torch registers it per device and names
  // its group (DeviceMesh and DTensor look groups up by name).
  py::module_::import("torch.distributed");
  py::class_<SparkBackend, c10d::Backend, c10::intrusive_ptr<SparkBackend>>(m, "SparkBackend");
  m.def("create_backend", &create, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout_ms"),
        "A backend for one group; timeout_ms 0 keeps libspark's (SPARKNET_ROCE_TIMEOUT_MS).");
  m.def(
      "failure",
      [](const c10::intrusive_ptr<c10d::Backend>& b) -> std::optional<std::string> {
        auto f = spark_backend(b).comm().failure();
        if (!f) return std::nullopt;
        return to_string(*f);
      },
      py::arg("backend"), "The group's one-line failure record, or None.");
  m.def(
      "set_timeout_ms",
      [](const c10::intrusive_ptr<c10d::Backend>& b, std::uint32_t ms) {
        if (ms == 0) throw py::value_error("set_timeout_ms: give >= 1 ms");
        spark_backend(b).comm().set_timeout_ms(ms);
      },
      py::arg("backend"), py::arg("ms"));
  m.def(
      "drain", [](const c10::intrusive_ptr<c10d::Backend>& b) { spark_backend(b).drain(); },
      py::arg("backend"), "Runs every operation submitted so far (at exit: before finalization).");
  m.def(
      "timeout_ms",
      [](const c10::intrusive_ptr<c10d::Backend>& b) {
        return spark_backend(b).comm().timeout_ms();
      },
      py::arg("backend"));
}

}  // namespace spark::python
